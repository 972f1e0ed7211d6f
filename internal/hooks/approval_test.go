package hooks_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// fakeApprover answers every request with its state and records the requests.
type fakeApprover struct {
	mu    sync.Mutex
	state hooks.ApprovalState
	err   error
	panic bool
	reqs  []hooks.ApprovalRequest
}

func (a *fakeApprover) RequestApproval(_ context.Context, req hooks.ApprovalRequest) (hooks.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, req)
	if a.panic {
		panic("approver broke")
	}
	if a.err != nil {
		return hooks.Approval{}, a.err
	}
	return hooks.Approval{Name: "write-file-x1", State: a.state, DecidedBy: "carol", Reason: "looks fine"}, nil
}

func asks(expiry time.Duration) before {
	return func(context.Context, *hooks.Call) (hooks.Verdict, error) {
		return hooks.AskFor("askTools", "writes need approval", expiry), nil
	}
}

// fileTool appends a line to a real file each time it runs.
func fileTool(t *testing.T) (hooks.Tool, func() int) {
	path := filepath.Join(t.TempDir(), "runs")
	tool := tracedTool(&trace{}, "write_file", func(context.Context, map[string]any) (string, error) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", err
		}
		if _, err := f.WriteString("ran\n"); err != nil {
			_ = f.Close()
			return "", err
		}
		return "ok", f.Close()
	})
	return tool, func() int {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "ran\n")
	}
}

func TestAskedCallsRunOnlyWithAGrant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approver *fakeApprover // nil: none configured
		later    before        // a hook after the asking one
		wantRule string        // "" when the call runs
		wantRuns int
	}{
		{name: "approved", approver: &fakeApprover{state: hooks.ApprovalApproved}, wantRuns: 1},
		{name: "no approver", wantRule: hooks.RuleApprovalUnavailable},
		{name: "approver error", approver: &fakeApprover{err: errors.New("api server down")}, wantRule: hooks.RuleApprovalUnavailable},
		{name: "approver panic", approver: &fakeApprover{panic: true}, wantRule: hooks.RuleApprovalUnavailable},
		{name: "pending", approver: &fakeApprover{state: hooks.ApprovalPending}, wantRule: hooks.RuleApprovalPending},
		{name: "denied", approver: &fakeApprover{state: hooks.ApprovalDenied}, wantRule: hooks.RuleApprovalDenied},
		{name: "expired", approver: &fakeApprover{state: hooks.ApprovalExpired}, wantRule: hooks.RuleApprovalExpired},
		{name: "unknown state", approver: &fakeApprover{state: "Maybe"}, wantRule: hooks.RuleApprovalUnavailable},
		{name: "a later hook denies: deny wins, nobody is asked", approver: &fakeApprover{state: hooks.ApprovalApproved},
			later: denies("r", "no"), wantRule: "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, runs := fileTool(t)
			entries := []hooks.Entry{{Hook: traced(&trace{}, "ask", asks(0))}}
			if tc.later != nil {
				entries = append(entries, hooks.Entry{Hook: traced(&trace{}, "later", tc.later)})
			}
			var opts []hooks.Option
			if tc.approver != nil {
				opts = append(opts, hooks.WithApprover(tc.approver))
			}
			e := mustExecutor(t, entries, []hooks.Tool{tool}, append(opts, hooks.WithLogger(discardLogger()))...)
			res := e.Execute(t.Context(), hooks.NewCall("write_file", `{"path":"x"}`))
			if got := runs(); got != tc.wantRuns {
				t.Fatalf("the tool ran %d times, want %d (result %+v)", got, tc.wantRuns, res)
			}
			if tc.wantRule == "" {
				if res.Status != hooks.StatusSucceeded || res.Approval == nil || res.Approval.DecidedBy != "carol" {
					t.Fatalf("result %+v approval %+v", res, res.Approval)
				}
				return
			}
			if res.Status != hooks.StatusDenied || res.Denial == nil || res.Denial.Rule != tc.wantRule {
				t.Fatalf("result %+v denial %+v, want rule %s", res, res.Denial, tc.wantRule)
			}
			if !strings.HasPrefix(res.Output, hooks.DenialText) || res.Denial.Reason == "" {
				t.Fatalf("denial output %q reason %q", res.Output, res.Denial.Reason)
			}
			if tc.later != nil && tc.approver != nil && len(tc.approver.reqs) != 0 {
				t.Fatalf("a denied call was sent for approval: %+v", tc.approver.reqs)
			}
			if tc.wantRule == hooks.RuleApprovalDenied && !strings.Contains(res.Denial.Reason, "carol: looks fine") {
				t.Fatalf("the denial does not name who denied and why: %q", res.Denial.Reason)
			}
		})
	}
}

