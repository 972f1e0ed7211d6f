// Package pluginauth lets an HTTP plugin (an approval service, say) verify
// that a toolhooks gateway is calling it. A gateway started with
// --plugin-token-file sends its projected ServiceAccount token, bound to the
// plugins' audience, as "Authorization: Bearer"; a Verifier asks the API
// server to review it (a TokenReview with spec.audiences set to that
// audience), requires status.authenticated and the audience in
// status.audiences, and accepts only the configured gateway
// ServiceAccounts. Anything else is answered 401 (no or an invalid token)
// or 403 (a valid token of someone else) before the plugin's handler runs.
//
//	v, err := pluginauth.New(pluginauth.Options{
//		Client:   clientset.AuthenticationV1().TokenReviews(),
//		Audience: "toolhooks-plugins",
//		Gateways: []string{"system:serviceaccount:toolhooks-system:toolhooks-gateway"},
//	})
//	http.Handle("/hooks/tool-before", v.Require(approvals))
//
// The plugin's ServiceAccount needs create on tokenreviews
// (authentication.k8s.io), as the system:auth-delegator ClusterRole grants.
package pluginauth

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// DefaultCacheTTL is how long a verified token is accepted without another review.
const DefaultCacheTTL = time.Minute

// maxCachedTokens bounds the tokens a Verifier remembers.
const maxCachedTokens = 1024

// Options configure a Verifier. Client, Audience and Gateways are required.
type Options struct {
	// Client creates the TokenReviews.
	Client authnclient.TokenReviewInterface
	// Audience is the audience the gateways' tokens are bound to (the
	// chart's gateway.pluginAuth.audience).
	Audience string
	// Gateways are the usernames of the ServiceAccounts allowed to call,
	// "system:serviceaccount:NAMESPACE:NAME".
	Gateways []string
	// CacheTTL is how long a verified token is accepted without asking the
	// API server again, never beyond the token's expiry as the API server
	// knows it (default DefaultCacheTTL; negative: every request is reviewed).
	// It bounds how long a revoked token keeps working.
	CacheTTL time.Duration
	// Timeout bounds one review (default 5s).
	Timeout time.Duration
}

// Verifier verifies the bearer tokens of plugin requests. It is safe for
// concurrent use.
type Verifier struct {
	tokens authn.Authenticator
}

// New checks opts and returns a Verifier. A Verifier cannot be built
// without a client, an audience or a gateway to accept.
func New(opts Options) (*Verifier, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("pluginauth: a TokenReview client is required")
	case opts.Audience == "":
		return nil, errors.New("pluginauth: an audience is required")
	case len(opts.Gateways) == 0:
		return nil, errors.New("pluginauth: at least one gateway ServiceAccount is required")
	}
	for _, g := range opts.Gateways {
		if _, _, ok := (&hooks.Identity{Username: g}).ServiceAccount(); !ok {
			return nil, fmt.Errorf("pluginauth: gateway %q is not system:serviceaccount:NAMESPACE:NAME", g)
		}
	}
	var tokens authn.Authenticator = &tokenreview.TokenReview{Client: opts.Client, Audience: opts.Audience,
		Allowed: append([]string(nil), opts.Gateways...), Timeout: opts.Timeout}
	ttl := opts.CacheTTL
	if ttl == 0 {
		ttl = DefaultCacheTTL
	}
	if ttl > 0 {
		tokens = authn.NewCached(tokens, ttl, maxCachedTokens)
	}
	return &Verifier{tokens: tokens}, nil
}

// Verify returns the gateway identity of r's bearer token, or an error
// wrapping authn.ErrUnauthenticated (no token, or one the API server does
// not authenticate for the audience) or authn.ErrForbidden (a valid token
// of another user).
func (v *Verifier) Verify(r *http.Request) (*hooks.Identity, error) {
	tok, err := authn.Bearer(r.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	id, _, err := v.tokens.AuthenticateToken(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	return id, nil
}

// Require serves next only for requests Verify accepts; others are answered
// 401 (with WWW-Authenticate: Bearer) or 403, and their body is not read.
func (v *Verifier) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := v.Verify(r); err != nil {
			if errors.Is(err, authn.ErrForbidden) {
				http.Error(w, "forbidden: only the toolhooks gateways may call this plugin", http.StatusForbidden)
				return
			}
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthenticated: a toolhooks gateway's bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
