package contract

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// stateApprover answers every request for approval with its state.
type stateApprover struct{ state hooks.ApprovalState }

func (a *stateApprover) RequestApproval(context.Context, hooks.ApprovalRequest) (hooks.Approval, error) {
	return hooks.Approval{Name: "deploy-x", State: a.state, DecidedBy: "carol"}, nil
}

// TestContractAskCountsOnlyCallsThatRun checks that a contract asks about
// the tools its ask names, once it allowed them, and that a call that is
// then not run gives its budget slot back while an approved one spends it.
func TestContractAskCountsOnlyCallsThatRun(t *testing.T) {
	b, err := NewBudgets(BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Contract: &Contract{MaxToolCalls: 2, Ask: &Ask{Tools: []string{"deploy_*"}, ExpirySeconds: 60}}, Budgets: b})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	tools := []hooks.Tool{
		hooks.ToolFunc{ToolName: "deploy_prod", Func: func(context.Context, map[string]any) (string, error) { runs++; return "ok", nil }},
		hooks.ToolFunc{ToolName: "read_file", Func: func(context.Context, map[string]any) (string, error) { return "x", nil }},
	}
	approver := &stateApprover{state: hooks.ApprovalPending}
	e, err := hooks.NewExecutor([]hooks.Entry{{Hook: h}}, tools, hooks.WithApprover(approver))
	if err != nil {
		t.Fatal(err)
	}
	call := func(tool string) hooks.Result {
		c := hooks.NewCall(tool, `{}`)
		c.SessionID = "s"
		return e.Execute(t.Context(), c)
	}
	if v, _ := h.Before(t.Context(), hooks.NewCall("Deploy_Prod", `{}`)); !v.Ask || v.Rule != RuleAskTools || v.Expiry != time.Minute {
		t.Fatalf("Before = %+v, want an ask by %s", v, RuleAskTools)
	}
	h.After(t.Context(), hooks.NewCall("Deploy_Prod", `{}`), &hooks.Result{Status: hooks.StatusDenied})
	for range 3 {
		if r := call("deploy_prod"); r.Status != hooks.StatusDenied || r.Denial.Rule != hooks.RuleApprovalPending {
			t.Fatalf("pending: %+v %+v", r, r.Denial)
		}
	}
	if committed, inflight := b.Used("s"); committed != 0 || inflight != 0 || runs != 0 {
		t.Fatalf("after three calls waiting for approval: %d committed, %d in flight, %d runs; want none", committed, inflight, runs)
	}
	approver.state = hooks.ApprovalApproved
	if r := call("deploy_prod"); r.Status != hooks.StatusSucceeded || runs != 1 {
		t.Fatalf("approved: %+v, %d runs", r, runs)
	}
	if r := call("read_file"); r.Status != hooks.StatusSucceeded {
		t.Fatalf("a tool the ask does not name: %+v", r)
	}
	// The budget is spent: deny wins over ask.
	if r := call("deploy_prod"); r.Status != hooks.StatusDenied || r.Denial.Rule != RuleMaxToolCalls || runs != 1 {
		t.Fatalf("over budget: %+v %+v", r, r.Denial)
	}
	for _, bad := range []*Ask{{}, {Tools: []string{"a[b"}}, {Tools: []string{"x"}, ExpirySeconds: -1}, {Tools: []string{"x"}, ExpirySeconds: 1 << 40}} {
		if err := (&Contract{Ask: bad}).Validate(); err == nil {
			t.Errorf("ask %+v accepted", bad)
		}
	}
}

