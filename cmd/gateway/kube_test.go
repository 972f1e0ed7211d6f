package main

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// TestClusterModeApprover checks that cluster mode sets the
// ToolCallApprovals approver, with its metrics, when the pod's namespace is
// known, and no approver otherwise.
func TestClusterModeApprover(t *testing.T) {
	env := testenv.Start(t)
	kubeconfig := env.AdminKubeconfig(t)
	log := slog.New(slog.DiscardHandler)

	opts := gateway.Options{Registry: gateway.NewRegistry()}
	k := &kubeFlags{kubeconfig: kubeconfig, podNamespace: "default", podName: "gateway-0", approvalWait: time.Minute}
	stop, err := k.setup(t.Context(), &opts, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if opts.Approver == nil {
		t.Fatal("cluster mode with a pod namespace set no approver")
	}
	families, err := opts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(families))
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"toolhooks_approvals_total", "toolhooks_approval_decision_seconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not registered", want)
		}
	}

	noNamespace := gateway.Options{Registry: gateway.NewRegistry()}
	k = &kubeFlags{kubeconfig: kubeconfig, controllerIdentity: "system:serviceaccount:x:controller", approvalWait: time.Minute}
	stop2, err := k.setup(t.Context(), &noNamespace, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	if noNamespace.Approver != nil {
		t.Error("cluster mode without a pod namespace set an approver")
	}
}
