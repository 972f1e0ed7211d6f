package ratelimit

import (
	"sync"
	"time"
)

// SenderWindows count the calls of each sender over a sliding window of
// any length, kept in the same ring of one-sixtieth-of-the-window buckets
// as the per-minute limits (so the window is exact to one bucket). It is
// safe for concurrent use.
type SenderWindows struct {
	tick    int64 // nanoseconds per bucket
	maxKeys int

	mu        sync.RWMutex
	keys      map[string]*counter
	lastSweep int64 // tick of the last sweep, under mu
}

// NewSenderWindows returns empty counters for a window of span (at least
// 60 ns), tracking at most maxKeys senders.
func NewSenderWindows(span time.Duration, maxKeys int) *SenderWindows {
	// The ring's buckets are seconds of a minute for the per-minute limits;
	// here each is a sixtieth of span.
	return &SenderWindows{tick: max(int64(span)/window, 1), maxKeys: max(maxKeys, 1), keys: make(map[string]*counter)}
}

// Take counts one call of sender at now if fewer than limit are counted in
// the window. full is true (and ok false) when sender is new and the table
// already tracks maxKeys senders that are not idle.
func (w *SenderWindows) Take(sender string, now time.Time, limit int) (ok, full bool) {
	t := now.UnixNano() / w.tick
	w.mu.RLock()
	c := w.keys[sender]
	w.mu.RUnlock()
	if c == nil {
		w.mu.Lock()
		if c = w.keys[sender]; c == nil {
			// A full table is swept at most once a bucket, so that new
			// senders knocking on it cost O(1) in between.
			if t-w.lastSweep >= numBuckets || (len(w.keys) >= w.maxKeys && t > w.lastSweep) {
				w.sweepLocked(t)
			}
			if len(w.keys) >= w.maxKeys {
				w.mu.Unlock()
				return false, true
			}
			c = &counter{head: t}
			w.keys[sender] = c
		}
		w.mu.Unlock()
	}
	return c.take(t, int64(limit)), false
}

// Count returns the calls of sender counted in the window ending at now.
func (w *SenderWindows) Count(sender string, now time.Time) int {
	w.mu.RLock()
	c := w.keys[sender]
	w.mu.RUnlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now.UnixNano() / w.tick)
	return int(c.sum)
}

// sweepLocked forgets the senders whose buckets have all left the window.
func (w *SenderWindows) sweepLocked(t int64) {
	w.lastSweep = t
	sweepIdle(w.keys, t)
}
