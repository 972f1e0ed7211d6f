// Package ratelimit implements the RateLimit hook: per-sender, per-tool call
// limits over tool globs, for any tool, over a sliding 60-second window (so a
// sender cannot get twice its limit by calling at the end of one fixed
// window and the start of the next).
//
// # Algorithm
//
// Each (sender, tool) pair owns a ring of 61 one-second buckets. A call is
// allowed when the number of calls counted in the buckets that intersect the
// last 60 seconds is below the limit. Because a bucket is only dropped once it
// lies entirely outside the 60 s window, the count over-approximates the true
// sliding-window count, so in ANY 60-second window at most the limit is ever
// allowed (there is no burst at a window boundary). The price of the bounded,
// constant memory per key (about 300 bytes, independent of the limit) is that
// a call stops counting between 60 and 61 seconds after it was made.
//
// Only calls this hook allows are counted; a call that a later hook denies
// still used its slot (the limit throttles attempts that reached it).
//
// # Memory
//
// A key whose newest bucket is older than the window holds no information and
// is removed by a periodic sweep, so expiring idle keys never lets a call
// through that an exact limiter would have denied. MaxKeys caps the table:
// when it is full of active keys, calls from new (sender, tool) pairs are
// denied (fail closed) until keys go idle.
package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// DefaultName is the hook name used when Config.Name is empty.
const DefaultName = "RateLimit"

// RuleRateLimit is the Verdict.Rule of every denial from this hook.
const RuleRateLimit = "rateLimit"

// DefaultMaxKeys is the default cap on tracked (sender, tool) pairs.
const DefaultMaxKeys = 100_000

// MaxPerMinute is the largest accepted Rule.PerSenderPerMinute.
const MaxPerMinute = 1 << 30

const (
	window     = 60         // seconds in the sliding window
	numBuckets = window + 1 // one-second buckets intersecting any 60 s window
	sweepEvery = 30 * time.Second
)

// ErrInvalidRule is wrapped by every rule validation error; it wraps
// hooks.ErrInvalidSpec.
var ErrInvalidRule = fmt.Errorf("invalid rate-limit rule: %w", hooks.ErrInvalidSpec)

// Rule limits the calls each sender may make to each tool whose name matches
// Tools.
type Rule struct {
	// Tools is a doublestar glob over tool names (e.g. "sk_*" or "*").
	Tools string `json:"tools"`
	// PerSenderPerMinute is the number of calls one sender may make to one
	// matching tool in any 60-second window; it must be at least 1.
	PerSenderPerMinute int `json:"perSenderPerMinute"`
}

// Config configures a RateLimit hook.
type Config struct {
	// Name is the hook name reported in denials; DefaultName when empty.
	Name string
	// Rules are the limits. When several rules match a tool the largest limit
	// applies. A tool no rule matches is not limited.
	Rules []Rule
	// MaxKeys caps the tracked (sender, tool) pairs; DefaultMaxKeys when 0.
	MaxKeys int
	// Now is the clock; time.Now when nil. Tests inject a fake.
	Now func() time.Time
	// Windows holds the counters; nil means new ones. Hooks built for the
	// same limits (the same policy and rules) across configuration changes
	// share one Windows, so a push or reload does not reset the windows.
	Windows *Windows
}

// Windows are the per (sender, tool) counters of a RateLimit. It is safe for
// concurrent use.
type Windows struct {
	mu        sync.RWMutex
	keys      map[key]*counter
	lastSweep atomic.Int64 // unix seconds of the last sweep
}

// NewWindows returns empty counters.
func NewWindows() *Windows { return &Windows{keys: make(map[key]*counter)} }

// RateLimit is the rate-limit hook. It is safe for concurrent use.
type RateLimit struct {
	name    string
	rules   []Rule
	maxKeys int
	now     func() time.Time

	*Windows
}

var _ hooks.Hook = (*RateLimit)(nil)

// key identifies one rate-limited stream of calls. A struct key avoids
// building a string per call.
type key struct {
	sender, tool string
}

// counter is the bucket ring of one key.
type counter struct {
	mu     sync.Mutex
	head   int64 // unix second of the newest bucket
	sum    int64 // total of counts
	counts [numBuckets]int32
}

// New validates cfg and returns a RateLimit hook.
func New(cfg Config) (*RateLimit, error) {
	if cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("maxKeys %d: must not be negative", cfg.MaxKeys)
	}
	rules := make([]Rule, len(cfg.Rules))
	for i, r := range cfg.Rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		rules[i] = r
	}
	h := &RateLimit{
		name:    cfg.Name,
		rules:   rules,
		maxKeys: cfg.MaxKeys,
		now:     cfg.Now,
		Windows: cfg.Windows,
	}
	fresh := h.Windows == nil
	if fresh {
		h.Windows = NewWindows()
	}
	if h.name == "" {
		h.name = DefaultName
	}
	if h.maxKeys == 0 {
		h.maxKeys = DefaultMaxKeys
	}
	if h.now == nil {
		h.now = time.Now
	}
	if fresh {
		h.lastSweep.Store(h.now().Unix())
	}
	return h, nil
}

