package statestore_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
	"github.com/toolhooks/toolhooks/internal/statestore"
	"github.com/toolhooks/toolhooks/internal/statestore/redistest"
)

// generous is the per-operation deadline of tests that measure counts, not
// latency: two cores shared with other test processes.
const generous = 2 * time.Second

func newStore(t *testing.T, srv *redistest.Server, opts statestore.Options) *statestore.Redis {
	t.Helper()
	opts.Address = srv.Addr
	if opts.Timeout == 0 {
		opts.Timeout = generous
	}
	s, err := statestore.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	waitReady(t, s)
	return s
}

func waitReady(t *testing.T, s *statestore.Redis) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the store never became ready: %v", s.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scope returns a contract hook counting in store under policy.
func scope(t *testing.T, store contract.Store, policy string, c contract.Contract, rules []ratelimit.Rule, onFailure contract.StateFailurePolicy) *contract.ContractScope {
	t.Helper()
	cfg := contract.Config{Contract: &c, Store: store, Policy: policy, RateRules: "rules", OnStoreFailure: onFailure}
	if len(rules) > 0 {
		rl, err := ratelimit.New(ratelimit.Config{Rules: rules})
		if err != nil {
			t.Fatal(err)
		}
		cfg.RateLimit = rl
	}
	h, err := contract.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func call(session, sender, tool string) *hooks.Call {
	return &hooks.Call{SessionID: session, SenderID: sender, Caller: &hooks.Identity{Username: sender}, Tool: tool, Args: map[string]any{}}
}

// run is one call through h: Before, then After with the outcome a later
// hook gave it (denied by it when laterDenies).
func run(t *testing.T, h *contract.ContractScope, c *hooks.Call, laterDenies bool) hooks.Verdict {
	t.Helper()
	v, err := h.Before(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	res := &hooks.Result{Status: hooks.StatusSucceeded}
	if !v.Allowed || laterDenies {
		res.Status = hooks.StatusDenied
	}
	h.After(context.Background(), c, res)
	return v
}

func TestABudgetIsExactAndSurvivesTheHookAndTheClient(t *testing.T) {
	srv := redistest.Start(t)
	h := scope(t, newStore(t, srv, statestore.Options{}), "uid-1", contract.Contract{MaxToolCalls: 3}, nil, "")
	for i := range 3 {
		if v := run(t, h, call("s", "alice", "read_file"), false); !v.Allowed {
			t.Fatalf("call %d denied: %+v", i+1, v)
		}
	}
	// A call a later hook denies did not execute: its slot comes back.
	h2 := scope(t, newStore(t, srv, statestore.Options{}), "uid-1", contract.Contract{MaxToolCalls: 4}, nil, "")
	if v := run(t, h2, call("s", "alice", "read_file"), true); !v.Allowed {
		t.Fatalf("4th call (budget raised to 4) denied: %+v", v)
	}
	if v := run(t, h2, call("s", "alice", "read_file"), false); !v.Allowed {
		t.Fatalf("the slot of the call a later hook denied was not given back: %+v", v)
	}
	v := run(t, h2, call("s", "alice", "read_file"), false)
	if v.Allowed || v.Rule != contract.RuleMaxToolCalls || !strings.Contains(v.Reason, "budget of 4") {
		t.Fatalf("5th call: %+v, want denied by maxToolCalls", v)
	}
	// Another session, another caller's session of the same id, another
	// policy: counted apart.
	for _, c := range []struct {
		h    *contract.ContractScope
		call *hooks.Call
	}{{h2, call("t", "alice", "x")}, {h2, call("s", "bob", "x")}, {scope(t, newStore(t, srv, statestore.Options{}), "uid-2", contract.Contract{MaxToolCalls: 1}, nil, ""), call("s", "alice", "x")}} {
		if v := run(t, c.h, c.call, false); !v.Allowed {
			t.Errorf("%+v: denied (%s): counters are not namespaced", c.call, v.Reason)
		}
	}
}

func TestConcurrentCallsThroughThreeClientsAreCountedExactly(t *testing.T) {
	srv := redistest.Start(t)
	const budget, calls = 100, 1000
	var hs []*contract.ContractScope
	for range 3 {
		hs = append(hs, scope(t, newStore(t, srv, statestore.Options{}), "uid", contract.Contract{MaxToolCalls: budget}, nil, ""))
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if v := run(t, hs[i%3], call("s", "alice", "x"), false); v.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != budget {
		t.Fatalf("%d calls executed, want exactly %d", got, budget)
	}
}

func TestARetriedReservationCountsOnce(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{})
	c := call("s", "alice", "x")
	r := &contract.Reservation{ID: "retry-1", Call: c, Policy: "p", Session: "alice\x00s", MaxToolCalls: 2, RateRules: "r", RatePerMinute: 2}
	for range 3 {
		if v, err := s.Reserve(context.Background(), r); err != nil || !v.Allowed {
			t.Fatalf("Reserve (retry of one reservation): %+v, %v", v, err)
		}
	}
	for range 3 {
		if err := s.Settle(context.Background(), r, true); err != nil {
			t.Fatal(err)
		}
	}
	// One executed call: one slot of the budget and of the rate limit left.
	r2 := *r
	r2.ID = "retry-2"
	if v, err := s.Reserve(context.Background(), &r2); err != nil || !v.Allowed {
		t.Fatalf("second reservation: %+v, %v; the retries were counted", v, err)
	}
	r3 := *r
	r3.ID = "retry-3"
	if v, err := s.Reserve(context.Background(), &r3); err != nil || v.Allowed || v.Rule != contract.RuleMaxToolCalls {
		t.Fatalf("third reservation: %+v, %v; want the budget denial", v, err)
	}
}

func TestRateLimitsAndCallerWindowsAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	rules := []ratelimit.Rule{{Tools: "sk_*", PerSenderPerMinute: 5}}
	a := scope(t, newStore(t, srv, statestore.Options{}), "uid", contract.Contract{}, rules, "")
	b := scope(t, newStore(t, srv, statestore.Options{}), "uid", contract.Contract{}, rules, "")
	for i := range 5 {
		h := []*contract.ContractScope{a, b}[i%2]
		if v := run(t, h, call(fmt.Sprint("s", i), "alice", "sk_run"), false); !v.Allowed {
			t.Fatalf("call %d denied: %+v", i+1, v)
		}
	}
	if v := run(t, b, call("s9", "alice", "sk_run"), false); v.Allowed || v.Rule != ratelimit.RuleRateLimit {
		t.Fatalf("6th call in the minute: %+v, want the rate limit", v)
	}
	for _, c := range []*hooks.Call{call("s", "bob", "sk_run"), call("s", "alice", "sk_other"), call("s", "alice", "unlimited")} {
		if v := run(t, a, c, false); !v.Allowed {
			t.Errorf("%s/%s denied: %+v", c.SenderID, c.Tool, v)
		}
	}

	quota := contract.Contract{PerSender: &contract.SenderLimit{Calls: 2, WindowMillis: time.Hour.Milliseconds()}}
	q1 := scope(t, newStore(t, srv, statestore.Options{}), "uid-q", quota, nil, "")
	q2 := scope(t, newStore(t, srv, statestore.Options{}), "uid-q", quota, nil, "")
	run(t, q1, call("s1", "carol", "x"), false)
	run(t, q2, call("s2", "carol", "x"), false)
	if v := run(t, q1, call("s3", "carol", "x"), false); v.Allowed || v.Rule != contract.RuleMaxToolCallsPerSender {
		t.Fatalf("third call of the hour across sessions and clients: %+v, want maxToolCallsPerSender", v)
	}
}

func TestADeniedLimitTakesNothingFromTheOthers(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{})
	h := scope(t, s, "uid", contract.Contract{MaxToolCalls: 10}, []ratelimit.Rule{{Tools: "*", PerSenderPerMinute: 2}}, "")
	for range 2 {
		run(t, h, call("s", "alice", "x"), false)
	}
	for range 5 {
		if v := run(t, h, call("s", "alice", "x"), false); v.Rule != ratelimit.RuleRateLimit {
			t.Fatalf("%+v, want the rate limit", v)
		}
	}
	// The session spent 2 of 10: the 8 left are there for another tool.
	for i := range 8 {
		if v := run(t, h, call("s", "alice", fmt.Sprint("tool", i)), false); !v.Allowed {
			t.Fatalf("call %d: %+v; the rate-limited attempts took budget", i+3, v)
		}
	}
}

