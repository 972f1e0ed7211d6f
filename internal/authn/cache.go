package authn

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Cached remembers an Authenticator's successes for at most TTL and never
// beyond the token's own expiry (by the token's SHA-256, at most max tokens;
// a full cache is emptied), so that a TokenReview or a signature check is
// not made for every request. Failures are never cached. TTL bounds how long
// a revoked token keeps working.
type Cached struct {
	inner Authenticator
	ttl   time.Duration
	max   int
	now   func() time.Time

	mu      sync.RWMutex
	entries map[[sha256.Size]byte]cachedIdentity
}

type cachedIdentity struct {
	id      *hooks.Identity
	expires time.Time
}

// NewCached caches inner's successes for ttl, at most maxTokens tokens.
func NewCached(inner Authenticator, ttl time.Duration, maxTokens int) *Cached {
	return &Cached{inner: inner, ttl: ttl, max: maxTokens, now: time.Now, entries: map[[sha256.Size]byte]cachedIdentity{}}
}

// SetClock replaces the clock (tests).
func (c *Cached) SetClock(now func() time.Time) { c.now = now }

// AuthenticateToken answers from the cache or asks inner.
func (c *Cached) AuthenticateToken(ctx context.Context, token string) (*hooks.Identity, time.Time, error) {
	key := sha256.Sum256([]byte(token))
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries[key]
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
	c.entries[key] = cachedIdentity{id: id, expires: until}
	c.mu.Unlock()
	return id, exp, nil
}
