package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// TestSamplesApplyWithKubectl applies config/samples with the real kubectl
// (kustomize built in, strict server-side field validation) against the real
// API server, so the shipped samples pass the CRDs' schemas and CEL rules, and
// checks that the kustomization lists every sample file.
func TestSamplesApplyWithKubectl(t *testing.T) {
	const ns = "samples"
	mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	dir := filepath.Join(testenv.RepoRoot(), "config", "samples")

	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("config/samples/kustomization.yaml: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "policy_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(k.Resources, filepath.Base(f)) {
			t.Errorf("config/samples/kustomization.yaml does not list %s", filepath.Base(f))
		}
	}

	out, err := testEnv.Kubectl(t, "apply", "-k", dir, "-n", ns, "--validate=strict")
	if err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v\n%s", err, out)
	}
	out, err = testEnv.Kubectl(t, "get", "toolhooks", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get toolhooks: %v\n%s", err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	want := []string{
		"autonomypolicy.policy.toolhooks.dev/auditor",
		"autonomypolicy.policy.toolhooks.dev/coding-agent",
		"autonomypolicy.policy.toolhooks.dev/reviewers",
		"contractpolicy.policy.toolhooks.dev/ci-bot",
		"pluginhook.policy.toolhooks.dev/approval-service",
		"resultpolicy.policy.toolhooks.dev/secrets",
	}
	if !slices.Equal(got, want) {
		t.Errorf("kubectl get toolhooks = %v, want %v", got, want)
	}

	// The API server's defaults do not change what the samples say.
	var ph policyv1alpha1.PluginHook
	if err := testEnv.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "approval-service"}, &ph); err != nil {
		t.Fatal(err)
	}
	if ph.Spec.FailurePolicy != policyv1alpha1.FailurePolicyFail || ph.Spec.Timeout.Duration.String() != "3s" ||
		ph.Spec.Transport.HTTP == nil || ph.Spec.Transport.HTTP.Service == nil || ph.Spec.Transport.HTTP.Service.Port != 8080 {
		t.Errorf("approval-service as stored: %+v", ph.Spec)
	}
	var ap policyv1alpha1.AutonomyPolicy
	if err := testEnv.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "auditor"}, &ap); err != nil {
		t.Fatal(err)
	}
	if ap.Spec.Mode != policyv1alpha1.AutonomyReadOnly || ap.Spec.GatewaySelector == nil ||
		ap.Spec.GatewaySelector.MatchLabels["toolhooks.dev/agent"] != "auditor" {
		t.Errorf("auditor as stored: %+v", ap.Spec)
	}
}
