package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// AnonymousSender is the sender id of calls without a bearer token, which
// only a gateway whose callers' authenticator allows anonymous callers accepts.
const AnonymousSender = authn.AnonymousUser

// MetadataPath is where the endpoint's OAuth 2.0 Protected Resource
// Metadata (RFC 9728) is served, without authentication; the same document
// is served at MetadataRootPath for clients that look there.
const (
	MetadataPath     = MetadataRootPath + Path
	MetadataRootPath = "/.well-known/oauth-protected-resource"
)

// The schemes of the endpoint's URLs.
const (
	schemeHTTP  = "http"
	schemeHTTPS = "https"
)

// identityKey holds the caller's *hooks.Identity in auth.TokenInfo.Extra.
const identityKey = "toolhooks.dev/identity"

// verifiedKey holds, in a request's context, the identity authMiddleware
// verified, which the SDK's bearer-token middleware then binds the session to.
type verifiedKey struct{}

// resource describes the endpoint as an OAuth protected resource.
type resource struct {
	// url is the endpoint's public URL; nil: each request's own (see origin).
	url *url.URL
	// servers are the authorization servers whose tokens the gateway trusts.
	servers []string
}

// newResource checks the public URL (empty: derived from each request) and
// the authorization servers' issuer URLs.
func newResource(publicURL string, servers []string) (*resource, error) {
	res := &resource{servers: servers}
	for _, s := range servers {
		if _, err := absoluteURL(s); err != nil {
			return nil, fmt.Errorf("mcp: authorization server %q: %w", s, err)
		}
	}
	if publicURL == "" {
		return res, nil
	}
	u, err := absoluteURL(publicURL)
	if err != nil {
		return nil, fmt.Errorf("mcp: resource URL %q: %w", publicURL, err)
	}
	res.url = u
	return res, nil
}

// absoluteURL parses an http(s) URL with a host and without query or fragment.
func absoluteURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, err
	case !strings.EqualFold(u.Scheme, schemeHTTP) && !strings.EqualFold(u.Scheme, schemeHTTPS):
		return nil, errors.New("not an http or https URL")
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, errors.New("want scheme://host[:port][/path] without user, query or fragment")
	}
	return u, nil
}

// origin is the endpoint's origin: the public URL's, or else the request's
// own Host with https when it came over TLS. X-Forwarded-* headers are not
// trusted (any client can send them): behind a proxy that terminates TLS,
// set the public URL.
func (p *resource) origin(r *http.Request) string {
	if p.url != nil {
		return p.url.Scheme + "://" + p.url.Host
	}
	scheme := schemeHTTP
	if r.TLS != nil {
		scheme = schemeHTTPS
	}
	return scheme + "://" + r.Host
}

// metadataURL is the URL of the metadata document (RFC 9728 §3.1: the
// well-known path inserted before the resource's path).
func (p *resource) metadataURL(r *http.Request) string {
	path := Path
	if p.url != nil {
		path = strings.TrimSuffix(p.url.Path, "/")
	}
	return p.origin(r) + MetadataRootPath + path
}

// document is the metadata document answering r.
func (p *resource) document(r *http.Request) *oauthex.ProtectedResourceMetadata {
	res := p.origin(r) + Path
	if p.url != nil {
		res = p.url.String()
	}
	return &oauthex.ProtectedResourceMetadata{
		Resource:               res,
		AuthorizationServers:   p.servers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "toolhooks gateway MCP endpoint",
	}
}

// ServeHTTP serves the metadata document (GET, and CORS for any origin:
// the document is public).
func (p *resource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth.ProtectedResourceMetadataHandler(p.document(r)).ServeHTTP(w, r)
}

// RegistrationPath is where OAuth clients that find no authorization server
// in the metadata try dynamic client registration (RFC 7591) at the
// endpoint's own origin. The gateway registers no clients and issues no
// tokens; it answers there with an error that says how to connect.
const RegistrationPath = "/register"

// refuseRegistration answers a dynamic client registration (RFC 7591 §3.2.2).
func refuseRegistration(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{
		"error": "invalid_client_metadata",
		"error_description": "this toolhooks gateway registers no OAuth clients and issues no tokens: send a token " +
			"obtained out of band (a Kubernetes ServiceAccount token for the gateway's audience, a token of its OIDC " +
			"issuer or a static token) as \"Authorization: Bearer <token>\"; a client sent here after a 401 to a " +
			"request with a token had that token refused as an invalid token (the 401's WWW-Authenticate says why)",
	})
}

// authMiddleware authenticates every request with callers, the gateway's
// authenticator of all APIs; a request without an Authorization header
// passes as anonymous only when callers allows it. A present but invalid
// token is never downgraded to anonymous. A refusal is a 401 with a Bearer
// challenge naming res's metadata and, when credentials were given (an
// invalid token, another scheme), error="invalid_token" (RFC 6750, RFC 9728
// §5.1), or a 403. The MCP SDK binds each session to the user who opened it.
func authMiddleware(callers *authn.Request, res *resource, next http.Handler) http.Handler {
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id, ok := r.Context().Value(verifiedKey{}).(*hooks.Identity)
		if !ok {
			return nil, fmt.Errorf("%w: the request was not authenticated", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: id.Username, Extra: map[string]any{identityKey: id}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := callers.Authenticate(r)
		switch {
		case errors.Is(err, authn.ErrForbidden):
			noteRefusal(r, &hooks.Refusal{Rule: hooks.RuleForbidden, Err: err})
			http.Error(w, err.Error(), http.StatusForbidden)
		case err != nil:
			noteRefusal(r, &hooks.Refusal{Rule: hooks.RuleUnauthenticated, Err: err})
			w.Header().Set("WWW-Authenticate", authn.Challenge(r, err, res.metadataURL(r)))
			msg := err.Error()
			if r.Header.Get("Authorization") != "" {
				msg = "invalid token: " + msg
			}
			http.Error(w, msg, http.StatusUnauthorized)
		case r.Header.Get("Authorization") == "": // anonymous, as callers allows
			noteCaller(r, authn.Anonymous)
			next.ServeHTTP(w, r)
		default:
			noteCaller(r, id)
			authed.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, id)))
		}
	})
}

// callerOf returns the verified identity of an MCP request: the one
// authMiddleware stored, or Anonymous for a request it let through without
// a token.
func callerOf(ti *auth.TokenInfo) *hooks.Identity {
	if ti != nil {
		if id, ok := ti.Extra[identityKey].(*hooks.Identity); ok {
			return id
		}
	}
	return authn.Anonymous
}
