package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Unix(1_700_000_000, 0).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func budgetHook(t testing.TB, max int, bcfg BudgetConfig) *ContractScope {
	t.Helper()
	b, err := NewBudgets(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Contract: &Contract{MaxToolCalls: max}, Budgets: b})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sessionCall(session string) *hooks.Call {
	c := hooks.NewCall("web_search", `{"q":"x"}`)
	c.SessionID = session
	return c
}

// run does one call's before and after phases as the executor would, with
// the given outcome when the hook allowed.
func run(h *ContractScope, c *hooks.Call, outcome hooks.Status) hooks.Verdict {
	v, _ := h.Before(context.Background(), c)
	res := &hooks.Result{Status: outcome}
	if !v.Allowed {
		res = &hooks.Result{Status: hooks.StatusDenied, Denial: &hooks.Decision{Hook: h.Name(), Rule: v.Rule}}
	}
	h.After(context.Background(), c, res)
	return v
}

func TestBudgetDeniesWhenTheCountReachesTheMaximum(t *testing.T) {
	outcomes := []hooks.Status{hooks.StatusSucceeded, hooks.StatusFailed, hooks.StatusTimedOut}
	h := budgetHook(t, 3, BudgetConfig{})
	for i, o := range outcomes {
		if v := run(h, sessionCall("s"), o); !v.Allowed {
			t.Fatalf("call %d (%s) denied: %s", i+1, o, v.Reason)
		}
	}
	v := run(h, sessionCall("s"), hooks.StatusSucceeded)
	if v.Allowed || v.Rule != RuleMaxToolCalls || !strings.Contains(v.Reason, "budget of 3") {
		t.Fatalf("call 4 with count == max = %+v, want a maxToolCalls denial", v)
	}
	if c, in := h.Budgets().Used("s"); c != 3 || in != 0 {
		t.Fatalf("Used = %d committed, %d in flight; want 3, 0", c, in)
	}
	if v := run(h, sessionCall("other"), hooks.StatusSucceeded); !v.Allowed {
		t.Fatalf("another session's first call denied: %s", v.Reason)
	}
}

func TestBudgetWithoutAMaximumIsNotTracked(t *testing.T) {
	h := budgetHook(t, 0, BudgetConfig{})
	for i := range 50 {
		if v := run(h, sessionCall("s"), hooks.StatusSucceeded); !v.Allowed {
			t.Fatalf("call %d denied without a budget: %s", i, v.Reason)
		}
	}
	if n := h.Budgets().Sessions(); n != 0 {
		t.Fatalf("Sessions = %d, want 0", n)
	}
}

func TestBudgetReleasesTheReservationWhenALaterHookDenies(t *testing.T) {
	tests := []struct {
		name      string
		outcome   hooks.Status
		wantCount int
	}{
		{"a call a later hook denies does not count", hooks.StatusDenied, 0},
		{"a call that succeeds counts", hooks.StatusSucceeded, 1},
		{"a call that fails counts", hooks.StatusFailed, 1},
		{"a call that times out counts", hooks.StatusTimedOut, 1},
		{"a call the caller runs itself (Evaluate) counts", hooks.StatusAllowed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := budgetHook(t, 1, BudgetConfig{})
			c := sessionCall("s")
			if v, _ := h.Before(context.Background(), c); !v.Allowed {
				t.Fatalf("first call denied: %s", v.Reason)
			}
			if _, in := h.Budgets().Used("s"); in != 1 {
				t.Fatalf("in flight after Before = %d, want 1", in)
			}
			// While the reservation is pending the budget is taken.
			if v, _ := h.Before(context.Background(), sessionCall("s")); v.Allowed {
				t.Fatal("a second call was allowed while the only slot was reserved")
			}
			h.After(context.Background(), c, &hooks.Result{Status: tt.outcome,
				Denial: &hooks.Decision{Hook: "later"}})
			if got, in := h.Budgets().Used("s"); got != tt.wantCount || in != 0 {
				t.Fatalf("Used = %d committed, %d in flight; want %d, 0", got, in, tt.wantCount)
			}
			// After is idempotent per reservation.
			h.After(context.Background(), c, &hooks.Result{Status: hooks.StatusDenied})
			if got, _ := h.Budgets().Used("s"); got != tt.wantCount {
				t.Fatalf("a repeated After changed the count to %d", got)
			}
		})
	}
}

// laterDeny is a hook that denies every other call.
type laterDeny struct{ n atomic.Int64 }

