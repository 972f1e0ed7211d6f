package integration

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/toolhooks/toolhooks/internal/testenv"
)

// TestKustomizeDefaultDeploysControllerAndGateway builds config/default and
// has the API server accept it (server-side dry run), then checks the two
// workloads wire to each other through the binaries' defaults.
func TestKustomizeDefaultDeploysControllerAndGateway(t *testing.T) {
	text, err := run(tool(t, "kustomize"), "build", testenv.RepoRoot()+"/config/default")
	if err != nil {
		t.Fatal(err)
	}
	m := parseManifest(t, text)
	const ns = "toolhooks-system"
	createNamespace(t, ns) // namespaced objects cannot be dry-run into a namespace that does not exist
	kubectlApply(t, text, m, "--dry-run=server")

	ctrl := into[deployment](t, m.get(t, "Deployment", "toolhooks-controller-manager"))
	gw := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway"))
	m.get(t, "Service", "toolhooks-gateway")
	m.get(t, "ServiceAccount", "toolhooks-gateway")
	// Both binaries default the push identity to $POD_NAMESPACE/toolhooks-controller-manager.
	sa := m.get(t, "ServiceAccount", "toolhooks-controller-manager").GetName()
	if got := ctrl.Spec.Template.Spec.ServiceAccountName; got != sa {
		t.Errorf("the controller runs as %s, want %s (the push identity both binaries default to)", got, sa)
	}
	push := into[rbacv1.Role](t, m.get(t, "Role", "toolhooks-push-token-role"))
	if !slices.Equal(push.Rules[0].ResourceNames, []string{sa}) {
		t.Errorf("the push-token role is for %v, want [%s]", push.Rules[0].ResourceNames, sa)
	}
	if _, ok := gw.Spec.Template.Labels["toolhooks.dev/gateway"]; !ok {
		t.Errorf("gateway pods %v lack the toolhooks.dev/gateway label", gw.Spec.Template.Labels)
	}
	for _, a := range gw.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--metrics-bind-address") {
			t.Errorf("the controller's metrics patch reached the gateway: %q", a)
		}
	}
	if argValue(t, ctrl.Spec.Template.Spec.Containers[0].Args, "metrics-bind-address") != ":8443" {
		t.Error("the controller does not serve metrics on :8443")
	}
	checkHardened(t, "controller", ctrl.Spec.Template.Spec)
	checkHardened(t, "gateway", gw.Spec.Template.Spec)

	// The gateway reviews tokens and approvers' access cluster-wide but
	// writes Events and ToolCallApprovals only in its own namespace, as with
	// the chart.
	gwSA := m.get(t, "ServiceAccount", "toolhooks-gateway").GetName()
	cr := into[rbacv1.ClusterRole](t, m.get(t, "ClusterRole", "toolhooks-gateway-role"))
	if len(cr.Rules) != 2 || !slices.Equal(cr.Rules[0].Resources, []string{"tokenreviews"}) ||
		!slices.Equal(cr.Rules[1].Resources, []string{"subjectaccessreviews"}) {
		t.Errorf("the gateway's ClusterRole grants %+v, want tokenreviews and subjectaccessreviews only", cr.Rules)
	}
	role := into[rbacv1.Role](t, m.get(t, "Role", "toolhooks-gateway-role"))
	rb := into[rbacv1.RoleBinding](t, m.get(t, "RoleBinding", "toolhooks-gateway-rolebinding"))
	var namespaced []string
	for _, r := range role.Rules {
		namespaced = append(namespaced, r.Resources...)
	}
	if role.Namespace != ns || !slices.Equal(namespaced, []string{"events", "toolcallapprovals", "toolcallapprovals/status"}) ||
		rb.Namespace != ns || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Name != gwSA || rb.Subjects[0].Namespace != ns {
		t.Errorf("the gateway's events Role/RoleBinding: %+v %+v", role, rb)
	}
}
