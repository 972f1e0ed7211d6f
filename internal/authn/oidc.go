package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// DefaultOIDCPrefix is prefixed to OIDC usernames and groups unless
// OIDCOptions say otherwise, so that an OIDC subject cannot take a
// Kubernetes or static user's name.
const DefaultOIDCPrefix = "oidc:"

// OIDCOptions configure an OIDC authenticator.
type OIDCOptions struct {
	// IssuerURL is the issuer (https, or http only for tests); its discovery
	// document and JWKS are fetched from it. Tokens must carry it as "iss".
	IssuerURL string
	// Audience is the client id tokens must carry in "aud".
	Audience string
	// UsernameClaim names the claim that is the username (default "sub").
	UsernameClaim string
	// UsernamePrefix is prefixed to the username; "" means
	// DefaultOIDCPrefix and "-" none. A resulting name starting with
	// "system:" is refused either way.
	UsernamePrefix string
	// GroupsClaim names the claim holding the groups, a string or a list of
	// strings (default "groups"; absent means no groups).
	GroupsClaim string
	// GroupsPrefix is prefixed to each group; "" means DefaultOIDCPrefix and "-" none.
	GroupsPrefix string
	// CAFile, when set, holds the PEM certificates the issuer's TLS
	// certificate is verified against instead of the system's.
	CAFile string
	// HTTPClient, when set, fetches discovery and keys (tests).
	HTTPClient *http.Client
}

// OIDC verifies JWTs of one OpenID Connect issuer: signature against the
// issuer's JWKS (found by discovery, fetched lazily and refreshed on an
// unknown key id), issuer, audience, expiry and algorithm (those the
// issuer advertises, RS256 by default; never "none"). A JWT of another
// issuer is unrecognised (see Union).
type OIDC struct {
	opts   OIDCOptions
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// NewOIDC checks opts; discovery happens on the first token.
func NewOIDC(opts OIDCOptions) (*OIDC, error) {
	if opts.IssuerURL == "" || opts.Audience == "" {
		return nil, errors.New("oidc: an issuer URL and an audience are required")
	}
	if !strings.HasPrefix(opts.IssuerURL, "https://") && !strings.HasPrefix(opts.IssuerURL, "http://") {
		return nil, fmt.Errorf("oidc: issuer %q is not an http(s) URL", opts.IssuerURL)
	}
	if opts.UsernameClaim == "" {
		opts.UsernameClaim = "sub"
	}
	if opts.GroupsClaim == "" {
		opts.GroupsClaim = "groups"
	}
	opts.UsernamePrefix = prefixOf(opts.UsernamePrefix)
	opts.GroupsPrefix = prefixOf(opts.GroupsPrefix)
	o := &OIDC{opts: opts, client: opts.HTTPClient}
	if o.client == nil && opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("oidc: reading CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("oidc: %s holds no PEM certificate", opts.CAFile)
		}
		o.client = &http.Client{Timeout: 10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	if o.client == nil {
		o.client = &http.Client{Timeout: 10 * time.Second}
	}
	return o, nil
}

func prefixOf(p string) string {
	switch p {
	case "":
		return DefaultOIDCPrefix
	case "-":
		return ""
	}
	return p
}

// load returns the verifier, discovering the issuer the first time (and
// again after a failed discovery).
func (o *OIDC) load(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, nil
	}
	// The keys are fetched later, on requests' contexts; the client stays.
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.client), o.opts.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("oidc discovery: %w", err)
	}
	o.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), o.client), &oidc.Config{ClientID: o.opts.Audience})
	return o.verifier, nil
}

// AuthenticateToken implements Authenticator.
func (o *OIDC) AuthenticateToken(ctx context.Context, token string) (*hooks.Identity, time.Time, error) {
	if iss, ok := unverifiedIssuer(token); !ok || iss != o.opts.IssuerURL {
		return nil, time.Time{}, unrecognized("not a JWT of the OIDC issuer")
	}
	v, err := o.load(ctx)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	tok, err := v.Verify(ctx, token)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: oidc claims: %w", ErrUnauthenticated, err)
	}
	name, ok := claims[o.opts.UsernameClaim].(string)
	if !ok || name == "" {
		return nil, time.Time{}, fmt.Errorf("%w: oidc: claim %q is not a non-empty string", ErrUnauthenticated, o.opts.UsernameClaim)
	}
	if o.opts.UsernameClaim == "email" {
		if verified, present := claims["email_verified"].(bool); present && !verified {
			return nil, time.Time{}, fmt.Errorf("%w: oidc: the email is not verified", ErrUnauthenticated)
		}
	}
	id := &hooks.Identity{Username: o.opts.UsernamePrefix + name, UID: tok.Subject,
		Extra: map[string][]string{"oidc.issuer": {tok.Issuer}}, Kind: hooks.IdentityOIDC}
	if strings.HasPrefix(id.Username, "system:") {
		return nil, time.Time{}, fmt.Errorf("%w: oidc: username %q is reserved", ErrUnauthenticated, id.Username)
	}
	switch g := claims[o.opts.GroupsClaim].(type) {
	case nil:
	case string:
		id.Groups = []string{o.opts.GroupsPrefix + g}
	case []any:
		for _, e := range g {
			s, ok := e.(string)
			if !ok {
				return nil, time.Time{}, fmt.Errorf("%w: oidc: claim %q holds a non-string", ErrUnauthenticated, o.opts.GroupsClaim)
			}
			id.Groups = append(id.Groups, o.opts.GroupsPrefix+s)
		}
	default:
		return nil, time.Time{}, fmt.Errorf("%w: oidc: claim %q is neither a string nor a list", ErrUnauthenticated, o.opts.GroupsClaim)
	}
	return id, tok.Expiry, nil
}

// unverifiedIssuer returns the "iss" claim of a compact JWT without
// verifying anything, to route the token to its authenticator.
func unverifiedIssuer(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return "", false
	}
	return c.Iss, true
}
