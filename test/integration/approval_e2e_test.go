package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

var buildCLIOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolhooks-cli-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kubectl-toolhooks")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-toolhooks")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kubectl-toolhooks: %v\n%s", err, out)
	}
	return bin, nil
})

// approvalStory is the state the steps of TestApprovalsEndToEnd share.
type approvalStory struct {
	t        *testing.T
	ns, ws   string
	cli      string
	gws      []*gatewayProc
	approver string // kubeconfig of carol, who holds the approve verb
	noVerb   string // kubeconfig of mallory, who may write status but not approve
	sender   string // kubeconfig of alice, the caller, who holds the approve verb too
}

// kubectlToolhooks runs the real CLI with kubeconfig and returns its output and exit error.
func (s *approvalStory) kubectlToolhooks(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(s.cli, append(args, "--kubeconfig", kubeconfig, "-n", s.ns)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pending waits for a Pending approval of path that is not one of seen and returns it.
func (s *approvalStory) pending(path string, seen ...string) *policyv1alpha1.ToolCallApproval {
	s.t.Helper()
	var found *policyv1alpha1.ToolCallApproval
	poll(s.t, "a Pending ToolCallApproval for "+path, func() (bool, string) {
		var list policyv1alpha1.ToolCallApprovalList
		if err := testEnv.Client.List(context.Background(), &list, client.InNamespace(s.ns)); err != nil {
			return false, err.Error()
		}
		var states []string
		for i := range list.Items {
			a := &list.Items[i]
			states = append(states, a.Name+"="+string(a.Status.State))
			if a.Status.State != policyv1alpha1.ApprovalPending || strings.Contains(strings.Join(seen, ","), a.Name) {
				continue
			}
			for _, p := range a.Spec.Arguments {
				if p.Name == "path" && p.Value == fmt.Sprintf("%q", path) {
					found = a
					return true, ""
				}
			}
		}
		return false, strings.Join(states, " ")
	})
	return found
}

func (s *approvalStory) state(name string) policyv1alpha1.ToolCallApproval {
	s.t.Helper()
	var a policyv1alpha1.ToolCallApproval
	if err := testEnv.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: name}, &a); err != nil {
		s.t.Fatal(err)
	}
	return a
}

// callAsync starts a call on gateway g as alice and returns a channel with
// its result; a call whose gateway goes away yields Status "error: ...".
func (s *approvalStory) callAsync(g *gatewayProc, tool, args string) <-chan callResult {
	ch := make(chan callResult, 1)
	addr := g.addr
	go func() {
		body := fmt.Sprintf(`{"sessionId":"s-1","channelId":"test","senderId":"alice","tool":%q,"arguments":%s}`, tool, args)
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tool-calls", strings.NewReader(body))
		if err != nil {
			ch <- callResult{Status: "error: " + err.Error()}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- callResult{Status: "error: " + err.Error()}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		var r callResult
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			r.Status = "error: " + err.Error()
		}
		ch <- r
	}()
	return ch
}

func (s *approvalStory) fileExists(name string) bool {
	_, err := os.Stat(filepath.Join(s.ws, name))
	return err == nil
}

