package contract

import (
	"context"
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
