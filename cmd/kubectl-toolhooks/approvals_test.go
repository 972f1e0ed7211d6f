package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// approvalsEnv is an API server enforcing the approval admission policy, with
// users: ann and sam hold the approver role in "agents", stan may write the
// status of toolcallapprovals but lacks the approve verb.
type approvalsEnv struct {
	env            *testenv.Env
	ann, sam, stan string // kubeconfigs
	samClient      client.Client
	stanClient     client.Client
}

func startApprovalsEnv(t *testing.T) *approvalsEnv {
	t.Helper()
	env := testenv.Start(t)
	ctx := t.Context()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}
	env.ApplyApprovalPolicy(t)
	statusWriter := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "approval-status-writer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{policyv1alpha1.GroupVersion.Group}, Resources: []string{"toolcallapprovals"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{policyv1alpha1.GroupVersion.Group}, Resources: []string{"toolcallapprovals/status"}, Verbs: []string{"get", "update", "patch"}},
		},
	}
	if err := env.Client.Create(ctx, statusWriter); err != nil {
		t.Fatal(err)
	}
	e := &approvalsEnv{env: env}
	e.ann, _ = env.User(t, "ann")
	kc, cfg := env.User(t, "sam")
	e.sam = kc
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	e.samClient = c
	kc, cfg = env.User(t, "stan")
	e.stan = kc
	if e.stanClient, err = client.New(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		t.Fatal(err)
	}
	env.BindRole(t, "agents", testenv.ApproverRole, "ann")
	env.BindRole(t, "agents", testenv.ApproverRole, "sam")
	env.BindRole(t, "agents", statusWriter.Name, "stan")
	return e
}