// Validate reports whether r is usable; errors wrap ErrInvalidRule and, for a
// bad glob, doublestar.ErrBadPattern.
func (r Rule) Validate() error {
	if r.Tools == "" {
		return fmt.Errorf("%w: tools glob is empty", ErrInvalidRule)
	}
	if !doublestar.ValidatePattern(r.Tools) {
		return fmt.Errorf("%w: tools glob %q: %w: %w", ErrInvalidRule, r.Tools, hooks.ErrInvalidGlob, doublestar.ErrBadPattern)
	}
	if r.PerSenderPerMinute < 1 || r.PerSenderPerMinute > MaxPerMinute {
		return fmt.Errorf("%w: perSenderPerMinute %d: must be between 1 and %d", ErrInvalidRule, r.PerSenderPerMinute, MaxPerMinute)
	}
	return nil
}

// Name returns the hook name.
func (h *RateLimit) Name() string { return h.name }

// Limit returns the per-minute limit that applies to tool (the largest of all
// matching rules) and whether any rule matches.
func (h *RateLimit) Limit(tool string) (int, bool) {
	limit := 0
	for i := range h.rules {
		// Patterns were validated in New, so Match cannot fail here.
		if ok, _ := doublestar.Match(h.rules[i].Tools, tool); ok && h.rules[i].PerSenderPerMinute > limit {
			limit = h.rules[i].PerSenderPerMinute
		}
	}
	return limit, limit > 0
}

// Before counts the call against its (sender, tool) limit and denies it when
// the limit is reached in the last 60 seconds.
func (h *RateLimit) Before(_ context.Context, call *hooks.Call) (hooks.Verdict, error) {
	limit, ok := h.Limit(call.Tool)
	if !ok {
		return hooks.Allow, nil
	}
	now := h.now().Unix()
	h.maybeSweep(now)

	k := key{sender: call.SenderID, tool: call.Tool}
	h.mu.RLock()
	c := h.keys[k]
	h.mu.RUnlock()
	if c == nil {
		var full bool
		if c, full = h.insert(k, now); full {
			return hooks.Deny(RuleRateLimit, fmt.Sprintf(
				"the rate limiter is tracking its maximum of %d sender/tool pairs; call to %q from sender %q denied until other senders go idle",
				h.maxKeys, call.Tool, call.SenderID)), nil
		}
	}
	if !c.take(now, int64(limit)) {
		return Denial(call.SenderID, call.Tool, limit), nil
	}
	return hooks.Allow, nil
}

// Denial is the denial of a call from sender to tool beyond limit calls per minute.
func Denial(sender, tool string, limit int) hooks.Verdict {
	return hooks.Deny(RuleRateLimit, fmt.Sprintf(
		"sender %q reached the limit of %d calls per minute for tool %q", sender, limit, tool))
}

// After does nothing: the hook counts calls when it allows them.
func (h *RateLimit) After(context.Context, *hooks.Call, *hooks.Result) {}

// insert returns the counter for k, creating it; full is true when the table
// is at its cap even after removing idle keys.
func (h *RateLimit) insert(k key, now int64) (c *counter, full bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c = h.keys[k]; c != nil {
		return c, false
	}
	if len(h.keys) >= h.maxKeys {
		h.sweepLocked(now)
		if len(h.keys) >= h.maxKeys {
			return nil, true
		}
	}
	c = &counter{head: now}
	h.keys[k] = c
	return c, false
}

// maybeSweep removes idle keys at most once per sweepEvery.
func (h *RateLimit) maybeSweep(now int64) {
	last := h.lastSweep.Load()
	if now-last < int64(sweepEvery/time.Second) || !h.lastSweep.CompareAndSwap(last, now) {
		return
	}
	h.mu.Lock()
	h.sweepLocked(now)
	h.mu.Unlock()
}

// sweepLocked removes every key whose buckets have all left the window; such
// a key counts nothing, so removing it changes no decision.
func (h *RateLimit) sweepLocked(now int64) { sweepIdle(h.keys, now) }

// sweepIdle removes the counters whose buckets have all left the window
// ending at now; such a counter counts nothing.
func sweepIdle[K comparable](keys map[K]*counter, now int64) {
	for k, c := range keys {
		c.mu.Lock()
		idle := now-c.head >= numBuckets
		c.mu.Unlock()
		if idle {
			delete(keys, k)
		}
	}
}

// Len returns the number of tracked (sender, tool) pairs.
func (h *RateLimit) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.keys)
}

// take counts one call at unix second now if fewer than limit calls are
// counted in the buckets intersecting the last 60 seconds.
func (c *counter) take(now, limit int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	if c.sum >= limit {
		return false
	}
	c.counts[bucket(c.head)]++
	c.sum++
	return true
}

// advance moves the ring's head to now, clearing buckets that left the
// window. A clock that goes backwards counts into the newest bucket, which
// only makes the limiter stricter.
func (c *counter) advance(now int64) {
	if now <= c.head {
		return
	}
	if now-c.head >= numBuckets {
		c.counts = [numBuckets]int32{}
		c.sum = 0
	} else {
		for s := c.head + 1; s <= now; s++ {
			i := bucket(s)
			c.sum -= int64(c.counts[i])
			c.counts[i] = 0
		}
	}
	c.head = now
}

func bucket(sec int64) int {
	b := sec % numBuckets
	if b < 0 {
		b += numBuckets
	}
	return int(b)
}
