package gatewayk8s_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayk8s"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

const (
	sender   = "system:serviceaccount:agents:coder"
	approver = "alice@example.com"
	outsider = "mallory@example.com"
)

// approvalsEnv is one namespace of a shared envtest API server in which
// approver holds the approve verb on toolcallapprovals and outsider does not.
type approvalsEnv struct {
	env   *testenv.Env
	ns    string
	clock *testingclock.FakeClock
}

// newApprovalsEnv creates a namespace named after the test and the RBAC
// that lets approver approve there.
func newApprovalsEnv(t *testing.T, env *testenv.Env) *approvalsEnv {
	t.Helper()
	ctx := t.Context()
	ns := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-")
	ns = strings.Trim(ns[max(0, len(ns)-60):], "-")
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approvers"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{policyv1alpha1.GroupVersion.Group}, Resources: []string{"toolcallapprovals"},
			Verbs: []string{"get", "list", policyv1alpha1.ApprovalVerb},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approvers"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "approvers"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: approver}}},
		// The sender may approve too, so that only the rule against
		// approving one's own call keeps it from doing so.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sender-approves"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "approvers"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "agents", Name: "coder"}}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("Creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return &approvalsEnv{env: env, ns: ns, clock: testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
}

// approvals starts an approver for the namespace as gateway pod.
func (e *approvalsEnv) approvals(t *testing.T, pod string, bound time.Duration) *gatewayk8s.Approvals {
	t.Helper()
	a, err := gatewayk8s.NewApprovals(t.Context(), e.env.Config, gatewayk8s.ApprovalsOptions{
		Namespace: e.ns, Pod: pod, Wait: bound, Clock: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a
}

// request is a request for approval of a deploy call with args, asked by
// the test's AutonomyPolicy.
func (e *approvalsEnv) request(args string, waits bool) hooks.ApprovalRequest {
	call := hooks.NewCall("run_shell", args)
	call.SessionID, call.SenderID = "session-1", sender
	call.Caller = &hooks.Identity{Username: sender, UID: "uid-coder", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Kind: hooks.IdentityServiceAccount}
	return hooks.ApprovalRequest{
		Call: call,
		Ask: hooks.Decision{Hook: "autonomy", Rule: "askCommands", Reason: "deploys need a person's approval",
			Policy: hooks.PolicyRef{Kind: "AutonomyPolicy", Namespace: e.ns, Name: "coder", UID: "policy-uid-1"}},
		Expiry: 10 * time.Minute,
		Wait:   waits,
	}
}

// list returns the namespace's ToolCallApprovals.
func (e *approvalsEnv) list(t *testing.T) []policyv1alpha1.ToolCallApproval {
	t.Helper()
	var l policyv1alpha1.ToolCallApprovalList
	if err := e.env.Client.List(t.Context(), &l, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func (e *approvalsEnv) get(t *testing.T, name string) *policyv1alpha1.ToolCallApproval {
	t.Helper()
	tca := &policyv1alpha1.ToolCallApproval{}
	if err := e.env.Client.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, tca); err != nil {
		t.Fatal(err)
	}
	return tca
}

// decide writes a decision into the status, as kubectl toolhooks approve or
// deny does for by.
func (e *approvalsEnv) decide(t *testing.T, name string, state policyv1alpha1.ApprovalState, by, why string) {
	t.Helper()
	// The gateway may still be marking the new request pending: retry on a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tca := e.get(t, name)
		tca.Status.State, tca.Status.DecidedBy = state, by
		meta.SetStatusCondition(&tca.Status.Conditions, metav1.Condition{
			Type: string(state), Status: metav1.ConditionTrue, Reason: "Decided", Message: why,
		})
		return e.env.Client.Status().Update(t.Context(), tca)
	})
	if err != nil {
		t.Fatalf("Deciding %s: %v", name, err)
	}
}

// request asks a for approval and fails the test on an error.
func ask(t *testing.T, a *gatewayk8s.Approvals, req hooks.ApprovalRequest) hooks.Approval {
	t.Helper()
	out, err := a.RequestApproval(t.Context(), req)
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return out
}

// waitForApprovals polls until the namespace holds n ToolCallApprovals.
func (e *approvalsEnv) waitForApprovals(t *testing.T, n int) []policyv1alpha1.ToolCallApproval {
	t.Helper()
	var items []policyv1alpha1.ToolCallApproval
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		items = e.list(t)
		return len(items) == n, nil
	})
	if err != nil {
		t.Fatalf("Waiting for %d ToolCallApprovals, have %d: %v", n, len(items), err)
	}
	return items
}

const deployArgs = `{"command":"./deploy.sh --prod","path":"/workspace/deploy","token":"hunter2-secret-value"}`