// A reservation counts from the moment it is taken: one never settled (its
// gateway died) stays counted; a release gives it back once; a reservation
// retried after its release takes nothing.
func TestAReservationCountsUntilReleasedOnce(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{})
	r := func(id string) *contract.Reservation {
		return &contract.Reservation{ID: id, Call: call("s", "alice", "x"), Policy: "p", Session: "s", MaxToolCalls: 2}
	}
	reserve := func(id string) string {
		t.Helper()
		v, err := s.Reserve(context.Background(), r(id))
		switch {
		case err != nil:
			return "error: " + err.Error()
		case v.Allowed:
			return "ok"
		}
		return v.Rule
	}
	if got := reserve("a") + " " + reserve("b") + " " + reserve("c"); got != "ok ok "+contract.RuleMaxToolCalls {
		t.Fatalf("three reservations, none settled, on a budget of 2: %s", got)
	}
	for range 3 { // released once, however often the release is sent
		if err := s.Settle(context.Background(), r("a"), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := reserve("d") + " " + reserve("e"); got != "ok "+contract.RuleMaxToolCalls {
		t.Fatalf("after releasing one reservation three times: %s, want one slot back", got)
	}
	if got := reserve("a"); got != "error: the reservation was released" {
		t.Fatalf("the released reservation retried: %s", got)
	}
	// A release that reaches the server before its reservation cancels it.
	if err := s.Settle(context.Background(), r("late"), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(context.Background(), r("d"), false); err != nil {
		t.Fatal(err)
	}
	if got := reserve("late"); got != "error: the reservation was cancelled" {
		t.Fatalf("a reservation arriving after its release: %s", got)
	}
	if got := reserve("f") + " " + reserve("g"); got != "ok "+contract.RuleMaxToolCalls {
		t.Fatalf("the cancelled reservation took a slot: %s", got)
	}
}

func TestAnIdleSessionExpires(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{SessionTTL: 300 * time.Millisecond})
	h := scope(t, s, "uid", contract.Contract{MaxToolCalls: 1}, nil, "")
	run(t, h, call("s", "alice", "x"), false)
	if v := run(t, h, call("s", "alice", "x"), false); v.Allowed {
		t.Fatal("second call allowed over a budget of 1")
	}
	time.Sleep(700 * time.Millisecond)
	if v := run(t, h, call("s", "alice", "x"), false); !v.Allowed {
		t.Fatalf("after the session TTL of idleness: %+v, want a fresh budget", v)
	}
	if n, _ := srv.Do("DBSIZE"); !strings.HasPrefix(n, ":") {
		t.Fatalf("DBSIZE: %q", n)
	}
}

func TestKeysAreNamespacedAndExpire(t *testing.T) {
	srv := redistest.Start(t)
	const sessionTTL = 7 * time.Minute
	s := newStore(t, srv, statestore.Options{KeyPrefix: "team-a:", SessionTTL: sessionTTL})
	h := scope(t, s, "uid-9", contract.Contract{MaxToolCalls: 5, PerSender: &contract.SenderLimit{Calls: 5, WindowMillis: time.Minute.Milliseconds()}},
		[]ratelimit.Rule{{Tools: "*", PerSenderPerMinute: 5}}, "")
	run(t, h, call("s", "alice", "x"), false)
	keys, err := scanKeys(srv)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	// Each kind of key lives as long as what it counts: the session's count
	// the session TTL, a window its span (61 buckets of a sixtieth), the
	// record of a reservation the time a retry may come (2 minutes).
	want := map[string]time.Duration{"s": sessionTTL, "w": 61 * time.Second, "r": 61 * time.Second, "rsv": 2 * time.Minute}
	seen := map[string]bool{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, "team-a:{uid-9}:")
		if !ok {
			t.Errorf("key %q is not under team-a:{uid-9}:", k)
			continue
		}
		kind, _, _ := strings.Cut(rest, ":")
		seen[kind] = true
		ttl, err := srv.Do("PTTL", k)
		ms, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(ttl, ":")), 10, 64)
		if err != nil || perr != nil || ms < 0 {
			t.Errorf("key %q has no TTL: %q %v", k, ttl, err)
			continue
		}
		// The test's own run takes well under 30 s of the TTL.
		if w, ok := want[kind]; !ok || time.Duration(ms)*time.Millisecond > w || time.Duration(ms)*time.Millisecond < w-30*time.Second {
			t.Errorf("key %q: TTL %dms, want about %s", k, ms, w)
		}
	}
	for kind := range want {
		if !seen[kind] {
			t.Errorf("no %q key written (keys %q)", kind, keys)
		}
	}
}