// TestApprovalsEndToEnd asks for approval through real gateway processes,
// decides with the real CLI as real users under RBAC and the admission
// policy, and checks each call's side effect on the workspace.
func TestApprovalsEndToEnd(t *testing.T) { //nolint:gocyclo // one ordered end-to-end story
	ctx := context.Background()
	const ns = "e2e-approvals"
	mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	ensureControllerServiceAccount(t)
	testEnv.ApplyApprovalPolicy(t)
	cli, err := buildCLIOnce()
	if err != nil {
		t.Fatal(err)
	}
	s := &approvalStory{t: t, ns: ns, ws: t.TempDir(), cli: cli}
	if err := os.MkdirAll(filepath.Join(s.ws, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	// carol may approve through her group only, as most approvers do.
	s.approver, _ = testEnv.User(t, "carol", "release-managers")
	s.noVerb, _ = testEnv.User(t, "mallory")
	s.sender, _ = testEnv.User(t, "alice")
	mustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "release-managers-approve"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testenv.ApproverRole},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "release-managers"}}})
	testEnv.BindRole(t, ns, testenv.ApproverRole, "alice")
	// mallory may write approvals' status but holds no approve verb.
	mustCreate(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "approval-status-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{policyv1alpha1.GroupVersion.Group},
			Resources: []string{"toolcallapprovals", "toolcallapprovals/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}}}})
	testEnv.BindRole(t, ns, "approval-status-writer", "mallory")

	port := freePort(t)
	kubeconfig := testEnv.AdminKubeconfig(t)
	for i, ip := range []string{"127.0.0.14", "127.0.0.15"} {
		pod := createGatewayPod(t, ns, fmt.Sprintf("gw-%d", i), ip)
		// Other tests' controllers push to every gateway pod they see.
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), pod) })
		s.gws = append(s.gws, startGateway(t, ip, port, "--workspace", s.ws, "--kubeconfig", kubeconfig,
			"--controller-identity", controllerIdentity, "--pod-name", pod.Name, "--pod-namespace", ns,
			"--pod-uid", string(pod.UID), "--approval-wait", "30s"))
	}
	startController(t, port)
	expiry := metav1.Duration{Duration: 10 * time.Minute}
	policy := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "coding"},
		Spec: policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: s.ws, Only: true},
			ForbiddenPathGlobs: []string{"**/.env"},
			Ask:                &policyv1alpha1.AskRules{PathGlobs: []string{"deploy/**"}, Expiry: &expiry}}}
	mustCreate(t, policy)
	poll(t, "the policy enforced by both gateways", func() (bool, string) {
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(policy.Status.Conditions, policyv1alpha1.ConditionEnforced)
		return c != nil && c.Status == metav1.ConditionTrue && policy.Status.Gateways.Enforcing == 2, fmt.Sprint(c)
	})

	// 1. The call waits; the sender and a user without the verb cannot decide it; carol approves; it runs once.
	write := `{"path":"deploy/app.yaml","content":"replicas: 3\n"}`
	first := s.callAsync(s.gws[0], "write_file", write)
	a := s.pending("deploy/app.yaml")
	if a.Spec.Sender.Username != "alice" || a.Spec.Tool != "write_file" || a.Spec.Session != "s-1" ||
		a.Spec.Policy.Name != "coding" || a.Spec.Policy.Rule != "askPathGlobs" || !strings.HasPrefix(a.Spec.ArgumentsDigest, "sha256:") {
		t.Fatalf("approval spec %+v", a.Spec)
	}
	if out, err := s.kubectlToolhooks(s.noVerb, "approve", a.Name); err == nil {
		t.Fatalf("mallory, without the approve verb, approved: %s", out)
	}
	if out, err := s.kubectlToolhooks(s.sender, "approve", a.Name); err == nil || !strings.Contains(out, "your own tool call") {
		t.Fatalf("alice approved her own call: %v %s", err, out)
	}
	if st := s.state(a.Name); st.Status.State != policyv1alpha1.ApprovalPending || s.fileExists("deploy/app.yaml") {
		t.Fatalf("after refused decisions: state %s, file written %v", st.Status.State, s.fileExists("deploy/app.yaml"))
	}
	if out, err := s.kubectlToolhooks(s.approver, "approve", a.Name, "--reason", "planned rollout"); err != nil {
		t.Fatalf("carol approving: %v %s", err, out)
	}
	if r := <-first; r.Status != "succeeded" {
		t.Fatalf("the approved call = %+v %+v", r, r.Denial)
	}
	if b, err := os.ReadFile(filepath.Join(s.ws, "deploy/app.yaml")); err != nil || string(b) != "replicas: 3\n" {
		t.Fatalf("deploy/app.yaml = %q, %v", b, err)
	}
	if st := s.state(a.Name); st.Status.State != policyv1alpha1.ApprovalUsed || st.Status.DecidedBy != "carol" ||
		!slices.Contains(st.Status.DecidedByGroups, "release-managers") {
		t.Fatalf("approval after its call: %+v", st.Status)
	}

	// 2. The grant is single-use: the identical call again needs a new
	// approval; a gateway restart while it waits loses nothing, and the
	// retried call gets the recorded decision. Changed arguments are not covered.
	if err := os.Remove(filepath.Join(s.ws, "deploy/app.yaml")); err != nil {
		t.Fatal(err)
	}
	second := s.callAsync(s.gws[1], "write_file", write)
	b := s.pending("deploy/app.yaml", a.Name)
	s.gws[1].stop()
	<-second
	s.gws[1].start()
	poll(t, "the restarted gateway repushed", func() (bool, string) { return s.gws[1].ready(), "not ready" })
	if s.fileExists("deploy/app.yaml") {
		t.Fatal("the second identical call ran on the first approval")
	}
	if out, err := s.kubectlToolhooks(s.approver, "approve", b.Name); err != nil {
		t.Fatalf("approving the second request: %v %s", err, out)
	}
	changed := s.callAsync(s.gws[0], "write_file", `{"path":"deploy/app.yaml","content":"replicas: 300\n"}`)
	c := s.pending("deploy/app.yaml", a.Name, b.Name)
	if r := s.gws[1].call("write_file", write); r.Status != "succeeded" {
		t.Fatalf("the retried approved call after a restart = %+v %+v", r, r.Denial)
	}
	if st := s.state(b.Name); st.Status.State != policyv1alpha1.ApprovalUsed {
		t.Fatalf("second approval after its call: %+v", st.Status)
	}

	// 3. A denial with a reason reaches the waiting caller; nothing runs.
	if out, err := s.kubectlToolhooks(s.approver, "deny", c.Name, "--reason", "300 replicas is too many"); err != nil {
		t.Fatalf("denying: %v %s", err, out)
	}
	r := <-changed
	if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != "approvalDenied" ||
		!strings.Contains(r.Denial.Reason, "300 replicas is too many") || !strings.Contains(r.Denial.Reason, "carol") {
		t.Fatalf("the denied call = %+v %+v", r, r.Denial)
	}
	if got, _ := os.ReadFile(filepath.Join(s.ws, "deploy/app.yaml")); string(got) != "replicas: 3\n" {
		t.Fatalf("the denied call changed the file: %q", got)
	}

	// 4. Expiry denies: a short expiry passes while the call waits.
	policy.Spec.Ask.Expiry = &metav1.Duration{Duration: 2 * time.Second}
	if err := testEnv.Client.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	poll(t, "the short expiry enforced", func() (bool, string) {
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(policy.Status.Conditions, policyv1alpha1.ConditionEnforced)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == policy.Generation &&
			policy.Status.Gateways.Enforcing == 2, fmt.Sprint(c)
	})
	if r := s.gws[0].call("write_file", `{"path":"deploy/late.yaml","content":"x"}`); r.Status != "denied" ||
		r.Denial == nil || r.Denial.Rule != "approvalExpired" || s.fileExists("deploy/late.yaml") {
		t.Fatalf("a call whose approval expired = %+v %+v", r, r.Denial)
	}

	// 5. kubectl describe tells each request's story, on the request and on
	// the policy that asked; the gateways' metrics count the outcomes.
	s.describes("toolcallapproval", a.Name, "ToolCallApprovalRequested", "ToolCallApprovalApproved", "carol approved the write_file call by alice")
	s.describes("toolcallapproval", c.Name, "ToolCallApprovalDenied", "300 replicas is too many")
	s.describes("autonomypolicy", "coding", "ToolCallApprovalRequested", "ToolCallApprovalApproved", "ToolCallApprovalDenied",
		"ToolCallApprovalExpired")
	outcomes := map[string]float64{}
	for _, g := range s.gws {
		for _, o := range []string{"requested", "approved", "denied", "expired"} {
			outcomes[o] += g.metric(t, `toolhooks_approvals_total{outcome="`+o+`"}`)
		}
	}
	// Requested: a, c and the late one on gws[0]; gws[1] counted b's request
	// before its restart reset its counters, and its retry found the
	// decision and asked nobody. Approved: a, and b's retry.
	if want := map[string]float64{"requested": 3, "approved": 2, "denied": 1, "expired": 1}; !maps.Equal(outcomes, want) {
		t.Errorf("toolhooks_approvals_total over both gateways = %v, want %v", outcomes, want)
	}

	// 6. A contract asks about every call of a session after its first one;
	// the counts are in process here, so the calls go to one gateway.
	s.contractAsksAfterTheFirstCall()
}