// pending creates a Pending approval of a call by sender.
func (e *approvalsEnv) pending(t *testing.T, name, sender string) *policyv1alpha1.ToolCallApproval {
	t.Helper()
	a := testenv.Approval("agents", name, sender, time.Now().Add(time.Hour))
	if err := e.env.Client.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *approvalsEnv) get(t *testing.T, name string) *policyv1alpha1.ToolCallApproval {
	t.Helper()
	a := &policyv1alpha1.ToolCallApproval{}
	if err := e.env.Client.Get(t.Context(), client.ObjectKey{Namespace: "agents", Name: name}, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// refused creates a Pending approval of sam's call, has the user of
// kubeconfig approve it, and wants it refused with message and still Pending.
func (e *approvalsEnv) refused(t *testing.T, name, kubeconfig, message string) {
	t.Helper()
	e.pending(t, name, "sam")
	r := runCLI(t, "approve", name, "-n", "agents", "--kubeconfig", kubeconfig)
	if r.code != exitDenied || !strings.Contains(r.stderr, message) {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if a := e.get(t, name); a.CurrentState() != policyv1alpha1.ApprovalPending || a.Status.DecidedBy != "" {
		t.Errorf("status %+v, want it still Pending", a.Status)
	}
}

func TestApproveAndDenyThroughTheAdmissionPolicy(t *testing.T) {
	e := startApprovalsEnv(t)

	t.Run("an approver approves", func(t *testing.T) {
		e.pending(t, "a1", "sam")
		r := runCLI(t, "approve", "a1", "-n", "agents", "--kubeconfig", e.ann)
		if r.code != 0 || !strings.Contains(r.stdout, "toolcallapproval agents/a1 approved by ann") {
			t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		a := e.get(t, "a1")
		c := meta.FindStatusCondition(a.Status.Conditions, policyv1alpha1.ConditionApproved)
		if a.Status.State != policyv1alpha1.ApprovalApproved || a.Status.DecidedBy != "ann" ||
			c == nil || c.Status != metav1.ConditionTrue || c.Reason != "KubectlApprove" || c.Message != "approved by ann" {
			t.Errorf("status %+v", a.Status)
		}
	})

	t.Run("a user without the approve verb is refused by the admission policy", func(t *testing.T) {
		e.refused(t, "a2", e.stan, "user stan may not approve or deny toolcallapproval a2")
	})

	t.Run("the sender cannot approve its own call", func(t *testing.T) {
		e.refused(t, "a3", e.sam, "you cannot approve or deny your own tool call")
	})

	t.Run("a denial is final", func(t *testing.T) {
		e.pending(t, "a4", "ann")
		r := runCLI(t, "deny", "a4", "-n", "agents", "--kubeconfig", e.sam, "--reason", "not on a Friday")
		if r.code != 0 || !strings.Contains(r.stdout, "denied by sam") {
			t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		a := e.get(t, "a4")
		if c := meta.FindStatusCondition(a.Status.Conditions, policyv1alpha1.ConditionDenied); a.Status.State != policyv1alpha1.ApprovalDenied ||
			c == nil || c.Reason != "KubectlDeny" || c.Message != "not on a Friday" {
			t.Fatalf("status %+v", a.Status)
		}
		// The CLI refuses to decide it again ...
		r = runCLI(t, "approve", "a4", "-n", "agents", "--kubeconfig", e.sam)
		if r.code != exitDenied || !strings.Contains(r.stderr, "toolcallapproval agents/a4 is Denied by sam") {
			t.Errorf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		// ... and so does the API server, to an approver writing the status directly.
		a.Status.State = policyv1alpha1.ApprovalApproved
		meta.RemoveStatusCondition(&a.Status.Conditions, policyv1alpha1.ConditionDenied)
		meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: policyv1alpha1.ConditionApproved, Status: metav1.ConditionTrue, Reason: "Flip", Message: "flip"})
		err := e.samClient.Status().Update(t.Context(), a)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a decision is final") {
			t.Errorf("flipping Denied to Approved: %v, want the admission policy's refusal", err)
		}
	})

	t.Run("the admission policy's other rules", func(t *testing.T) {
		ctx := t.Context()
		// decidedBy must be the deciding user.
		a := e.pending(t, "a5", "ann")
		a.Status = policyv1alpha1.ToolCallApprovalStatus{State: policyv1alpha1.ApprovalApproved, DecidedBy: "someone-else"}
		if err := e.samClient.Status().Update(ctx, a); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "decidedBy must be the deciding user, sam") {
			t.Errorf("decidedBy naming another user: %v", err)
		}
		// Pending cannot become Used, but may become Expired without the approve verb.
		a = e.get(t, "a5")
		a.Status.State = policyv1alpha1.ApprovalUsed
		if err := e.samClient.Status().Update(ctx, a); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "state Pending cannot become Used") {
			t.Errorf("Pending to Used: %v", err)
		}
		a = e.get(t, "a5")
		a.Status.State = policyv1alpha1.ApprovalExpired
		stan := e.stanClient
		if err := stan.Status().Update(ctx, a); err != nil {
			t.Errorf("Pending to Expired by a status writer: %v", err)
		}
		// Expired and Used are final; Approved becomes Used.
		a = e.get(t, "a5")
		a.Status.State = policyv1alpha1.ApprovalPending
		if err := stan.Status().Update(ctx, a); !apierrors.IsInvalid(err) {
			t.Errorf("Expired to Pending: %v", err)
		}
		a = e.get(t, "a1")
		a.Status.State = policyv1alpha1.ApprovalUsed
		a.Status.UsedBy = "gateway-7d9f-abcde"
		if err := stan.Status().Update(ctx, a); err != nil {
			t.Errorf("Approved to Used: %v", err)
		}
		a = e.get(t, "a1")
		a.Status.State = policyv1alpha1.ApprovalApproved
		if err := stan.Status().Update(ctx, a); err == nil || !strings.Contains(err.Error(), "toolcallapproval-decisions") {
			t.Errorf("Used to Approved: %v, want the admission policy's refusal", err)
		}
	})

	t.Run("deny needs a reason", func(t *testing.T) {
		r := runCLI(t, "deny", "a2", "-n", "agents", "--kubeconfig", e.ann)
		if r.code != exitBadInput || !strings.Contains(r.stderr, "deny needs --reason") {
			t.Errorf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("approvals lists the pending ones, or all", func(t *testing.T) {
		r := runCLI(t, "approvals", "-n", "agents", "--kubeconfig", e.ann)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 3 {
			t.Fatalf("exit %d, want a header and the two pending a2 and a3:\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, h := range []string{"NAME", "TOOL", "SENDER", "POLICY", "RULE", "STATE", "AGE", "EXPIRES", "ARGUMENTS"} {
			if !strings.Contains(lines[0], h) {
				t.Errorf("header %q lacks %s", lines[0], h)
			}
		}
		f := strings.Fields(lines[1])
		if want := []string{"a2", "read_file", "sam", "autonomypolicy/coding", "ask.pathGlobs", "Pending"}; len(f) < 9 ||
			strings.Join(f[:6], " ") != strings.Join(want, " ") || !strings.Contains(lines[1], `path="deploy/prod.yaml"`) {
			t.Errorf("row %q, want it to start with %v and show the arguments", lines[1], want)
		}
		r = runCLI(t, "approvals", "-A", "--all", "-o", "json", "--kubeconfig", e.env.AdminKubeconfig(t))
		var all []policyv1alpha1.ToolCallApproval
		if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 {
			t.Fatalf("exit %d %v: %s%s", r.code, err, r.stdout, r.stderr)
		}
		states := map[string]policyv1alpha1.ApprovalState{}
		for _, a := range all {
			states[a.Name] = a.CurrentState()
		}
		if len(all) != 5 || states["a1"] != policyv1alpha1.ApprovalUsed || states["a4"] != policyv1alpha1.ApprovalDenied || states["a2"] != policyv1alpha1.ApprovalPending {
			t.Errorf("states %v", states)
		}
	})

	t.Run("approvals --watch prints a new approval", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		out := &syncBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- runContext(ctx, []string{"approvals", "-n", "agents", "--watch", "--kubeconfig", e.ann}, strings.NewReader(""), out, &bytes.Buffer{})
		}()
		waitFor(t, func() (bool, string) { s := out.String(); return strings.Contains(s, "a3"), s })
		e.pending(t, "a6", "bob")
		waitFor(t, func() (bool, string) {
			s := out.String()
			return strings.Contains(s, "\na6 ") && strings.Contains(s, "bob"), s
		})
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("watch ended with exit %d", code)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
