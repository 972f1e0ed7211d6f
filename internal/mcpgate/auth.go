package mcpgate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"sigs.k8s.io/yaml"

	"github.com/toolhooks/toolhooks/internal/gateway"
)

// AnonymousSender is the sender id of calls without a bearer token, which
// only a handler with AllowAnonymous accepts.
const AnonymousSender = "system:anonymous"

// StaticTokens authenticates MCP callers by a file mapping bearer tokens to
// identities (standalone mode), strict YAML:
//
//	tokens:
//	- identity: alice          # the sender id hooks see
//	  token: "at-least-16-bytes-of-secret"
type StaticTokens struct {
	byHash map[[sha256.Size]byte]string
}

type staticTokensFile struct {
	Tokens []struct {
		Identity string `json:"identity"`
		Token    string `json:"token"`
	} `json:"tokens"`
}

// LoadStaticTokens reads a tokens file.
func LoadStaticTokens(path string) (*StaticTokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading MCP tokens: %w", err)
	}
	t, err := ParseStaticTokens(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseStaticTokens decodes and validates a tokens file's content: at least
// one token, each at least gateway.MinStaticTokenLength bytes and unique, each
// identity non-empty and not AnonymousSender.
func ParseStaticTokens(b []byte) (*StaticTokens, error) {
	var f staticTokensFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("invalid MCP tokens YAML: %w", err)
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("no tokens are listed")
	}
	t := &StaticTokens{byHash: make(map[[sha256.Size]byte]string, len(f.Tokens))}
	for i, e := range f.Tokens {
		id := strings.TrimSpace(e.Identity)
		switch {
		case id == "":
			return nil, fmt.Errorf("tokens[%d]: identity is required", i)
		case id == AnonymousSender:
			return nil, fmt.Errorf("tokens[%d]: identity %q is reserved for anonymous callers", i, id)
		case len(e.Token) < gateway.MinStaticTokenLength:
			return nil, fmt.Errorf("tokens[%d] (%s): the token must be at least %d bytes", i, id, gateway.MinStaticTokenLength)
		}
		sum := sha256.Sum256([]byte(e.Token))
		if _, dup := t.byHash[sum]; dup {
			return nil, fmt.Errorf("tokens[%d] (%s): the token is listed twice", i, id)
		}
		t.byHash[sum] = id
	}
	return t, nil
}

// Authenticate returns the identity of the request's bearer token.
func (t *StaticTokens) Authenticate(r *http.Request) (string, error) {
	tok, err := bearer(r)
	if err != nil {
		return "", err
	}
	id, ok := t.byHash[sha256.Sum256([]byte(tok))]
	if !ok {
		return "", fmt.Errorf("%w: the bearer token is not valid", gateway.ErrUnauthenticated)
	}
	return id, nil
}

func bearer(r *http.Request) (string, error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", fmt.Errorf("%w: a bearer token is required", gateway.ErrUnauthenticated)
	}
	return tok, nil
}

// Cached remembers an Authenticator's successes for TTL (by the token's
// hash, at most max tokens), so that a TokenReview is not made for every MCP
// request. Failures are never cached.
type Cached struct {
	inner gateway.Authenticator
	ttl   time.Duration
	max   int
	now   func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedIdentity
}

type cachedIdentity struct {
	identity string
	expires  time.Time
}

// NewCached caches inner's successes for ttl, at most max tokens (a full cache is emptied).
func NewCached(inner gateway.Authenticator, ttl time.Duration, maxTokens int) *Cached {
	return &Cached{inner: inner, ttl: ttl, max: maxTokens, now: time.Now, entries: map[[sha256.Size]byte]cachedIdentity{}}
}

// Authenticate answers from the cache or asks inner.
func (c *Cached) Authenticate(r *http.Request) (string, error) {
	tok, err := bearer(r)
	if err != nil {
		return "", err
	}
	key := sha256.Sum256([]byte(tok))
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.identity, nil
	}
	id, err := c.inner.Authenticate(r)
	if err != nil {
		return id, err
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[key] = cachedIdentity{identity: id, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return id, nil
}

// authMiddleware requires a bearer token that authn accepts (401 otherwise);
// a request without an Authorization header passes as anonymous only when
// allowAnonymous. A present but invalid token is never downgraded to anonymous.
func authMiddleware(authn gateway.Authenticator, allowAnonymous bool, next http.Handler) http.Handler {
	var authed http.Handler
	if authn != nil {
		verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
			id, err := authn.Authenticate(r)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
			}
			return &auth.TokenInfo{UserID: id}, nil
		}
		authed = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && allowAnonymous {
			next.ServeHTTP(w, r)
			return
		}
		if authed == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolhooks-mcp"`)
			http.Error(w, "bearer tokens are not accepted: this gateway's MCP endpoint has no authenticator", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolhooks-mcp"`)
		}
		authed.ServeHTTP(w, r)
	})
}
