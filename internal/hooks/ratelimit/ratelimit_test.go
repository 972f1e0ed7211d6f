package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time                     { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Set(t time.Time)                    { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) Add(d time.Duration)                { c.ns.Add(int64(d)) }
func (c *fakeClock) at(base time.Time, d time.Duration) { c.Set(base.Add(d)) }

// epoch is a whole-second start time so offsets read naturally.
var epoch = time.Unix(1_700_000_000, 0)

func mustNew(t testing.TB, cfg Config) *RateLimit {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

func call(sender, tool string) *hooks.Call {
	return &hooks.Call{SenderID: sender, Tool: tool, Args: map[string]any{}}
}

func before(t testing.TB, h *RateLimit, c *hooks.Call) hooks.Verdict {
	t.Helper()
	v, err := h.Before(context.Background(), c)
	if err != nil {
		t.Fatalf("Before: %v", err)
	}
	return v
}

func TestNewRejectsInvalidRules(t *testing.T) {
	tests := []struct {
		name    string
		rule    Rule
		wantErr error
	}{
		{"an empty tools glob is rejected", Rule{Tools: "", PerSenderPerMinute: 1}, ErrInvalidRule},
		{"an unbalanced bracket glob is rejected", Rule{Tools: "sk_[", PerSenderPerMinute: 1}, doublestar.ErrBadPattern},
		{"an unbalanced brace glob is rejected", Rule{Tools: "{a,b", PerSenderPerMinute: 1}, doublestar.ErrBadPattern},
		{"a zero limit is rejected", Rule{Tools: "*", PerSenderPerMinute: 0}, ErrInvalidRule},
		{"a negative limit is rejected", Rule{Tools: "*", PerSenderPerMinute: -5}, ErrInvalidRule},
		{"a limit above the maximum is rejected", Rule{Tools: "*", PerSenderPerMinute: MaxPerMinute + 1}, ErrInvalidRule},
		{"a valid rule is accepted", Rule{Tools: "sk_*", PerSenderPerMinute: 10}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Rules: []Rule{tt.rule}})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("New: unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New error = %v, want wrapping %v", err, tt.wantErr)
			}
		})
	}
	if _, err := New(Config{MaxKeys: -1}); err == nil {
		t.Fatal("New accepted a negative MaxKeys")
	}
}

func TestLimitMatchesGlobsAndTakesTheLargest(t *testing.T) {
	h := mustNew(t, Config{Rules: []Rule{
		{Tools: "light.*", PerSenderPerMinute: 3},
		{Tools: "abc*def", PerSenderPerMinute: 4},
		{Tools: "sk_*", PerSenderPerMinute: 5},
		{Tools: "sk_search", PerSenderPerMinute: 50},
		{Tools: "sk_*", PerSenderPerMinute: 7},
	}})
	tests := []struct {
		name      string
		tool      string
		wantLimit int
		wantOK    bool
	}{
		{"light.* does not match switch.kitchen", "switch.kitchen", 0, false},
		{"light.* matches light.kitchen", "light.kitchen", 3, true},
		{"abc*def does not match abcZZZde", "abcZZZde", 0, false},
		{"abc*def matches abcZZZdef", "abcZZZdef", 4, true},
		{"the largest of several matching limits applies", "sk_search", 50, true},
		{"the largest of two equal globs applies", "sk_other", 7, true},
		{"a tool no rule matches is not limited", "read_file", 0, false},
		{"glob star does not cross a slash", "sk_a/b", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := h.Limit(tt.tool)
			if got != tt.wantLimit || ok != tt.wantOK {
				t.Fatalf("Limit(%q) = %d, %v; want %d, %v", tt.tool, got, ok, tt.wantLimit, tt.wantOK)
			}
		})
	}
}

// TestBeforeAllowsAtMostTheLimitInAnySixtySecondWindow checks the property
// that defeats the fixed-window 2x burst, at several boundary offsets.
func TestBeforeAllowsAtMostTheLimitInAnySixtySecondWindow(t *testing.T) {
	const n = 10
	tests := []struct {
		name          string
		first, second time.Duration // times of the two bursts of n calls
		wantSecond    int           // calls of the second burst that pass
	}{
		{"a burst at 59.9s after a burst at 0s is fully denied", 0, 59900 * time.Millisecond, 0},
		{"bursts at 59.9s and 60.1s (across a minute boundary) allow only n in total", 59900 * time.Millisecond, 60100 * time.Millisecond, 0},
		{"bursts at 0.9s and 60.1s are within one 60 s window and allow only n", 900 * time.Millisecond, 60100 * time.Millisecond, 0},
		{"a burst 61s after the first is fully allowed again", 0, 61 * time.Second, n},
		{"a burst two minutes later is fully allowed again", 30 * time.Second, 150 * time.Second, n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock(epoch)
			h := mustNew(t, Config{Rules: []Rule{{Tools: "*", PerSenderPerMinute: n}}, Now: clk.Now})
			clk.at(epoch, tt.first)
			for i := range n {
				if v := before(t, h, call("alice", "web_search")); !v.Allowed {
					t.Fatalf("first burst call %d denied: %s", i, v.Reason)
				}
			}
			clk.at(epoch, tt.second)
			passed := 0
			for range n {
				if before(t, h, call("alice", "web_search")).Allowed {
					passed++
				}
			}
			if passed != tt.wantSecond {
				t.Fatalf("second burst: %d calls passed, want %d", passed, tt.wantSecond)
			}
		})
	}
}

