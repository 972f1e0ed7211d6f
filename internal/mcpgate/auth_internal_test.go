package mcpgate

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
)

func TestCachedRemembersSuccessesOnly(t *testing.T) {
	asked := map[string]int{}
	valid := map[string]string{"good-token-0123456789": "alice"}
	inner := gateway.AuthenticatorFunc(func(r *http.Request) (string, error) {
		tok, err := bearer(r)
		if err != nil {
			return "", err
		}
		asked[tok]++
		if id, ok := valid[tok]; ok {
			return id, nil
		}
		return "", gateway.ErrUnauthenticated
	})
	now := time.Unix(1000, 0)
	c := NewCached(inner, time.Minute, 2)
	c.now = func() time.Time { return now }
	req := func(tok string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "http://gw/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	for range 3 {
		if id, err := c.Authenticate(req("good-token-0123456789")); err != nil || id != "alice" {
			t.Fatalf("good token: %q, %v", id, err)
		}
		if _, err := c.Authenticate(req("bad-token-0123456789")); !errors.Is(err, gateway.ErrUnauthenticated) {
			t.Fatalf("bad token: %v", err)
		}
	}
	if asked["good-token-0123456789"] != 1 || asked["bad-token-0123456789"] != 3 {
		t.Fatalf("inner asked %v: successes must be cached, failures never", asked)
	}
	// A revoked token stops working once its cache entry expires.
	delete(valid, "good-token-0123456789")
	now = now.Add(time.Minute + time.Second)
	if _, err := c.Authenticate(req("good-token-0123456789")); err == nil {
		t.Fatal("a revoked token was accepted after the cache entry expired")
	}
	// No token at all is refused without asking.
	r, _ := http.NewRequest(http.MethodPost, "http://gw/mcp", nil)
	if _, err := c.Authenticate(r); !errors.Is(err, gateway.ErrUnauthenticated) {
		t.Fatalf("no token: %v", err)
	}
}