// TestContractAskAfterCallsAsksPastTheFirstN checks that every call of a
// session after its first AfterCalls needs approval, that a call asked about
// and not run does not count, that each further call needs its own
// approval, and that sessions count apart.
func TestContractAskAfterCallsAsksPastTheFirstN(t *testing.T) {
	b, err := NewBudgets(BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Contract: &Contract{Ask: &Ask{AfterCalls: 2}}, Budgets: b})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	tool := hooks.ToolFunc{ToolName: "read_file", Func: func(context.Context, map[string]any) (string, error) { runs++; return "x", nil }}
	approver := &stateApprover{state: hooks.ApprovalPending}
	e, err := hooks.NewExecutor([]hooks.Entry{{Hook: h}}, []hooks.Tool{tool}, hooks.WithApprover(approver))
	if err != nil {
		t.Fatal(err)
	}
	call := func(session string) hooks.Result {
		c := hooks.NewCall("read_file", `{}`)
		c.SessionID = session
		return e.Execute(t.Context(), c)
	}
	for i := range 2 {
		if r := call("s"); r.Status != hooks.StatusSucceeded {
			t.Fatalf("call %d of 2 free ones: %+v %+v", i+1, r, r.Denial)
		}
	}
	for range 3 {
		r := call("s")
		if r.Status != hooks.StatusDenied || r.Denial.Rule != hooks.RuleApprovalPending {
			t.Fatalf("third call: %+v %+v, want it waiting for approval", r, r.Denial)
		}
	}
	if committed, inflight := b.Used("s"); committed != 2 || inflight != 0 || runs != 2 {
		t.Fatalf("after calls waiting for approval: %d committed, %d in flight, %d runs; want 2, 0, 2", committed, inflight, runs)
	}
	if v, _ := h.Before(t.Context(), &hooks.Call{SessionID: "s", Tool: "read_file"}); !v.Ask || v.Rule != RuleAskAfterCalls ||
		!strings.Contains(v.Reason, "call 3 of session") {
		t.Fatalf("Before of the third call = %+v, want an ask by %s naming its place", v, RuleAskAfterCalls)
	}
	h.After(t.Context(), &hooks.Call{SessionID: "s", Tool: "read_file"}, &hooks.Result{Status: hooks.StatusDenied})
	approver.state = hooks.ApprovalApproved
	if r := call("s"); r.Status != hooks.StatusSucceeded || runs != 3 {
		t.Fatalf("approved third call: %+v, %d runs", r, runs)
	}
	approver.state = hooks.ApprovalPending
	if r := call("s"); r.Status != hooks.StatusDenied || r.Denial.Rule != hooks.RuleApprovalPending || runs != 3 {
		t.Fatalf("fourth call after an approved third: %+v, %d runs; want a new approval needed", r, runs)
	}
	if r := call("t"); r.Status != hooks.StatusSucceeded {
		t.Fatalf("another session's first call: %+v %+v", r, r.Denial)
	}
	for _, bad := range []*Ask{{AfterCalls: -1}, {AfterCalls: MaxAfterCalls + 1}} {
		if err := (&Contract{Ask: bad}).Validate(); err == nil {
			t.Errorf("ask %+v accepted", bad)
		}
	}
}

// TestContractAskAfterCallsIsExactUnderConcurrency runs many calls of one
// session at once: exactly AfterCalls run without approval.
func TestContractAskAfterCallsIsExactUnderConcurrency(t *testing.T) {
	const free, calls = 5, 200
	h, err := New(Config{Contract: &Contract{MaxToolCalls: 1000, Ask: &Ask{AfterCalls: free}}})
	if err != nil {
		t.Fatal(err)
	}
	var ran, asked atomic.Int64
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			c := &hooks.Call{SessionID: "s", Tool: "x"}
			v, err := h.Before(context.Background(), c)
			res := &hooks.Result{Status: hooks.StatusSucceeded}
			switch {
			case err != nil:
				t.Error(err)
			case v.Ask:
				asked.Add(1)
				res.Status = hooks.StatusDenied
			case v.Allowed:
				ran.Add(1)
			}
			h.After(context.Background(), c, res)
		})
	}
	wg.Wait()
	if ran.Load() != free || asked.Load() != calls-free {
		t.Fatalf("%d ran and %d were asked about, want %d and %d", ran.Load(), asked.Load(), free, calls-free)
	}
}
