package authn_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

const tokensYAML = `tokens:
- identity: alice
  token: alice-token-0123456789
  groups: [dev]
- identity: bob
  token: bob-token-0123456789ab
`

func staticTokens(t *testing.T) *authn.StaticTokens {
	t.Helper()
	s, err := authn.ParseStaticTokens([]byte(tokensYAML))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func request(header string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/decisions", nil)
	if header != "" {
		r.Header.Set("Authorization", header)
	}
	return r
}

func TestRequestAuthentication(t *testing.T) {
	st := staticTokens(t)
	for _, c := range []struct {
		name   string
		req    *authn.Request
		header string
		want   string // username, or "" for a refusal
	}{
		{"static token", &authn.Request{Tokens: st}, "Bearer alice-token-0123456789", "alice"},
		{"scheme case-insensitive", &authn.Request{Tokens: st}, "bearer bob-token-0123456789ab", "bob"},
		{"missing token", &authn.Request{Tokens: st}, "", ""},
		{"unknown token", &authn.Request{Tokens: st}, "Bearer nobody-0123456789abcdef", ""},
		{"basic auth", &authn.Request{Tokens: st}, "Basic YWxpY2U6cHc=", ""},
		{"empty bearer", &authn.Request{Tokens: st}, "Bearer ", ""},
		{"anonymous allowed", &authn.Request{Tokens: st, AllowAnonymous: true}, "", authn.AnonymousUser},
		{"invalid token is not downgraded to anonymous", &authn.Request{Tokens: st, AllowAnonymous: true}, "Bearer wrong-0123456789abcdef", ""},
		{"no authenticator", &authn.Request{}, "Bearer alice-token-0123456789", ""},
		{"anonymous only, token present", &authn.Request{AllowAnonymous: true}, "Bearer alice-token-0123456789", ""},
		{"nil request", nil, "Bearer alice-token-0123456789", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := c.req.Authenticate(request(c.header))
			if c.want == "" {
				if err == nil || !errors.Is(err, authn.ErrUnauthenticated) || id != nil {
					t.Fatalf("got (%v, %v), want a refusal", id, err)
				}
				return
			}
			if err != nil || id.Username != c.want {
				t.Fatalf("got (%v, %v), want %s", id, err, c.want)
			}
			wantKind := hooks.IdentityStatic
			if c.want == authn.AnonymousUser {
				wantKind = hooks.IdentityAnonymous
			}
			if id.Kind != wantKind {
				t.Fatalf("kind %q, want %q", id.Kind, wantKind)
			}
		})
	}
}

func TestParseStaticTokensRejects(t *testing.T) {
	for name, y := range map[string]string{
		"empty":         "tokens: []",
		"short":         "tokens: [{identity: a, token: short}]",
		"no identity":   "tokens: [{token: 0123456789abcdefg}]",
		"anonymous":     "tokens: [{identity: system:anonymous, token: 0123456789abcdefg}]",
		"duplicate":     "tokens: [{identity: a, token: 0123456789abcdefg}, {identity: b, token: 0123456789abcdefg}]",
		"unknown field": "tokens: [{identity: a, token: 0123456789abcdefg, admin: true}]",
	} {
		if _, err := authn.ParseStaticTokens([]byte(y)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// countingAuth accepts every token as "u" and counts the calls.
type countingAuth struct {
	calls   atomic.Int32
	expires time.Time
	fail    bool
}

func (c *countingAuth) AuthenticateToken(context.Context, string) (*hooks.Identity, time.Time, error) {
	c.calls.Add(1)
	if c.fail {
		return nil, time.Time{}, authn.ErrUnauthenticated
	}
	return &hooks.Identity{Username: "u"}, c.expires, nil
}

func TestCachedBoundsByTTLAndTokenExpiry(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	inner := &countingAuth{}
	c := authn.NewCached(inner, time.Minute, 10)
	c.SetClock(func() time.Time { return now })
	ctx := context.Background()
	for range 3 {
		if _, _, err := c.AuthenticateToken(ctx, "t1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := inner.calls.Load(); n != 1 {
		t.Fatalf("%d inner calls within the TTL, want 1", n)
	}
	now = now.Add(61 * time.Second)
	_, _, _ = c.AuthenticateToken(ctx, "t1")
	if n := inner.calls.Load(); n != 2 {
		t.Fatalf("%d inner calls after the TTL, want 2", n)
	}
	// A token expiring before the TTL is not cached beyond its expiry.
	inner.expires = now.Add(10 * time.Second)
	_, _, _ = c.AuthenticateToken(ctx, "t2")
	now = now.Add(11 * time.Second)
	_, _, _ = c.AuthenticateToken(ctx, "t2")
	if n := inner.calls.Load(); n != 4 {
		t.Fatalf("%d inner calls, want 4 (expired token asked again)", n)
	}
	// Failures are not cached.
	inner.fail = true
	for range 2 {
		if _, _, err := c.AuthenticateToken(ctx, "t3"); err == nil {
			t.Fatal("failure accepted")
		}
	}
	if n := inner.calls.Load(); n != 6 {
		t.Fatalf("%d inner calls, want 6 (failures asked every time)", n)
	}
}

func TestUnionRoutesByRecognition(t *testing.T) {
	st := staticTokens(t)
	last := &countingAuth{}
	u := authn.Union{st, last}
	id, _, err := u.AuthenticateToken(context.Background(), "alice-token-0123456789")
	if err != nil || id.Username != "alice" || last.calls.Load() != 0 {
		t.Fatalf("static token: (%v, %v), later authenticator asked %d times", id, err, last.calls.Load())
	}
	if id, _, err := u.AuthenticateToken(context.Background(), "other"); err != nil || id.Username != "u" {
		t.Fatalf("fallback: (%v, %v)", id, err)
	}
	if _, _, err := (authn.Union{st}).AuthenticateToken(context.Background(), "other"); !errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatalf("unrecognised by all: %v", err)
	}
}
