// Package integration holds tests against a real API server (envtest).
package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// TestCRDsInstallAndServeEveryKind proves the pipeline end to end: the CRDs
// generated into config/crd/bases install into a real API server, which then
// stores one object of each kind with its defaults applied.
func TestCRDsInstallAndServeEveryKind(t *testing.T) {
	env := testEnv
	ctx := context.Background()
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "default"} }

	objects := []client.Object{
		&policyv1alpha1.AutonomyPolicy{ObjectMeta: meta("smoke"), Spec: policyv1alpha1.AutonomyPolicySpec{
			Workspace: &policyv1alpha1.Workspace{Root: "/workspace", Only: true},
		}},
		&policyv1alpha1.ContractPolicy{ObjectMeta: meta("smoke"), Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 10}},
		&policyv1alpha1.PluginHook{ObjectMeta: meta("smoke"), Spec: policyv1alpha1.PluginHookSpec{
			Events:    []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Transport: policyv1alpha1.PluginTransport{Stdio: &policyv1alpha1.StdioTransport{Command: "node"}},
		}},
		&policyv1alpha1.ResultPolicy{ObjectMeta: meta("smoke"), Spec: policyv1alpha1.ResultPolicySpec{
			Tools: []string{"read_file"}, Detectors: []policyv1alpha1.ResultDetector{"secrets"},
		}},
	}
	for _, obj := range objects {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("Creating %T: %v", obj, err)
		}
	}

	var ap policyv1alpha1.AutonomyPolicy
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "smoke"}, &ap); err != nil {
		t.Fatal(err)
	}
	if ap.Spec.Mode != policyv1alpha1.AutonomyFull || ap.Spec.EnforcementAction != policyv1alpha1.EnforcementDeny {
		t.Errorf("AutonomyPolicy defaults = mode %q action %q, want Full and Deny", ap.Spec.Mode, ap.Spec.EnforcementAction)
	}
	var ph policyv1alpha1.PluginHook
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "smoke"}, &ph); err != nil {
		t.Fatal(err)
	}
	if ph.Spec.Timeout == nil || ph.Spec.Timeout.Duration.String() != "5s" || ph.Spec.FailurePolicy != policyv1alpha1.FailurePolicyFail {
		t.Errorf("PluginHook defaults = timeout %v failurePolicy %q, want 5s and Fail", ph.Spec.Timeout, ph.Spec.FailurePolicy)
	}
	var rp policyv1alpha1.ResultPolicy
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "smoke"}, &rp); err != nil {
		t.Fatal(err)
	}
	if rp.Spec.Action != policyv1alpha1.ResultRedact || rp.Spec.EnforcementAction != policyv1alpha1.EnforcementDeny || rp.Spec.Timeout != nil {
		t.Errorf("ResultPolicy defaults = action %q enforcementAction %q timeout %v, want Redact, Deny and none (the gateway's)",
			rp.Spec.Action, rp.Spec.EnforcementAction, rp.Spec.Timeout)
	}

	out, err := env.Kubectl(t, "get", "toolhooks", "-n", "default", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get toolhooks: %v\n%s", err, out)
	}
	for _, want := range []string{
		"autonomypolicy.policy.toolhooks.dev/smoke",
		"contractpolicy.policy.toolhooks.dev/smoke",
		"pluginhook.policy.toolhooks.dev/smoke",
		"resultpolicy.policy.toolhooks.dev/smoke",
	} {
		if !slices.Contains(strings.Split(strings.TrimSpace(out), "\n"), want) {
			t.Errorf("kubectl get toolhooks output lacks %q:\n%s", want, out)
		}
	}
}
