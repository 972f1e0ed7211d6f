package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/toolhooks/toolhooks/internal/authn"
)

// Authentication errors. An Authenticator returns an error wrapping
// ErrUnauthenticated (answered 401) or ErrForbidden (403); any other error is
// answered 401 too.
var (
	// ErrUnauthenticated: the request carries no valid credentials.
	ErrUnauthenticated = authn.ErrUnauthenticated
	// ErrForbidden: the credentials are valid but not those of the configuration pusher.
	ErrForbidden = authn.ErrForbidden
)

// Authenticator decides whether a request may push a configuration
// (PUT /v1/config), returning the pusher's identity for the logs. A
// TokenReview-based implementation plugs in through Options.Authenticator.
type Authenticator interface {
	Authenticate(r *http.Request) (identity string, err error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(r *http.Request) (string, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (string, error) { return f(r) }

// MinStaticTokenLength is the shortest token StaticToken accepts.
const MinStaticTokenLength = authn.MinStaticTokenLength

// StaticToken authenticates requests bearing one shared bearer token, for
// standalone use. The comparison is constant-time.
type StaticToken struct {
	sum [sha256.Size]byte
}

// NewStaticToken returns an Authenticator for token, which must be at least
// MinStaticTokenLength bytes.
func NewStaticToken(token string) (*StaticToken, error) {
	if len(token) < MinStaticTokenLength {
		return nil, fmt.Errorf("static token must be at least %d bytes", MinStaticTokenLength)
	}
	return &StaticToken{sum: sha256.Sum256([]byte(token))}, nil
}

// LoadStaticToken reads the token from a file (surrounding whitespace ignored).
func LoadStaticToken(path string) (*StaticToken, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading static token: %w", err)
	}
	t, err := NewStaticToken(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Authenticate checks the request's "Authorization: Bearer <token>" header.
func (s *StaticToken) Authenticate(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", fmt.Errorf("%w: a bearer token is required", ErrUnauthenticated)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(sum[:], s.sum[:]) != 1 {
		return "", fmt.Errorf("%w: the bearer token is not valid", ErrUnauthenticated)
	}
	return "static-token", nil
}
