package mcpgate

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// AnonymousSender is the sender id of calls without a bearer token, which
// only a gateway whose callers' authenticator allows anonymous callers accepts.
const AnonymousSender = authn.AnonymousUser

// identityKey holds the caller's *hooks.Identity in auth.TokenInfo.Extra.
const identityKey = "toolhooks.dev/identity"

// authMiddleware authenticates every request with callers, the gateway's
// authenticator of all APIs (401 otherwise); a request without an
// Authorization header passes as anonymous only when callers allows it. A
// present but invalid token is never downgraded to anonymous. The MCP SDK
// binds each session to the user who opened it.
func authMiddleware(callers *authn.Request, next http.Handler) http.Handler {
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id, err := callers.Authenticate(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: id.Username, Extra: map[string]any{identityKey: id}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if callers != nil && callers.AllowAnonymous {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolhooks-mcp"`)
		}
		authed.ServeHTTP(w, r)
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