func (l *laterDeny) Name() string { return "later" }
func (l *laterDeny) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	if l.n.Add(1)%2 == 0 {
		return hooks.Deny("test", "every other call"), nil
	}
	return hooks.Allow, nil
}
func (l *laterDeny) After(context.Context, *hooks.Call, *hooks.Result) {}

type okTool struct{ ran atomic.Int64 }

func (o *okTool) Name() string { return "web_search" }
func (o *okTool) Execute(context.Context, map[string]any) (string, error) {
	o.ran.Add(1)
	return "ok", nil
}

// TestBudgetCountsExecutedCallsThroughTheExecutor runs the hook in the real
// executor ahead of a hook that denies every other call.
func TestBudgetCountsExecutedCallsThroughTheExecutor(t *testing.T) {
	h := budgetHook(t, 5, BudgetConfig{})
	tool := &okTool{}
	ex, err := hooks.NewExecutor([]hooks.Entry{{Hook: h}, {Hook: &laterDeny{}}}, []hooks.Tool{tool})
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		ex.Execute(context.Background(), sessionCall("s"))
	}
	if got := tool.ran.Load(); got != 5 {
		t.Fatalf("tool ran %d times, want exactly the budget of 5", got)
	}
	if c, in := h.Budgets().Used("s"); c != 5 || in != 0 {
		t.Fatalf("Used = %d committed, %d in flight; want 5, 0", c, in)
	}
}