// contractAsksAfterTheFirstCall creates a ContractPolicy with
// ask.afterCalls 1: a session's first read runs, its second waits for an
// approval naming the contract and rule askAfterCalls, and runs once
// approved.
func (s *approvalStory) contractAsksAfterTheFirstCall() {
	t := s.t
	if err := os.WriteFile(filepath.Join(s.ws, "notes.txt"), []byte("n"), 0o600); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	cp := &policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "paced"},
		Spec: policyv1alpha1.ContractPolicySpec{Ask: &policyv1alpha1.ContractAsk{AfterCalls: &one}}}
	mustCreate(t, cp)
	poll(t, "the contract enforced by both gateways", func() (bool, string) {
		if err := testEnv.Client.Get(context.Background(), client.ObjectKeyFromObject(cp), cp); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cp.Status.Conditions, policyv1alpha1.ConditionEnforced)
		return c != nil && c.Status == metav1.ConditionTrue && cp.Status.Gateways.Enforcing == 2, fmt.Sprint(c)
	})
	if r := s.gws[0].call("read_file", `{"path":"notes.txt"}`); r.Status != "succeeded" {
		t.Fatalf("the session's first call under the contract = %+v %+v", r, r.Denial)
	}
	second := s.callAsync(s.gws[0], "read_file", `{"path":"notes.txt"}`)
	a := s.pending("notes.txt")
	if a.Spec.Policy.Name != "paced" || a.Spec.Policy.Kind != "ContractPolicy" || a.Spec.Policy.Rule != "askAfterCalls" {
		t.Fatalf("approval of the second call: %+v", a.Spec.Policy)
	}
	if out, err := s.kubectlToolhooks(s.approver, "approve", a.Name); err != nil {
		t.Fatalf("approving the second call: %v %s", err, out)
	}
	if r := <-second; r.Status != "succeeded" {
		t.Fatalf("the approved second call = %+v %+v", r, r.Denial)
	}
}

// describes waits for kubectl describe of kind/name to show every text.
func (s *approvalStory) describes(kind, name string, texts ...string) {
	s.t.Helper()
	poll(s.t, fmt.Sprintf("kubectl describe %s %s to show %v", kind, name, texts), func() (bool, string) {
		out, err := testEnv.Kubectl(s.t, "describe", kind, "-n", s.ns, name)
		if err != nil {
			return false, err.Error()
		}
		for _, text := range texts {
			if !strings.Contains(out, text) {
				return false, out
			}
		}
		return true, out
	})
}
