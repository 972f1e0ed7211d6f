// Package gatewayk8s holds the gateway's Kubernetes integrations: a
// TokenReview authenticator for configuration pushes, a DenialSink that
// turns denials into Events on the policy objects, and an Approver backed by
// ToolCallApproval objects.
// Package tokenreview authenticates bearer tokens by asking the Kubernetes
// API server to review them (a TokenReview bound to an audience): the
// gateway's configuration pushes and callers, and the gateways calling a
// plugin (internal/plugins/pluginauth).
package tokenreview

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// TokenReview authenticates configuration pushes by asking the API server to
// review the bearer token: it must be valid, bound to Audience, and belong to
// one of Allowed (usernames such as
// "system:serviceaccount:toolhooks-system:toolhooks-controller").
type TokenReview struct {
	Client   authnclient.TokenReviewInterface
	Audience string
	Allowed  []string
	// AnyUser accepts every authenticated user whose token is bound to
	// Audience, and Allowed is not consulted (MCP callers, whose identity
	// becomes the calls' sender).
	AnyUser bool
	// Timeout bounds one review (default 5s).
	Timeout time.Duration
}

var _ authn.Authenticator = (*TokenReview)(nil)

// Authenticate reviews the request's bearer token (configuration pushes).
func (t *TokenReview) Authenticate(r *http.Request) (string, error) {
	token, err := authn.Bearer(r.Header.Get("Authorization"))
	if err != nil {
		return "", fmt.Errorf("%w: no bearer token", authn.ErrUnauthenticated)
	}
	id, _, err := t.AuthenticateToken(r.Context(), token)
	if id == nil {
		return "", err
	}
	return id.Username, err
}

// AuthenticateToken reviews token and returns its user (callers of every
// API, when AnyUser). A token the API server does not authenticate is
// refused, never passed on to another authenticator.
func (t *TokenReview) AuthenticateToken(ctx context.Context, token string) (*hooks.Identity, time.Time, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	review, err := t.Client.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
		Token: token, Audiences: []string{t.Audience},
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: token review failed: %w", authn.ErrUnauthenticated, err)
	}
	st := review.Status
	if !st.Authenticated {
		reason := st.Error
		if reason == "" {
			reason = "token not authenticated"
		}
		return nil, time.Time{}, fmt.Errorf("%w: %s", authn.ErrUnauthenticated, reason)
	}
	id := &hooks.Identity{Username: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Kind: hooks.IdentityUser}
	if _, _, ok := id.ServiceAccount(); ok {
		id.Kind = hooks.IdentityServiceAccount
	}
	if len(st.User.Extra) > 0 {
		id.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			id.Extra[k] = v
		}
	}
	if !slices.Contains(st.Audiences, t.Audience) {
		return id, time.Time{}, fmt.Errorf("%w: token is not bound to audience %q", authn.ErrUnauthenticated, t.Audience)
	}
	if !t.AnyUser && !slices.Contains(t.Allowed, st.User.Username) {
		return id, time.Time{}, fmt.Errorf("%w: %s may not push configuration", authn.ErrForbidden, st.User.Username)
	}
	return id, time.Time{}, nil
}