func TestBudgetIsExactUnderConcurrency(t *testing.T) {
	const max, callers = 100, 1000
	for _, later := range []struct {
		name    string
		outcome hooks.Status
		want    int64
	}{
		{"1,000 concurrent calls against a budget of 100 execute exactly 100", hooks.StatusSucceeded, max},
		{"1,000 concurrent calls all denied later leave the budget untouched", hooks.StatusDenied, callers},
	} {
		t.Run(later.name, func(t *testing.T) {
			h := budgetHook(t, max, BudgetConfig{})
			var allowed atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range callers {
				wg.Go(func() {
					<-start
					if run(h, sessionCall("s"), later.outcome).Allowed {
						allowed.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if later.outcome == hooks.StatusDenied {
				// Every reservation was released, so none may remain.
				if c, in := h.Budgets().Used("s"); c != 0 || in != 0 {
					t.Fatalf("Used = %d, %d after only denied calls; want 0, 0", c, in)
				}
				return
			}
			if got := allowed.Load(); got != later.want {
				t.Fatalf("%d calls allowed, want exactly %d", got, later.want)
			}
			if c, in := h.Budgets().Used("s"); c != max || in != 0 {
				t.Fatalf("Used = %d committed, %d in flight; want %d, 0", c, in, max)
			}
		})
	}
}

func TestBudgetExpiresIdleSessions(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 1, BudgetConfig{SessionTTL: time.Hour, Now: clk.Now})
	run(h, sessionCall("s"), hooks.StatusSucceeded)
	if v := run(h, sessionCall("s"), hooks.StatusSucceeded); v.Allowed {
		t.Fatal("an exhausted session was allowed")
	}
	clk.Add(59 * time.Minute)
	if v := run(h, sessionCall("s"), hooks.StatusSucceeded); v.Allowed {
		t.Fatal("a session was forgotten before its idle timeout")
	}
	// The denied attempt above kept the session alive: still exhausted.
	clk.Add(59 * time.Minute)
	run(h, sessionCall("keepalive"), hooks.StatusSucceeded) // triggers a sweep
	if v := run(h, sessionCall("s"), hooks.StatusSucceeded); v.Allowed {
		t.Fatal("an active exhausted session expired")
	}
	clk.Add(2 * time.Hour)
	run(h, sessionCall("trigger"), hooks.StatusSucceeded)
	if n := h.Budgets().Sessions(); n != 1 {
		t.Fatalf("Sessions = %d after all others idled past the TTL, want 1", n)
	}
	if v := run(h, sessionCall("s"), hooks.StatusSucceeded); !v.Allowed {
		t.Fatalf("a session idle past its TTL did not restart its budget: %s", v.Reason)
	}
}

func TestBudgetTableFullDeniesNewSessionsAndKeepsLiveOnes(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 1, BudgetConfig{SessionTTL: time.Hour, MaxSessions: 2, Now: clk.Now})
	run(h, sessionCall("a"), hooks.StatusSucceeded)
	run(h, sessionCall("b"), hooks.StatusSucceeded)
	v := run(h, sessionCall("c"), hooks.StatusSucceeded)
	if v.Allowed || v.Rule != RuleMaxToolCalls || !strings.Contains(v.Reason, "table is full") {
		t.Fatalf("a new session beyond the cap = %+v, want a denial", v)
	}
	if v := run(h, sessionCall("a"), hooks.StatusSucceeded); v.Allowed {
		t.Fatal("a live exhausted session was evicted and restarted its budget")
	}
	clk.Add(2 * time.Hour)
	if v := run(h, sessionCall("c"), hooks.StatusSucceeded); !v.Allowed {
		t.Fatalf("a new session was denied after the others expired: %s", v.Reason)
	}
}

// TestBudgetPerSenderQuotaKeepsTheTableForOthers: one caller opening
// sessions without end fills its own quota, not the table; others still
// start sessions, and the caller's expired sessions make room for it again.
func TestBudgetPerSenderQuotaKeepsTheTableForOthers(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 5, BudgetConfig{SessionTTL: time.Hour, MaxSessions: 10, MaxSessionsPerSender: 3, Now: clk.Now})
	as := func(who, session string) *hooks.Call {
		c := sessionCall(session)
		c.Caller = &hooks.Identity{Username: who}
		return c
	}
	for i := range 3 {
		if v := run(h, as("greedy", fmt.Sprint("g", i)), hooks.StatusSucceeded); !v.Allowed {
			t.Fatalf("session %d within the quota: %s", i, v.Reason)
		}
	}
	v := run(h, as("greedy", "g3"), hooks.StatusSucceeded)
	if v.Allowed || v.Rule != RuleMaxToolCalls || !strings.Contains(v.Reason, `"greedy"`) {
		t.Fatalf("a session over the caller's quota = %+v, want a denial naming the caller", v)
	}
	if v := run(h, as("greedy", "g0"), hooks.StatusSucceeded); !v.Allowed {
		t.Fatalf("a live session of a caller at its quota: %s", v.Reason)
	}
	for i := range 3 {
		if v := run(h, as("other", fmt.Sprint("o", i)), hooks.StatusSucceeded); !v.Allowed {
			t.Fatalf("another caller's session %d: %s", i, v.Reason)
		}
	}
	// g0 was used 30 minutes later than g1 and g2: only those two expire.
	clk.Add(30 * time.Minute)
	run(h, as("greedy", "g0"), hooks.StatusSucceeded)
	clk.Add(40 * time.Minute)
	for i, want := range []bool{true, true, false} {
		if v := run(h, as("greedy", fmt.Sprint("n", i)), hooks.StatusSucceeded); v.Allowed != want {
			t.Errorf("new session %d after two expired: allowed=%v, want %v (%s)", i, v.Allowed, want, v.Reason)
		}
	}
	if got, _ := h.Budgets().Used("greedy\x00g0"); got != 3 {
		t.Errorf("the session used within its TTL holds %d calls, want 3 (it must not have expired)", got)
	}
}

// TestBudgetExpiryFollowsUseNotCreation: the table evicts the sessions idle
// longest, whatever order they were created in.
func TestBudgetExpiryFollowsUseNotCreation(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 100, BudgetConfig{SessionTTL: time.Hour, MaxSessions: 3, Now: clk.Now})
	for _, s := range []string{"a", "b", "c"} {
		run(h, sessionCall(s), hooks.StatusSucceeded)
		clk.Add(time.Minute)
	}
	clk.Add(50 * time.Minute)
	run(h, sessionCall("a"), hooks.StatusSucceeded) // a is now the most recent
	clk.Add(15 * time.Minute)                       // b and c idle > 1h, a 15 min
	for _, s := range []string{"d", "e"} {
		if v := run(h, sessionCall(s), hooks.StatusSucceeded); !v.Allowed {
			t.Fatalf("new session %s with two expired sessions in a full table: %s", s, v.Reason)
		}
	}
	if v := run(h, sessionCall("f"), hooks.StatusSucceeded); v.Allowed {
		t.Fatal("a fourth session fit a full table of live sessions")
	}
	if got, _ := h.Budgets().Used("a"); got != 2 {
		t.Errorf("session a holds %d calls, want 2: a live session was evicted", got)
	}
}

