package authn

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// MinStaticTokenLength is the shortest static token accepted.
const MinStaticTokenLength = 16

// StaticTokens authenticates callers by a file mapping bearer tokens to
// identities, for development and standalone use; strict YAML:
//
//	tokens:
//	- identity: alice          # the username, the sender id hooks see
//	  token: "at-least-16-bytes-of-secret"
//	  groups: [developers]     # optional
//	  uid: "1234"              # optional
//
// A token it does not hold is unrecognised (see Union). Lookups are by the
// token's SHA-256, so the comparison does not leak the token's bytes.
type StaticTokens struct {
	byHash map[[sha256.Size]byte]*hooks.Identity
}

type staticTokensFile struct {
	Tokens []struct {
		Identity string   `json:"identity"`
		Token    string   `json:"token"`
		UID      string   `json:"uid,omitempty"`
		Groups   []string `json:"groups,omitempty"`
	} `json:"tokens"`
}

// LoadStaticTokens reads a tokens file.
func LoadStaticTokens(path string) (*StaticTokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens: %w", err)
	}
	t, err := ParseStaticTokens(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseStaticTokens decodes and validates a tokens file's content: at least
// one token, each at least MinStaticTokenLength bytes and unique, each
// identity non-empty and not AnonymousUser.
func ParseStaticTokens(b []byte) (*StaticTokens, error) {
	var f staticTokensFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("invalid tokens YAML: %w", err)
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("no tokens are listed")
	}
	t := &StaticTokens{byHash: make(map[[sha256.Size]byte]*hooks.Identity, len(f.Tokens))}
	for i, e := range f.Tokens {
		id := strings.TrimSpace(e.Identity)
		switch {
		case id == "":
			return nil, fmt.Errorf("tokens[%d]: identity is required", i)
		case id == AnonymousUser:
			return nil, fmt.Errorf("tokens[%d]: identity %q is reserved for anonymous callers", i, id)
		case len(e.Token) < MinStaticTokenLength:
			return nil, fmt.Errorf("tokens[%d] (%s): the token must be at least %d bytes", i, id, MinStaticTokenLength)
		}
		sum := sha256.Sum256([]byte(e.Token))
		if _, dup := t.byHash[sum]; dup {
			return nil, fmt.Errorf("tokens[%d] (%s): the token is listed twice", i, id)
		}
		t.byHash[sum] = &hooks.Identity{Username: id, UID: e.UID, Groups: e.Groups, Kind: hooks.IdentityStatic}
	}
	return t, nil
}

// AuthenticateToken implements Authenticator.
func (t *StaticTokens) AuthenticateToken(_ context.Context, token string) (*hooks.Identity, time.Time, error) {
	id, ok := t.byHash[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, time.Time{}, unrecognized("not a static token")
	}
	return id, time.Time{}, nil
}