// scanKeys lists the server's keys with KEYS * through redis-cli-free RESP.
func scanKeys(srv *redistest.Server) ([]string, error) {
	return srv.Keys()
}

func TestAStoreThatIsDownOrHangsFailsClosedWithinTheDeadline(t *testing.T) {
	srv := redistest.Start(t)
	var errs atomic.Int64
	s := newStore(t, srv, statestore.Options{Timeout: 200 * time.Millisecond, Observe: func(_ string, _ time.Duration, err error) {
		if err != nil {
			errs.Add(1)
		}
	}})
	strict := scope(t, s, "uid", contract.Contract{MaxToolCalls: 4}, nil, "")
	lenient := scope(t, s, "uid2", contract.Contract{MaxToolCalls: 4}, nil, contract.StateFailureIgnore)
	run(t, strict, call("s", "alice", "x"), false)
	run(t, lenient, call("s", "alice", "x"), false)

	check := func(what string) {
		t.Helper()
		start := time.Now()
		v := run(t, strict, call("s", "alice", "x"), false)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: the call took %s", what, took)
		}
		if v.Allowed || v.Rule != contract.RuleStateStore || !strings.Contains(v.Reason, s.Name()) {
			t.Errorf("%s: %+v, want denied by stateStore naming %s", what, v, s.Name())
		}
		if v := run(t, lenient, call("s", "alice", "x"), false); !v.Allowed {
			t.Errorf("%s: under stateFailurePolicy Ignore: %+v, want allowed", what, v)
		}
	}
	srv.Pause()
	check("server hanging")
	srv.Resume()
	waitReady(t, s)
	srv.Stop()
	check("server stopped")
	for s.Ready() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	check("server known down")
	// Nothing was sent, so there is nothing to give back.
	if _, err := s.Reserve(context.Background(), &contract.Reservation{ID: "x", Call: call("s", "alice", "x"), Policy: "uid",
		Session: "s", MaxToolCalls: 4}); !errors.Is(err, contract.ErrNotSent) || !strings.Contains(err.Error(), "unreachable since") {
		t.Errorf("a reservation while the server is known down: %v, want ErrNotSent", err)
	}
	if errs.Load() == 0 {
		t.Error("no failure was reported to Observe")
	}
	srv.Restart()
	waitReady(t, s)
	// The strict policy's session executed 1 call; the failures counted
	// nothing, whatever the server saw of them. 3 left.
	for i := range 3 {
		if v := run(t, strict, call("s", "alice", "x"), false); !v.Allowed {
			t.Fatalf("after the restart, call %d: %+v", i+2, v)
		}
	}
	if v := run(t, strict, call("s", "alice", "x"), false); v.Allowed {
		t.Fatal("a fifth call was allowed over a budget of 4: a failed reservation was lost or the count was")
	}
}

