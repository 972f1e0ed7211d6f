package authn

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Cached remembers an Authenticator's successes for at most TTL and never
// beyond the token's own expiry (at most max tokens; a full cache is
// emptied), so that a TokenReview or a signature check is not made for
// every request. Failures are never cached. TTL bounds how long a revoked
// token keeps working.
//
// Entries are keyed by the token itself, held in memory no longer than the
// TTL: a SHA-256 of a ServiceAccount token (about 1 KB) costs more than
// the whole decision after it, and the token passes through the process's
// memory with every request anyway.
type Cached struct {
	inner Authenticator
	ttl   time.Duration
	max   int
	now   func() time.Time

	mu      sync.RWMutex
	entries map[string]cachedIdentity
}

type cachedIdentity struct {
	id      *hooks.Identity
	expires time.Time
}

// NewCached caches inner's successes for ttl, at most maxTokens tokens.
func NewCached(inner Authenticator, ttl time.Duration, maxTokens int) *Cached {
	return &Cached{inner: inner, ttl: ttl, max: maxTokens, now: time.Now, entries: map[string]cachedIdentity{}}
}

// SetClock replaces the clock (tests).
func (c *Cached) SetClock(now func() time.Time) { c.now = now }

// AuthenticateToken answers from the cache or asks inner.
func (c *Cached) AuthenticateToken(ctx context.Context, token string) (*hooks.Identity, time.Time, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if ok && now.Before(e.expires) {
		return e.id, e.expires, nil
	}
	id, exp, err := c.inner.AuthenticateToken(ctx, token)
	if err != nil {
		return id, exp, err
	}
	until := now.Add(c.ttl)
	if !exp.IsZero() && exp.Before(until) {
		until = exp
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[strings.Clone(token)] = cachedIdentity{id: id, expires: until}
	c.mu.Unlock()
	return id, exp, nil
}