// TestApprovals runs the approver against a real API server (with RBAC
// authorization, so the SubjectAccessReviews are real), each case in its
// own namespace.
func TestApprovals(t *testing.T) {
	env := testenv.Start(t)
	t.Run("a request creates one approval and a retry finds it", func(t *testing.T) { testRequestAndRetry(t, env) })
	t.Run("an approval admits exactly one identical call", func(t *testing.T) { testSingleUse(t, env) })
	t.Run("the sender's own approval is not honoured", func(t *testing.T) {
		testNotHonoured(t, env, sender, "the sender of the call, who may not approve it")
	})
	t.Run("an approval by a user without the approve verb is not honoured", func(t *testing.T) {
		testNotHonoured(t, env, outsider, "approved by "+outsider+", who may not approve it")
	})
	t.Run("an approval without a decider is not honoured", func(t *testing.T) {
		testNotHonoured(t, env, "", "without saying by whom")
	})
	t.Run("a denial is recorded for retries", func(t *testing.T) { testDenied(t, env) })
	t.Run("two gateways race for one approval", func(t *testing.T) { testTwoGateways(t, env) })
	t.Run("an undecided request expires", func(t *testing.T) { testExpiry(t, env) })
	t.Run("a waiting request returns on the decision", func(t *testing.T) { testWaitWakes(t, env) })
	t.Run("a call without a sender cannot be asked about", func(t *testing.T) { testNoSender(t, env) })
	t.Run("an executor runs an approved tool once", func(t *testing.T) { testExecutor(t, env) })
}

func testRequestAndRetry(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", 0)
	req := e.request(deployArgs, false)
	first := ask(t, a, req)
	if first.State != hooks.ApprovalPending || first.Name == "" {
		t.Fatalf("first request: %+v, want a pending request", first)
	}
	items := e.list(t)
	if len(items) != 1 {
		t.Fatalf("%d ToolCallApprovals, want 1", len(items))
	}
	tca := items[0]
	if tca.Name != first.Name || !strings.HasPrefix(tca.Name, "run-shell-") {
		t.Errorf("name %q, want %q with prefix run-shell-", tca.Name, first.Name)
	}
	s := tca.Spec
	if s.ArgumentsDigest != hooks.ArgumentsDigest(req.Call) || s.Tool != "run_shell" || s.Session != "session-1" ||
		s.Gateway != "gateway-a" {
		t.Errorf("spec %+v", s)
	}
	if s.Sender.Username != sender || s.Sender.UID != "uid-coder" || len(s.Sender.Groups) != 2 {
		t.Errorf("sender %+v", s.Sender)
	}
	if s.Policy != (policyv1alpha1.AskingPolicy{Kind: "AutonomyPolicy", Name: "coder", UID: "policy-uid-1", Rule: "askCommands",
		Reason: "deploys need a person's approval"}) {
		t.Errorf("policy %+v", s.Policy)
	}
	if want := e.clock.Now().Add(10 * time.Minute); !s.ExpiresAt.Time.Equal(want) {
		t.Errorf("expiresAt %s, want %s", s.ExpiresAt, want)
	}
	preview := map[string]string{}
	for _, p := range s.Arguments {
		preview[p.Name] = p.Value
	}
	want := map[string]string{"command": `"./deploy.sh --prod"`, "path": `"/workspace/deploy"`, "token": "<masked>"}
	if fmt.Sprint(preview) != fmt.Sprint(want) {
		t.Errorf("arguments %v, want %v", preview, want)
	}
	if tca.Status.State != policyv1alpha1.ApprovalPending {
		t.Errorf("state %q, want Pending", tca.Status.State)
	}
	if len(tca.Labels[policyv1alpha1.CallLabel]) != 40 {
		t.Errorf("call label %q", tca.Labels[policyv1alpha1.CallLabel])
	}

	// Retrying finds the pending request, also through a second gateway.
	if again := ask(t, a, e.request(deployArgs, false)); again.Name != first.Name || again.State != hooks.ApprovalPending {
		t.Errorf("retry: %+v, want pending %s", again, first.Name)
	}
	b := e.approvals(t, "gateway-b", 0)
	if again := ask(t, b, e.request(deployArgs, false)); again.Name != first.Name {
		t.Errorf("retry through another gateway: %+v, want %s", again, first.Name)
	}
	// The same arguments with other spacing and key order are the same call.
	reordered := `{"token":"hunter2-secret-value", "path":"/workspace/deploy", "command":"./deploy.sh --prod"}`
	if again := ask(t, a, e.request(reordered, false)); again.Name != first.Name {
		t.Errorf("reordered arguments: %+v, want %s", again, first.Name)
	}
	if n := len(e.list(t)); n != 1 {
		t.Fatalf("%d ToolCallApprovals after retries, want 1", n)
	}
	// Other arguments are another call.
	other := ask(t, a, e.request(`{"command":"./deploy.sh --staging","path":"/workspace/deploy"}`, false))
	if other.Name == first.Name || other.State != hooks.ApprovalPending {
		t.Errorf("changed arguments: %+v, want a new pending request", other)
	}
	if n := len(e.list(t)); n != 2 {
		t.Errorf("%d ToolCallApprovals, want 2", n)
	}
}