// The scripts are on the server as soon as the store is ready, so a call's
// first reservation does not spend its deadline loading one, and calls run
// them by hash (EVALSHA), never sending their text again.
func TestTheScriptsAreLoadedBeforeTheFirstCall(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer func() { _ = client.Close() }()
	for _, name := range []string{"reserve.lua", "release.lua"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum(b)
		if got, err := client.ScriptExists(context.Background(), hex.EncodeToString(sum[:])).Result(); err != nil || len(got) != 1 || !got[0] {
			t.Fatalf("SCRIPT EXISTS %s: %v %v", name, got, err)
		}
	}
	// Health checks go on loading them meanwhile.
	h := scope(t, s, "uid", contract.Contract{MaxToolCalls: 100}, nil, "")
	for range 3 {
		run(t, h, call("s", "alice", "x"), true)
		time.Sleep(time.Second)
	}
	stats, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`cmdstat_evalsha:calls=6,.*,failed_calls=0\r?\n`).MatchString(stats) || strings.Contains(stats, "cmdstat_eval:") {
		t.Fatalf("three reservations and their releases were not run by hash alone:\n%s", stats)
	}
}

// TestAskAfterCallsCountsTheSessionAcrossClients checks a contract whose
// only counter is its ask.afterCalls: the session's calls are counted in the
// shared store, so the third call asks whichever gateway it reaches, a call
// asked about and not run is not counted, a retried reservation keeps its
// place, and a store that fails asks rather than allow uncounted under
// stateFailurePolicy Ignore.
func TestAskAfterCallsCountsTheSessionAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	c := contract.Contract{Ask: &contract.Ask{AfterCalls: 2}}
	a := scope(t, newStore(t, srv, statestore.Options{}), "uid", c, nil, contract.StateFailureIgnore)
	b := scope(t, newStore(t, srv, statestore.Options{}), "uid", c, nil, contract.StateFailureIgnore)
	for i, h := range []*contract.ContractScope{a, b} {
		if v := run(t, h, call("s", "alice", "x"), false); !v.Allowed || v.Ask {
			t.Fatalf("call %d of 2 free ones: %+v", i+1, v)
		}
	}
	for i, h := range []*contract.ContractScope{a, b, a} {
		v := run(t, h, call("s", "alice", "x"), false)
		if !v.Ask || v.Rule != contract.RuleAskAfterCalls || !strings.Contains(v.Reason, "call 3 of session") {
			t.Fatalf("third call, attempt %d: %+v, want an ask for call 3 (asked calls that did not run are not counted)", i+1, v)
		}
	}
	if v := run(t, b, call("t", "alice", "x"), false); !v.Allowed || v.Ask {
		t.Fatalf("another session's first call: %+v", v)
	}

	s := newStore(t, srv, statestore.Options{})
	r := &contract.Reservation{ID: "retry-nth", Call: call("u", "alice", "x"), Policy: "uid", Session: "alice\x00u",
		MaxToolCalls: contract.MaxToolCallsLimit}
	for range 3 {
		if v, err := s.Reserve(context.Background(), r); err != nil || !v.Allowed || r.Nth != 1 {
			t.Fatalf("Reserve (a retry of one reservation): %+v, %v, nth %d; want allowed as call 1", v, err, r.Nth)
		}
	}

	srv.Stop()
	v := run(t, a, call("s", "alice", "x"), false)
	if !v.Ask || v.Rule != contract.RuleAskAfterCalls || !strings.Contains(v.Reason, "could not count") {
		t.Fatalf("a call the store could not count, under Ignore: %+v, want an ask", v)
	}
}

