package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"
)

// DefaultAudience is the audience cluster-mode callers' ServiceAccount tokens must be bound to.
const DefaultAudience = "toolhooks.dev/gateway"

// DefaultTokenCacheTTL is how long a caller's token, once verified, is
// accepted without verifying it again: the longest a deleted ServiceAccount
// or a revoked token keeps working beyond the API server's own cache of
// successful authentications.
const DefaultTokenCacheTTL = time.Minute

// maxCachedTokens bounds the verified-token cache (a full cache is emptied).
const maxCachedTokens = 10000

// authFlags configure the one authenticator of every API's callers (POST
// /v1/tool-calls, POST /v1/decisions, /mcp).
type authFlags struct {
	audience       string
	tokenCacheTTL  time.Duration
	tokensFile     string
	allowAnonymous bool
	oidc           authn.OIDCOptions
}

func (a *authFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.audience, "auth-audience", DefaultAudience,
		"cluster mode: the audience callers' ServiceAccount tokens must be bound to (checked by TokenReview)")
	fs.DurationVar(&a.tokenCacheTTL, "auth-token-cache-ttl", DefaultTokenCacheTTL,
		"accept a caller's token this long after it was verified (never beyond its expiry), the longest a revoked "+
			"token keeps working beyond the API server's own token cache (10s in kube-apiserver) (0: verify every request)")
	fs.StringVar(&a.tokensFile, "auth-tokens-file", "",
		"development: callers' static bearer tokens and identities (YAML: tokens: [{identity, token, groups}])")
	fs.BoolVar(&a.allowAnonymous, "allow-anonymous", false,
		"accept calls without a bearer token, as "+authn.AnonymousUser+" (reported by /readyz and the log)")
	fs.StringVar(&a.oidc.IssuerURL, "auth-oidc-issuer-url", "", "accept OIDC JWTs of this issuer (discovery and JWKS)")
	fs.StringVar(&a.oidc.Audience, "auth-oidc-audience", "", "the client id OIDC tokens must carry in aud")
	fs.StringVar(&a.oidc.UsernameClaim, "auth-oidc-username-claim", "sub", "the OIDC claim that is the username")
	fs.StringVar(&a.oidc.UsernamePrefix, "auth-oidc-username-prefix", authn.DefaultOIDCPrefix,
		"prefixed to OIDC usernames (\"-\" for none; names starting with system: are refused)")
	fs.StringVar(&a.oidc.GroupsClaim, "auth-oidc-groups-claim", "groups", "the OIDC claim holding the groups")
	fs.StringVar(&a.oidc.GroupsPrefix, "auth-oidc-groups-prefix", authn.DefaultOIDCPrefix, "prefixed to OIDC groups (\"-\" for none)")
	fs.StringVar(&a.oidc.CAFile, "auth-oidc-ca-file", "", "PEM certificates to verify the OIDC issuer's TLS certificate against")
}

// issuers are the OIDC issuers whose tokens callers may present (none
// without --auth-oidc-issuer-url).
func (a *authFlags) issuers() []string {
	if a.oidc.IssuerURL == "" {
		return nil
	}
	return []string{a.oidc.IssuerURL}
}

// build returns the callers' authenticator: static tokens, OIDC and, in
// cluster mode (reviews set), ServiceAccount tokens by TokenReview, tried in
// that order, with verified tokens cached. With none of them and no
// --allow-anonymous every call is refused.
func (a *authFlags) build(reviews authnclient.TokenReviewInterface, log *slog.Logger) (*authn.Request, error) {
	if a.tokenCacheTTL < 0 {
		return nil, fmt.Errorf("--auth-token-cache-ttl must not be negative, got %s", a.tokenCacheTTL)
	}
	var u authn.Union
	kinds := []string{}
	if a.tokensFile != "" {
		t, err := authn.LoadStaticTokens(a.tokensFile)
		if err != nil {
			return nil, err
		}
		u = append(u, t)
		kinds = append(kinds, "static")
	}
	if a.oidc.IssuerURL != "" || a.oidc.Audience != "" {
		o, err := authn.NewOIDC(a.oidc)
		if err != nil {
			return nil, fmt.Errorf("--auth-oidc-issuer-url/--auth-oidc-audience: %w", err)
		}
		u = append(u, o)
		kinds = append(kinds, "oidc")
	}
	if reviews != nil {
		u = append(u, &tokenreview.TokenReview{Client: reviews, Audience: a.audience, AnyUser: true})
		kinds = append(kinds, "serviceaccount")
	}
	req := &authn.Request{AllowAnonymous: a.allowAnonymous}
	switch {
	case len(u) > 0 && a.tokenCacheTTL > 0:
		req.Tokens = authn.NewCached(u, a.tokenCacheTTL, maxCachedTokens)
	case len(u) > 0:
		req.Tokens = u
	case !a.allowAnonymous:
		return nil, errors.New("callers cannot authenticate: give --auth-tokens-file, --auth-oidc-issuer-url or cluster mode, " +
			"or accept anonymous callers explicitly with --allow-anonymous")
	}
	if a.allowAnonymous {
		log.Warn("Anonymous callers are accepted (--allow-anonymous): calls without a token run as " + authn.AnonymousUser)
	}
	log.Info("Callers authenticated", "by", kinds, "anonymous", a.allowAnonymous, "audience", a.audience, "tokenCacheTTL", a.tokenCacheTTL)
	return req, nil
}