func testSingleUse(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", time.Hour)
	first := ask(t, a, e.request(deployArgs, false))
	e.decide(t, first.Name, policyv1alpha1.ApprovalApproved, approver, "looks fine")
	// An approval for other arguments admits nothing.
	if other := ask(t, a, e.request(`{"command":"rm -rf /"}`, false)); other.State != hooks.ApprovalPending || other.Name == first.Name {
		t.Errorf("other arguments: %+v, want a new pending request", other)
	}
	// Waiting returns once this gateway has seen the decision.
	got := ask(t, a, e.request(deployArgs, true))
	if got.State != hooks.ApprovalApproved || got.Name != first.Name || got.DecidedBy != approver || got.Reason != "looks fine" {
		t.Fatalf("approved request: %+v", got)
	}
	tca := e.get(t, first.Name)
	if tca.Status.State != policyv1alpha1.ApprovalUsed || tca.Status.UsedBy != "gateway-a" ||
		!meta.IsStatusConditionTrue(tca.Status.Conditions, policyv1alpha1.ConditionUsed) {
		t.Errorf("status after use: %+v", tca.Status)
	}
	next := ask(t, a, e.request(deployArgs, false))
	if next.State != hooks.ApprovalPending || next.Name == first.Name {
		t.Errorf("the same call again: %+v, want a new pending request", next)
	}
	if n := len(e.list(t)); n != 3 {
		t.Errorf("%d ToolCallApprovals, want 3", n)
	}
}

func testNotHonoured(t *testing.T, env *testenv.Env, by, reason string) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", time.Hour)
	first := ask(t, a, e.request(deployArgs, false))
	e.decide(t, first.Name, policyv1alpha1.ApprovalApproved, by, "")
	got := ask(t, a, e.request(deployArgs, true))
	if got.State != hooks.ApprovalDenied || !strings.Contains(got.Reason, reason) {
		t.Errorf("approved by %q: %+v, want denied with %q", by, got, reason)
	}
	if st := e.get(t, first.Name).Status; st.State != policyv1alpha1.ApprovalApproved || st.UsedBy != "" {
		t.Errorf("status %+v, want it untouched", st)
	}
}

func testDenied(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", time.Hour)
	first := ask(t, a, e.request(deployArgs, false))
	if first.State != hooks.ApprovalPending {
		t.Fatalf("first request: %+v", first)
	}
	e.decide(t, first.Name, policyv1alpha1.ApprovalDenied, approver, "not on a Friday")
	for range 2 {
		got := ask(t, a, e.request(deployArgs, true))
		if got.State != hooks.ApprovalDenied || got.Name != first.Name || got.DecidedBy != approver || got.Reason != "not on a Friday" {
			t.Errorf("denied request: %+v", got)
		}
	}
}

func testTwoGateways(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	gateways := []*gatewayk8s.Approvals{e.approvals(t, "gateway-a", time.Hour), e.approvals(t, "gateway-b", time.Hour)}
	first := ask(t, gateways[0], e.request(deployArgs, false))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	results := make(chan hooks.Approval, len(gateways))
	for _, g := range gateways {
		go func() {
			out, err := g.RequestApproval(ctx, e.request(deployArgs, true))
			if err != nil {
				out.State = hooks.ApprovalState("error: " + err.Error())
			}
			results <- out
		}()
	}
	e.decide(t, first.Name, policyv1alpha1.ApprovalApproved, approver, "")
	// The winner returns at once; the other asks anew and waits for that.
	won := <-results
	if won.State != hooks.ApprovalApproved || won.Name != first.Name {
		t.Fatalf("first answer: %+v, want the approval", won)
	}
	e.waitForApprovals(t, 2)
	cancel()
	lost := <-results
	if lost.State != hooks.ApprovalPending || lost.Name == first.Name {
		t.Errorf("second answer: %+v, want a new pending request", lost)
	}
	tca := e.get(t, first.Name)
	if tca.Status.State != policyv1alpha1.ApprovalUsed || (tca.Status.UsedBy != "gateway-a" && tca.Status.UsedBy != "gateway-b") {
		t.Errorf("status %+v", tca.Status)
	}
}