// outcomes counts the calls of a load by outcome: "ran" (allowed, and run)
// or the rule that denied them.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(v hooks.Verdict) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	k := "ran"
	if !v.Allowed {
		k = v.Rule
	}
	o.n[k]++
}

func (o *outcomes) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[k]
}

func (o *outcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.n)
}

// sessionCount returns the count of session "s" (caller alice) of policy
// uid in the server.
func sessionCount(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer func() { _ = c.Close() }()
	n, err := c.HGet(context.Background(), statestore.DefaultKeyPrefix+"{uid}:s:alice\x00s", "c").Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

// A healthy store falsely denies nothing: 64 callers at once, 3,200 calls,
// none denied by the stateStore rule, and the server counts exactly the
// calls that ran.
func TestAHealthyStoreDeniesNothingAtSixtyFourCallers(t *testing.T) {
	srv := redistest.Start(t)
	h := scope(t, newStore(t, srv, statestore.Options{}), "uid", contract.Contract{MaxToolCalls: 1 << 20},
		[]ratelimit.Rule{{Tools: "x", PerSenderPerMinute: 100000}}, "")
	var got outcomes
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 50 {
				got.add(run(t, h, call("s", "alice", "x"), false))
			}
		})
	}
	wg.Wait()
	if got.get("ran") != 64*50 {
		t.Fatalf("outcomes %v, want all 3200 calls run", &got)
	}
	if n := sessionCount(t, srv); n != got.get("ran") {
		t.Fatalf("the server counted %d calls, %d ran", n, got.get("ran"))
	}
}

