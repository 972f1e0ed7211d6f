package contract

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// TestAFullBudgetTableGivesANewcomerItsFairShare: with the table full, a
// caller below its fair share (the table divided by the callers) opens
// sessions in place of the idlest sessions of the callers above theirs,
// never of a caller within its share; an evicted session that comes back
// resumes its count instead of restarting its budget.
func TestAFullBudgetTableGivesANewcomerItsFairShare(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 1, BudgetConfig{SessionTTL: time.Hour, MaxSessions: 6, Now: clk.Now})
	as := func(who, session string) *hooks.Call {
		c := sessionCall(session)
		c.Caller = &hooks.Identity{Username: who}
		return c
	}
	call := func(who, session string) hooks.Verdict {
		t.Helper()
		return run(h, as(who, session), hooks.StatusSucceeded)
	}
	mustBe := func(v hooks.Verdict, want string) {
		t.Helper()
		if v.Allowed != (want == "allowed") || (want != "allowed" && !strings.Contains(v.Reason, want)) {
			t.Fatalf("verdict %+v, want %s", v, want)
		}
	}
	// greedy holds 4 sessions, modest 2: the table is full. Each session
	// has used its budget of one call.
	for i := range 4 {
		mustBe(call("greedy", fmt.Sprint("g", i)), "allowed")
	}
	mustBe(call("modest", "m0"), "allowed")
	mustBe(call("modest", "m1"), "allowed")
	// g0 is greedy's idlest session (used at 20m, the others at 30m).
	clk.Add(20 * time.Minute)
	mustBe(call("greedy", "g0"), "used its budget")
	clk.Add(10 * time.Minute)
	for i := 1; i < 4; i++ {
		mustBe(call("greedy", fmt.Sprint("g", i)), "used its budget")
	}
	clk.Add(time.Minute)
	// The share is 6/3 = 2: the newcomer gets two sessions, from greedy.
	mustBe(call("new", "n0"), "allowed")
	mustBe(call("new", "n1"), "allowed")
	mustBe(call("new", "n2"), "fair share")
	if got := h.Budgets().Sessions(); got != 6 {
		t.Fatalf("%d sessions tracked, want 6", got)
	}
	// modest, within its share, lost nothing; greedy kept g2 and g3.
	for _, s := range []struct{ who, session string }{{"modest", "m0"}, {"modest", "m1"}, {"greedy", "g2"}, {"greedy", "g3"}} {
		mustBe(call(s.who, s.session), "used its budget")
	}
	// greedy, now at its share, cannot take g0 back while the table is full.
	mustBe(call("greedy", "g0"), "fair share")
}

// TestAnEvictedSessionResumesItsCount: a session evicted for a newcomer
// that comes back within its idle timeout has used what it had used.
func TestAnEvictedSessionResumesItsCount(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 2, BudgetConfig{SessionTTL: time.Hour, MaxSessions: 5, Now: clk.Now})
	call := func(who, session string) hooks.Verdict {
		c := sessionCall(session)
		c.Caller = &hooks.Identity{Username: who}
		return run(h, c, hooks.StatusSucceeded)
	}
	call("early", "e0") // at 0
	clk.Add(20 * time.Minute)
	call("greedy", "g0") // g0 spends its budget at 20m
	call("greedy", "g0")
	clk.Add(5 * time.Minute)
	for _, s := range []string{"g1", "g2", "g3"} {
		call("greedy", s)
	}
	// The table is full; the newcomer's share is 5/3 = 1: greedy's idlest, g0, makes room.
	clk.Add(time.Minute)
	if v := call("new", "n0"); !v.Allowed {
		t.Fatalf("the newcomer: %s", v.Reason)
	}
	if got, _ := h.Budgets().Used("greedy\x00g0"); got != 0 {
		t.Fatalf("g0 is still tracked with %d calls", got)
	}
	// At 61m e0 has idled out; g0, last used 41m ago, comes back into its room.
	clk.Add(35 * time.Minute)
	if v := call("greedy", "g0"); v.Allowed || !strings.Contains(v.Reason, "used its budget") {
		t.Fatalf("g0 came back with %+v, want its budget spent", v)
	}
	if got, _ := h.Budgets().Used("greedy\x00g0"); got != 2 {
		t.Errorf("g0 holds %d calls, want 2", got)
	}
}
