// Package authn authenticates the callers of every gateway API (POST
// /v1/tool-calls, POST /v1/decisions, /mcp and so the Claude Code adapter):
// a bearer token is verified by one of the configured authenticators —
// Kubernetes ServiceAccount tokens through a TokenReview bound to the
// gateway's audience, OIDC JWTs (issuer discovery and JWKS), static
// development tokens from a file — and becomes a hooks.Identity, the hook
// context's sender. A request without a token is the anonymous caller only
// when that is explicitly allowed; a present but invalid token is never
// downgraded to anonymous.
package authn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Errors of authentication. Every error an Authenticator or Request returns
// wraps ErrUnauthenticated (answered 401) or ErrForbidden (403).
var (
	// ErrUnauthenticated: the request carries no valid credentials.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the credentials are valid but not allowed here.
	ErrForbidden = errors.New("forbidden")
	// ErrUnrecognized is wrapped (with ErrUnauthenticated) by the error of an
	// authenticator that does not recognise a token as one of its kind, so
	// that Union offers it to the next one.
	ErrUnrecognized = errors.New("token not recognised")
)

// AnonymousUser is the username of callers without a token (only with
// Request.AllowAnonymous).
const AnonymousUser = "system:anonymous"

// UnauthenticatedGroup is the anonymous caller's group.
const UnauthenticatedGroup = "system:unauthenticated"

// Anonymous is the identity of callers without a token.
var Anonymous = &hooks.Identity{Username: AnonymousUser, Groups: []string{UnauthenticatedGroup}, Kind: hooks.IdentityAnonymous}

// Authenticator verifies bearer tokens. It returns the token's identity and,
// when the token says so, when it expires (zero when unknown); an error wraps
// ErrUnauthenticated, and ErrUnrecognized too when the token is not of the
// authenticator's kind. Implementations are safe for concurrent use.
type Authenticator interface {
	AuthenticateToken(ctx context.Context, token string) (id *hooks.Identity, expires time.Time, err error)
}

// Union offers a token to each authenticator in turn until one recognises
// it; that one's answer is final. A token none recognises is refused.
type Union []Authenticator

// AuthenticateToken implements Authenticator.
func (u Union) AuthenticateToken(ctx context.Context, token string) (*hooks.Identity, time.Time, error) {
	for _, a := range u {
		id, exp, err := a.AuthenticateToken(ctx, token)
		if err == nil || !errors.Is(err, ErrUnrecognized) {
			return id, exp, err
		}
	}
	return nil, time.Time{}, fmt.Errorf("%w: the bearer token is not valid", ErrUnauthenticated)
}

// Request authenticates HTTP requests by their "Authorization: Bearer"
// header. Its zero value refuses every request.
type Request struct {
	// Tokens verifies bearer tokens; nil refuses every token.
	Tokens Authenticator
	// AllowAnonymous lets requests without an Authorization header through as
	// Anonymous. A request with a header is never anonymous.
	AllowAnonymous bool
}

// Authenticate returns the identity of r's caller, or an error wrapping
// ErrUnauthenticated or ErrForbidden.
func (a *Request) Authenticate(r *http.Request) (*hooks.Identity, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: this gateway has no authenticator for callers", ErrUnauthenticated)
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		if a.AllowAnonymous {
			return Anonymous, nil
		}
		return nil, fmt.Errorf("%w: a bearer token is required", ErrUnauthenticated)
	}
	tok, err := Bearer(h)
	if err != nil {
		return nil, err
	}
	if a.Tokens == nil {
		return nil, fmt.Errorf("%w: bearer tokens are not accepted: no authenticator is configured", ErrUnauthenticated)
	}
	id, _, err := a.Tokens.AuthenticateToken(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	if id == nil || id.Username == "" {
		return nil, fmt.Errorf("%w: the token names no user", ErrUnauthenticated)
	}
	return id, nil
}

// Bearer returns the token of an "Authorization: Bearer <token>" header value.
func Bearer(header string) (string, error) {
	scheme, tok, ok := strings.Cut(header, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", fmt.Errorf("%w: a bearer token is required", ErrUnauthenticated)
	}
	return tok, nil
}

// unrecognized returns an error wrapping ErrUnauthenticated and ErrUnrecognized.
func unrecognized(why string) error {
	return fmt.Errorf("%w: %w: %s", ErrUnauthenticated, ErrUnrecognized, why)
}

// Realm is the protection space of the bearer tokens of every gateway API.
const Realm = "toolhooks"

// Challenge is the WWW-Authenticate value of a 401 answering r (RFC 6750
// §3): a Bearer challenge in Realm, naming resourceMetadata (RFC 9728 §5.1)
// when it is not empty and, when r carried credentials at all (an invalid
// token or another scheme), error="invalid_token" with err as the
// description. A request without credentials gets no error code.
func Challenge(r *http.Request, err error, resourceMetadata string) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="` + Realm + `"`)
	if resourceMetadata != "" {
		b.WriteString(`, resource_metadata="` + quotable(resourceMetadata) + `"`)
	}
	if r.Header.Get("Authorization") != "" {
		b.WriteString(`, error="invalid_token"`)
		if err != nil {
			b.WriteString(`, error_description="` + quotable(err.Error()) + `"`)
		}
	}
	return b.String()
}

// quotable returns s with what may not stand in a quoted challenge
// parameter (RFC 6750 §3: printable ASCII but '"' and '\') replaced by '?'.
func quotable(s string) string {
	return strings.Map(func(c rune) rune {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return '?'
		}
		return c
	}, s)
}