func TestApprovalRequestsCarryTheAskAndABoundedExpiry(t *testing.T) {
	for _, tc := range []struct {
		asked, want time.Duration
	}{{0, hooks.DefaultApprovalExpiry}, {time.Minute, time.Minute}, {100 * time.Hour, hooks.MaxApprovalExpiry}} {
		a := &fakeApprover{state: hooks.ApprovalApproved}
		tool, _ := fileTool(t)
		e := mustExecutor(t, []hooks.Entry{{Hook: traced(&trace{}, "ask", asks(tc.asked)),
			Policy: hooks.PolicyRef{Kind: "AutonomyPolicy", Name: "p"}}}, []hooks.Tool{tool}, hooks.WithApprover(a))
		e.Execute(t.Context(), hooks.NewCall("write_file", `{}`))
		if len(a.reqs) != 1 {
			t.Fatalf("requests %d", len(a.reqs))
		}
		r := a.reqs[0]
		if r.Expiry != tc.want || !r.Wait || r.Ask.Rule != "askTools" || r.Ask.Policy.Name != "p" || r.Call.Tool != "write_file" {
			t.Fatalf("asked %s: request %+v", tc.asked, r)
		}
	}
}

func TestEvaluateAnswersAskAtOnce(t *testing.T) {
	a := &fakeApprover{state: hooks.ApprovalPending}
	e := mustExecutor(t, []hooks.Entry{{Hook: traced(&trace{}, "ask", asks(0))}}, nil, hooks.WithApprover(a))
	res := e.Evaluate(t.Context(), hooks.NewCall("deploy", `{}`))
	if res.Status != hooks.StatusAsk || res.Approval == nil || res.Approval.Name != "write-file-x1" || res.Denial != nil {
		t.Fatalf("result %+v", res)
	}
	if a.reqs[0].Wait {
		t.Fatal("Evaluate waited for a decision")
	}
	a.state = hooks.ApprovalApproved
	if res := e.Evaluate(t.Context(), hooks.NewCall("deploy", `{}`)); res.Status != hooks.StatusAllowed {
		t.Fatalf("approved: %+v", res)
	}
	// Decide asks nobody.
	if res := e.Decide(t.Context(), hooks.NewCall("deploy", `{}`)); res.Status != hooks.StatusAsk || len(a.reqs) != 2 {
		t.Fatalf("Decide: %+v, %d requests", res, len(a.reqs))
	}
}

func TestAWarnEntryThatAsksOnlyWarns(t *testing.T) {
	tool, runs := fileTool(t)
	e := mustExecutor(t, []hooks.Entry{{Hook: traced(&trace{}, "ask", asks(0)), Action: hooks.ActionWarn}},
		[]hooks.Tool{tool})
	res := e.Execute(t.Context(), hooks.NewCall("write_file", `{}`))
	if res.Status != hooks.StatusSucceeded || runs() != 1 || len(res.Warnings) != 1 || res.Warnings[0].Rule != "askTools" {
		t.Fatalf("result %+v", res)
	}
}

func TestArgumentsDigestIsCanonical(t *testing.T) {
	a := hooks.ArgumentsDigest(hooks.NewCall("t", `{"b": 1, "a": "x"}`))
	b := hooks.ArgumentsDigest(hooks.NewCall("t", `{"a":"x","b":1}`))
	c := hooks.ArgumentsDigest(hooks.NewCall("t", `{"a":"y","b":1}`))
	if a != b || a == c || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Fatalf("digests %s %s %s", a, b, c)
	}
}