func testExpiry(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", 0)
	first := ask(t, a, e.request(deployArgs, false))
	e.clock.Step(10*time.Minute + time.Second)
	// A wait on an expired request ends at once.
	got := ask(t, a, e.request(deployArgs, true))
	if got.State != hooks.ApprovalExpired || got.Name != first.Name {
		t.Fatalf("after expiry: %+v, want expired %s", got, first.Name)
	}
	tca := e.get(t, first.Name)
	if tca.Status.State != policyv1alpha1.ApprovalExpired || !meta.IsStatusConditionTrue(tca.Status.Conditions, policyv1alpha1.ConditionExpired) {
		t.Errorf("status %+v, want Expired", tca.Status)
	}
	// An approval that comes too late admits nothing.
	e.decide(t, first.Name, policyv1alpha1.ApprovalApproved, approver, "")
	if got := ask(t, a, e.request(deployArgs, true)); got.State != hooks.ApprovalExpired {
		t.Errorf("approved after expiry: %+v, want expired", got)
	}
}

func testWaitWakes(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	// The wait is far longer than the test may take: only the decision
	// can end it.
	a := e.approvals(t, "gateway-a", time.Hour)
	done := make(chan hooks.Approval, 1)
	go func() {
		out, err := a.RequestApproval(t.Context(), e.request(deployArgs, true))
		if err != nil {
			out.State = hooks.ApprovalState("error: " + err.Error())
		}
		done <- out
	}()
	items := e.waitForApprovals(t, 1)
	e.decide(t, items[0].Name, policyv1alpha1.ApprovalApproved, approver, "go ahead")
	if got := <-done; got.State != hooks.ApprovalApproved || got.Name != items[0].Name {
		t.Fatalf("waiting request: %+v, want approved", got)
	}
	if st := e.get(t, items[0].Name).Status.State; st != policyv1alpha1.ApprovalUsed {
		t.Errorf("state %q, want Used", st)
	}
}

func testNoSender(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", 0)
	anonymous := e.request(deployArgs, false)
	anonymous.Call.SenderID = "system:anonymous"
	anonymous.Call.Caller = &hooks.Identity{Username: "system:anonymous", Kind: hooks.IdentityAnonymous}
	nobody := e.request(deployArgs, false)
	nobody.Call.SenderID, nobody.Call.Caller = "", nil
	for name, req := range map[string]hooks.ApprovalRequest{"anonymous": anonymous, "no caller": nobody} {
		if _, err := a.RequestApproval(t.Context(), req); !errors.Is(err, gatewayk8s.ErrNoSender) {
			t.Errorf("%s: %v, want ErrNoSender", name, err)
		}
	}
	if n := len(e.list(t)); n != 0 {
		t.Errorf("%d ToolCallApprovals, want none", n)
	}
}

// testExecutor runs calls through an executor whose hook asks about every
// call and whose tool appends to a file: one approval runs the tool once.
func testExecutor(t *testing.T, env *testenv.Env) {
	e := newApprovalsEnv(t, env)
	a := e.approvals(t, "gateway-a", time.Hour)
	out := filepath.Join(t.TempDir(), "deployed")
	tool := hooks.ToolFunc{ToolName: "run_shell", Func: func(_ context.Context, args map[string]any) (string, error) {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", err
		}
		_, err = fmt.Fprintln(f, args["command"])
		return "deployed", errors.Join(err, f.Close())
	}}
	asker := hooks.HookFuncs{HookName: "autonomy", BeforeFunc: func(context.Context, *hooks.Call) (hooks.Verdict, error) {
		return hooks.AskFor("askCommands", "deploys need a person's approval", 0), nil
	}}
	exec, err := hooks.NewExecutor([]hooks.Entry{{Hook: asker,
		Policy: hooks.PolicyRef{Kind: "AutonomyPolicy", Namespace: e.ns, Name: "coder", UID: "policy-uid-1"}}},
		[]hooks.Tool{tool}, hooks.WithApprover(a))
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context) <-chan hooks.Result {
		done := make(chan hooks.Result, 1)
		go func() { done <- exec.Execute(ctx, e.request(deployArgs, true).Call) }()
		return done
	}
	first := run(t.Context())
	items := e.waitForApprovals(t, 1)
	e.decide(t, items[0].Name, policyv1alpha1.ApprovalApproved, approver, "")
	if res := <-first; res.Status != hooks.StatusSucceeded {
		t.Fatalf("approved call: %+v", res)
	}
	// The same call again asks anew; ending its wait denies it.
	ctx, cancel := context.WithCancel(t.Context())
	second := run(ctx)
	e.waitForApprovals(t, 2)
	cancel()
	if res := <-second; res.Status != hooks.StatusDenied || res.Denial == nil || res.Denial.Rule != hooks.RuleApprovalPending {
		t.Errorf("second call: %+v, want denied as pending", res)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "./deploy.sh --prod\n" {
		t.Errorf("the tool ran with output %q, want once", b)
	}
}