// A store stopped (SIGSTOP) in the middle of a load of 256 callers: the
// calls sent to it are denied when it has not answered within the deadline,
// without waiting for it to come back, and the reservations it runs when it
// continues, after their deadline, take nothing. So the server's count is
// the calls that ran, and the session gets exactly its budget: no slot is
// spent on a call that was denied.
func TestTheCountIsTheCallsThatRanWhenTheStoreStalls(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{Timeout: 50 * time.Millisecond})
	const budget = 3000
	h := scope(t, s, "uid", contract.Contract{MaxToolCalls: budget}, nil, "")
	var (
		got     outcomes
		wg      sync.WaitGroup
		paused  = make(chan struct{})
		resumed = make(chan struct{})
		once    sync.Once
	)
	// During the pause, calls are denied while the server is still stopped.
	var deniedWhilePaused atomic.Int64
	for range 256 {
		wg.Go(func() {
			for {
				v := run(t, h, call("s", "alice", "x"), false)
				got.add(v)
				select {
				case <-paused:
					select {
					case <-resumed:
					default:
						if v.Rule == contract.RuleStateStore {
							deniedWhilePaused.Add(1)
						}
					}
				default:
				}
				if v.Rule == contract.RuleMaxToolCalls {
					return
				}
				if got.get("ran") >= 300 {
					once.Do(func() { srv.Pause(); close(paused) })
				}
			}
		})
	}
	<-paused
	// Resume once the calls sent to the stopped server have been denied and
	// the store has been found down (calls then fail at once, unsent).
	for deniedWhilePaused.Load() < 256 || s.Ready() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	srv.Resume()
	close(resumed)
	wg.Wait()
	// A reservation the server took just before it stopped, whose reply came
	// after its call was denied, is given back in the background: wait for
	// the count to come down to the calls that ran, then spend what is left.
	deadline := time.Now().Add(time.Minute)
	for sessionCount(t, srv) != got.get("ran") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for {
		v := run(t, h, call("s", "alice", "x"), false)
		got.add(v)
		if !v.Allowed {
			if v.Rule != contract.RuleMaxToolCalls {
				t.Fatalf("after the store came back: %+v", v)
			}
			break
		}
	}
	t.Logf("outcomes %v; %d denied while the server was stopped", &got, deniedWhilePaused.Load())
	if got.get(contract.RuleStateStore) == 0 {
		t.Fatal("no call was denied while the server was stopped")
	}
	if n := sessionCount(t, srv); n != got.get("ran") || n != budget {
		t.Fatalf("the server counted %d calls, %d ran, of a budget of %d (%v)", n, got.get("ran"), budget, &got)
	}
}

// Every call to a stopped server is denied while it is still stopped: 64
// callers, none waits for it to come back, none is allowed uncounted.
func TestEveryCallToAStoppedStoreIsDeniedWhileItIsStopped(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{Timeout: 100 * time.Millisecond})
	h := scope(t, s, "uid", contract.Contract{MaxToolCalls: 1000}, nil, "")
	run(t, h, call("s", "alice", "x"), false)
	srv.Pause()
	var got outcomes
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 3 {
				got.add(run(t, h, call("s", "alice", "x"), false))
			}
		})
	}
	wg.Wait()
	// Still stopped: every call above came back without it.
	denied := got.get(contract.RuleStateStore)
	srv.Resume()
	if denied != 64*3 {
		t.Fatalf("outcomes while the server was stopped: %v, want all 192 denied by stateStore", &got)
	}
	waitReady(t, s)
	if n := sessionCount(t, srv); n != 1 {
		t.Fatalf("the server counted %d calls, 1 ran: reservations it ran after their deadline took a slot", n)
	}
}

// A release that fails (the server is down) is retried in the background
// until the server is back: the slot of a call that did not run is not kept.
func TestAReleaseThatFailsIsRetriedUntilTheServerIsBack(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, statestore.Options{})
	r := &contract.Reservation{ID: "r1", Call: call("s", "alice", "x"), Policy: "uid", Session: "alice\x00s", MaxToolCalls: 10}
	if v, err := s.Reserve(context.Background(), r); err != nil || !v.Allowed {
		t.Fatalf("Reserve: %+v, %v", v, err)
	}
	srv.Stop()
	if err := s.Settle(context.Background(), r, false); err == nil {
		t.Fatal("a release to a stopped server succeeded")
	}
	srv.Restart()
	deadline := time.Now().Add(time.Minute)
	for sessionCount(t, srv) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the failed release was never retried: the slot of a call that did not run stays taken")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