func TestBudgetCommitsReservationsThatNeverSettle(t *testing.T) {
	clk := newClock()
	h := budgetHook(t, 10, BudgetConfig{PendingTTL: time.Minute, MaxPending: 3, Now: clk.Now})
	// Decide runs no after phase: reservations stay pending.
	for range 5 {
		if v, _ := h.Before(context.Background(), sessionCall("s")); !v.Allowed {
			t.Fatalf("denied: %s", v.Reason)
		}
	}
	c, in := h.Budgets().Used("s")
	if c != 2 || in != 3 {
		t.Fatalf("Used = %d, %d; want 2 committed beyond the pending cap and 3 in flight", c, in)
	}
	clk.Add(2 * time.Minute)
	// Only the call's effect on the budget matters; it is checked below.
	_, _ = h.Before(context.Background(), sessionCall("s"))
	c, in = h.Budgets().Used("s")
	if c != 5 || in != 1 {
		t.Fatalf("Used = %d, %d after the pending TTL; want 5 committed and 1 in flight", c, in)
	}
}

func TestNewBudgetsRejectsNegativeSettings(t *testing.T) {
	for _, cfg := range []BudgetConfig{{SessionTTL: -1}, {MaxSessions: -1}, {PendingTTL: -1}, {MaxPending: -1}} {
		if _, err := NewBudgets(cfg); err == nil {
			t.Errorf("NewBudgets(%+v) accepted a negative setting", cfg)
		}
	}
}

func TestBudgetsSurviveAHookReplacement(t *testing.T) {
	b, _ := NewBudgets(BudgetConfig{})
	c := &Contract{MaxToolCalls: 2}
	h1, _ := New(Config{Contract: c, Budgets: b})
	run(h1, sessionCall("s"), hooks.StatusSucceeded)
	run(h1, sessionCall("s"), hooks.StatusSucceeded)
	h2, _ := New(Config{Contract: c, Budgets: b})
	if v := run(h2, sessionCall("s"), hooks.StatusSucceeded); v.Allowed {
		t.Fatal("a replacement hook sharing the budgets restarted the count")
	}
}