// TestBeforeNeverExceedsTheLimitInAnyWindowUnderASteadyStream drives a call
// every 100 ms for five minutes and checks every 60-second window.
func TestBeforeNeverExceedsTheLimitInAnyWindowUnderASteadyStream(t *testing.T) {
	const n = 7
	clk := newClock(epoch)
	h := mustNew(t, Config{Rules: []Rule{{Tools: "*", PerSenderPerMinute: n}}, Now: clk.Now})
	var allowed []time.Duration
	for d := time.Duration(0); d < 5*time.Minute; d += 100 * time.Millisecond {
		clk.at(epoch, d)
		if before(t, h, call("bob", "shell")).Allowed {
			allowed = append(allowed, d)
		}
	}
	if len(allowed) < 4*n {
		t.Fatalf("only %d calls allowed in five minutes at limit %d per minute: limiter too strict", len(allowed), n)
	}
	for i := range allowed {
		inWindow := 0
		for j := i; j < len(allowed) && allowed[j]-allowed[i] < time.Minute; j++ {
			inWindow++
		}
		if inWindow > n {
			t.Fatalf("%d calls allowed in the 60 s window starting at %v, limit %d", inWindow, allowed[i], n)
		}
	}
}

func TestBeforeKeysBySenderAndTool(t *testing.T) {
	clk := newClock(epoch)
	h := mustNew(t, Config{Rules: []Rule{{Tools: "*", PerSenderPerMinute: 1}}, Now: clk.Now})
	steps := []struct {
		name   string
		sender string
		tool   string
		want   bool
	}{
		{"alice's first shell call is allowed", "alice", "shell", true},
		{"alice's second shell call is denied", "alice", "shell", false},
		{"alice's first git call is allowed: limits are per tool", "alice", "git", true},
		{"bob's first shell call is allowed: limits are per sender", "bob", "shell", true},
		{"bob's second shell call is denied", "bob", "shell", false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			v := before(t, h, call(s.sender, s.tool))
			if v.Allowed != s.want {
				t.Fatalf("Allowed = %v, want %v (%s)", v.Allowed, s.want, v.Reason)
			}
			if !v.Allowed {
				if v.Rule != RuleRateLimit {
					t.Errorf("Rule = %q, want %q", v.Rule, RuleRateLimit)
				}
				for _, want := range []string{s.sender, s.tool, "1 calls per minute"} {
					if !strings.Contains(v.Reason, want) {
						t.Errorf("Reason %q does not mention %q", v.Reason, want)
					}
				}
			}
		})
	}
}

func TestBeforeAllowsToolsNoRuleMatches(t *testing.T) {
	h := mustNew(t, Config{Rules: []Rule{{Tools: "sk_*", PerSenderPerMinute: 1}}})
	for i := range 100 {
		if v := before(t, h, call("alice", "read_file")); !v.Allowed {
			t.Fatalf("call %d to an unmatched tool denied: %s", i, v.Reason)
		}
	}
	if h.Len() != 0 {
		t.Fatalf("unmatched tool created %d keys, want 0", h.Len())
	}
}

func TestBeforeIsStricterWhenTheClockGoesBackwards(t *testing.T) {
	clk := newClock(epoch.Add(100 * time.Second))
	h := mustNew(t, Config{Rules: []Rule{{Tools: "*", PerSenderPerMinute: 2}}, Now: clk.Now})
	before(t, h, call("a", "t"))
	before(t, h, call("a", "t"))
	clk.Set(epoch) // 100 s back
	if v := before(t, h, call("a", "t")); v.Allowed {
		t.Fatal("a call after the clock went backwards escaped the limit")
	}
}

func TestIdleKeysExpireAndTheCapFailsClosed(t *testing.T) {
	clk := newClock(epoch)
	h := mustNew(t, Config{Rules: []Rule{{Tools: "*", PerSenderPerMinute: 1}}, MaxKeys: 2, Now: clk.Now})
	before(t, h, call("s1", "t"))
	before(t, h, call("s2", "t"))
	v := before(t, h, call("s3", "t"))
	if v.Allowed || v.Rule != RuleRateLimit || !strings.Contains(v.Reason, "maximum of 2") {
		t.Fatalf("a new key beyond the cap = %+v, want a capacity denial", v)
	}
	clk.Add(30 * time.Second)
	if v := before(t, h, call("s3", "t")); v.Allowed {
		t.Fatal("a new key was admitted while the existing keys were still in their window")
	}
	clk.Add(31 * time.Second) // s1 and s2 are now 61 s old and count nothing
	if v := before(t, h, call("s3", "t")); !v.Allowed {
		t.Fatalf("a new key was denied after idle keys expired: %s", v.Reason)
	}
	if got := h.Len(); got != 1 {
		t.Fatalf("Len = %d after expiry, want 1", got)
	}
	// The periodic sweep also removes idle keys without the cap being hit.
	clk.Add(10 * time.Minute)
	before(t, h, call("s4", "t"))
	if got := h.Len(); got != 1 {
		t.Fatalf("Len = %d after the periodic sweep, want 1", got)
	}
}

func TestBeforeIsExactUnderConcurrency(t *testing.T) {
	const limit, callers = 100, 1000
	clk := newClock(epoch)
	h := mustNew(t, Config{Rules: []Rule{{Tools: "*", PerSenderPerMinute: limit}}, Now: clk.Now})
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if v, _ := h.Before(context.Background(), call("alice", "shell")); v.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != limit {
		t.Fatalf("%d concurrent calls allowed, want exactly %d", got, limit)
	}
}

func BenchmarkBefore(b *testing.B) {
	h := mustNew(b, Config{Rules: []Rule{
		{Tools: "sk_*", PerSenderPerMinute: 10},
		{Tools: "web_*", PerSenderPerMinute: 1 << 30},
	}})
	c := call("alice", "web_search")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := h.Before(ctx, c); !v.Allowed {
			b.Fatal("denied")
		}
	}
}
