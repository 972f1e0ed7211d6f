package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// TestResultPolicyFromTheClusterRedactsAndRecords applies ResultPolicies to a
// real API server; the controller pushes them to a gateway process, which
// reads real files holding credentials: the caller never sees the values,
// and kubectl describe shows on each policy which rule fired and how many
// bytes it redacted or withheld, never the values.
func TestResultPolicyFromTheClusterRedactsAndRecords(t *testing.T) {
	ctx := context.Background()
	const ns = "e2e-results"
	mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	ensureControllerServiceAccount(t)
	ws := t.TempDir()
	awsKey := "AKIA" + "Z3MSJV4WZKQEXAMP" // built here so no scanner takes the source for a leak
	dbPassword := "Sup3r" + "Secret9"
	files := map[string]string{
		"aws.ini":   "[default]\naws_access_key_id = " + awsKey + "\n",
		"db.env":    "DATABASE_URL=postgres://app:" + dbPassword + "@db.internal:5432/app\n",
		"deploy.md": "deploy to prod-7.corp.example\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	pod := createGatewayPod(t, ns, "gw", "127.0.0.5")
	gw := startGateway(t, "127.0.0.5", port, "--workspace", ws, "--kubeconfig", testEnv.AdminKubeconfig(t),
		"--controller-identity", controllerIdentity, "--pod-name", pod.Name, "--pod-namespace", ns, "--pod-uid", string(pod.UID))
	startController(t, port)

	base := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "base"},
		Spec: policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: ws, Only: true}}}
	secrets := &policyv1alpha1.ResultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secrets"},
		Spec: policyv1alpha1.ResultPolicySpec{Tools: []string{"read_file"}, Detectors: []policyv1alpha1.ResultDetector{"secrets"}}}
	hosts := &policyv1alpha1.ResultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "internal-hosts"},
		Spec: policyv1alpha1.ResultPolicySpec{Tools: []string{"*"}, Patterns: []policyv1alpha1.ResultPattern{
			{Name: "corp-host", Regex: `[a-z0-9-]+\.corp\.example`, Action: policyv1alpha1.ResultWithhold}}}}
	for _, o := range []client.Object{base, secrets, hosts} {
		mustCreate(t, o)
	}
	for _, p := range []*policyv1alpha1.ResultPolicy{secrets, hosts} {
		poll(t, "ResultPolicy "+p.Name+" to be enforced", func() (bool, string) {
			if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionEnforced)
			return c != nil && c.Status == metav1.ConditionTrue && gw.ready(), fmt.Sprint(c)
		})
	}

	r := gw.readFile("aws.ini")
	if r.Status != "succeeded" || strings.Contains(r.Result, awsKey) || !strings.Contains(r.Result, "[REDACTED:aws-access-key-id]") {
		t.Fatalf("read of aws.ini = %+v, want the key redacted", r)
	}
	r = gw.readFile("db.env")
	if r.Status != "succeeded" || strings.Contains(r.Result, dbPassword) || !strings.Contains(r.Result, "@db.internal:5432/app") {
		t.Fatalf("read of db.env = %+v, want the password redacted and the rest kept", r)
	}
	r = gw.readFile("deploy.md")
	if r.Status != "withheld" || strings.Contains(r.Result, "corp.example") || r.Withheld == nil ||
		r.Withheld.Policy.Name != "internal-hosts" || r.Withheld.Rule != "resultWithheld" {
		t.Fatalf("read of deploy.md = %+v / %+v, want the result withheld by internal-hosts", r, r.Withheld)
	}

	describe := func(name, want string, needles ...string) {
		t.Helper()
		poll(t, "kubectl describe resultpolicy "+name+" to show "+want, func() (bool, string) {
			out, err := testEnv.Kubectl(t, "describe", "resultpolicy", "-n", ns, name)
			if err != nil {
				return false, err.Error()
			}
			for _, secret := range []string{awsKey, dbPassword, "prod-7"} {
				if strings.Contains(out, secret) {
					t.Fatalf("kubectl describe shows a matched value %q:\n%s", secret, out)
				}
			}
			for _, n := range append(needles, want) {
				if !strings.Contains(out, n) {
					return false, out
				}
			}
			return true, out
		})
	}
	describe("secrets", "ToolResultRedacted", fmt.Sprintf("aws-access-key-id ×1 (%d bytes, Redact)", len(awsKey)),
		fmt.Sprintf("connection-string-password ×1 (%d bytes, Redact)", len(dbPassword)), `"read_file"`)
	describe("internal-hosts", "ToolResultWithheld", "corp-host ×1 (19 bytes, Withhold)")
}