func TestAContractBindsOnlyTheCallsItsSubjectsSelect(t *testing.T) {
	vip, _ := hooks.NewSubjectMatcher(hooks.Subjects{Senders: []string{"vip-*"}})
	h, err := New(Config{Subjects: vip, Contract: &Contract{MaxToolCalls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(sender string) *hooks.Call {
		c := sessionCall("s-" + sender)
		c.SenderID = sender
		return c
	}
	if v := run(h, call("vip-1"), hooks.StatusSucceeded); !v.Allowed {
		t.Fatalf("the first call of a selected sender was denied: %+v", v)
	}
	if v := run(h, call("vip-1"), hooks.StatusSucceeded); v.Allowed || v.Rule != RuleMaxToolCalls {
		t.Fatalf("the second call of a selected sender = %+v, want its budget of 1 to hold", v)
	}
	for range 3 {
		if v := run(h, call("joe"), hooks.StatusSucceeded); !v.Allowed {
			t.Fatalf("a sender the subjects do not select was bound: %+v", v)
		}
	}
	if _, err := New(Config{Contract: &Contract{MaxToolCalls: -1}}); !errors.Is(err, ErrInvalidContract) {
		t.Fatalf("an invalid contract was accepted: %v", err)
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidContract) {
		t.Fatalf("a hook without a contract was accepted: %v", err)
	}
}

func BenchmarkBeforeNoPathTool(b *testing.B) {
	m, _ := hooks.NewSubjectMatcher(hooks.Subjects{Sessions: []string{"sess-*"}})
	h, err := New(Config{Subjects: m, Contract: &Contract{
		MaxToolCalls: 1 << 30,
		ScopedCapabilities: []Capability{
			{Tool: "read_file", AllowedPaths: []string{"/ws"}},
			{Tool: "web_search"},
		},
		AllowedPaths: []string{"/ws"},
	}, WorkspaceRoot: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	c := hooks.NewCall("web_search", `{"q":"x"}`)
	c.SessionID = "sess-1"
	ctx := context.Background()
	res := &hooks.Result{Status: hooks.StatusSucceeded}
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := h.Before(ctx, c); !v.Allowed {
			b.Fatal(v.Reason)
		}
		h.After(ctx, c, res)
	}
}

func BenchmarkBeforeReadFile(b *testing.B) {
	root := b.TempDir()
	h, err := New(Config{Contract: &Contract{
		ScopedCapabilities: []Capability{{Tool: "read_file", AllowedPaths: []string{"a"}}},
	}, WorkspaceRoot: root})
	if err != nil {
		b.Fatal(err)
	}
	c := hooks.NewCall("read_file", fmt.Sprintf(`{"path":%q}`, "a/b/c/d.txt"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := h.Before(ctx, c); !v.Allowed {
			b.Fatal(v.Reason)
		}
	}
}

// BenchmarkBudgetTableFills opens 1,000,000 distinct sessions from two
// callers against the default table (100,000 sessions, 50,000 per caller
// here so that two callers can fill it), with a call of a long-lived session
// after every ten: new-session throughput and p99 latencies of both kinds of
// call, before and after the table is full. Run with -benchtime 1x.
func BenchmarkBudgetTableFills(b *testing.B) {
	for b.Loop() {
		h := budgetHook(b, 1000000, BudgetConfig{MaxSessionsPerSender: DefaultMaxSessions / 2})
		ctx := context.Background()
		res := &hooks.Result{Status: hooks.StatusSucceeded}
		callers := []*hooks.Identity{{Username: "agent-a"}, {Username: "agent-b"}}
		live := sessionCall("long-lived")
		live.Caller = callers[0]
		var newLat, liveLat [2][]time.Duration // [before full, after full]
		var newTime [2]time.Duration
		var newCount [2]int
		phase := 0
		for i := range 1_000_000 {
			c := sessionCall(fmt.Sprint("s-", i))
			c.Caller = callers[i%2]
			t0 := time.Now()
			v, _ := h.Before(ctx, c)
			if v.Allowed {
				h.After(ctx, c, res)
			} else if phase == 0 {
				phase = 1
			}
			d := time.Since(t0)
			newLat[phase] = append(newLat[phase], d)
			newTime[phase] += d
			newCount[phase]++
			if i%10 == 0 {
				t0 = time.Now()
				if v, _ := h.Before(ctx, live); !v.Allowed {
					b.Fatalf("the long-lived session was denied: %s", v.Reason)
				}
				h.After(ctx, live, res)
				liveLat[phase] = append(liveLat[phase], time.Since(t0))
			}
		}
		p99 := func(ds []time.Duration) float64 {
			if len(ds) == 0 {
				return 0
			}
			slices.Sort(ds)
			return float64(ds[len(ds)*99/100].Nanoseconds())
		}
		for ph, name := range []string{"filling", "full"} {
			if newCount[ph] > 0 {
				b.ReportMetric(float64(newCount[ph])/newTime[ph].Seconds(), "new-sessions/s-"+name)
			}
			b.ReportMetric(p99(newLat[ph]), "new-p99-ns-"+name)
			b.ReportMetric(p99(liveLat[ph]), "live-p99-ns-"+name)
		}
	}
}

// TestPerSenderBudgetHoldsAcrossRotatedSessions: a caller opening a new
// session for every call still gets only its calls per window; another
// caller has its own count; the window slides.
func TestPerSenderBudgetHoldsAcrossRotatedSessions(t *testing.T) {
	clk := newClock()
	b, err := NewBudgets(BudgetConfig{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Contract: &Contract{MaxToolCalls: 100, PerSender: &SenderLimit{Calls: 10, WindowMillis: time.Hour.Milliseconds()}}, Budgets: b})
	if err != nil {
		t.Fatal(err)
	}
	as := func(who string, i int) *hooks.Call {
		c := sessionCall(fmt.Sprint("rotated-", i))
		c.Caller = &hooks.Identity{Username: who}
		return c
	}
	allowed := 0
	for i := range 50 {
		v := run(h, as("rotator", i), hooks.StatusSucceeded)
		if v.Allowed {
			allowed++
		} else if v.Rule != RuleMaxToolCallsPerSender || !strings.Contains(v.Reason, `"rotator"`) {
			t.Fatalf("call %d denied by %s: %s", i, v.Rule, v.Reason)
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 50 calls over 50 sessions allowed, want 10", allowed)
	}
	if v := run(h, as("other", 0), hooks.StatusSucceeded); !v.Allowed {
		t.Errorf("another caller: %s", v.Reason)
	}
	clk.Add(30 * time.Minute)
	if v := run(h, as("rotator", 99), hooks.StatusSucceeded); v.Allowed {
		t.Error("allowed within the window after ten calls")
	}
	clk.Add(31 * time.Minute)
	if v := run(h, as("rotator", 100), hooks.StatusSucceeded); !v.Allowed {
		t.Errorf("a call after the window slid past the first ten: %s", v.Reason)
	}
	for _, bad := range []*Contract{{PerSender: &SenderLimit{Calls: 1, WindowMillis: time.Second.Milliseconds()}}, {PerSender: &SenderLimit{Calls: -1}}, {PerSender: &SenderLimit{Calls: 1, WindowMillis: (1000 * time.Hour).Milliseconds()}}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidContract) {
			t.Errorf("contract %+v: %v, want ErrInvalidContract", bad, err)
		}
	}
}
