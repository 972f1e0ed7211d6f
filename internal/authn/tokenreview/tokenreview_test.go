package tokenreview_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// reviewer answers TokenReviews for the tokens it knows: token -> (user, audiences).
func reviewer(t *testing.T, known map[string]authnv1.TokenReviewStatus) *fake.Clientset {
	t.Helper()
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		st, ok := known[tr.Spec.Token]
		if !ok {
			st = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		tr.Status = st
		return true, tr, nil
	})
	return cs
}

func request(token string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://gw/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestTokenReviewAnyUser(t *testing.T) {
	const aud = "toolhooks.dev/mcp"
	cs := reviewer(t, map[string]authnv1.TokenReviewStatus{
		"agent-token": {Authenticated: true, Audiences: []string{aud}, User: authnv1.UserInfo{Username: "system:serviceaccount:team:agent"}},
		"push-token":  {Authenticated: true, Audiences: []string{"toolhooks.dev/gateway-config"}, User: authnv1.UserInfo{Username: "system:serviceaccount:x:controller"}},
		"user-token":  {Authenticated: true, Audiences: []string{aud}, User: authnv1.UserInfo{Username: "jane@example.com"}},
	})
	anyUser := &tokenreview.TokenReview{Client: cs.AuthenticationV1().TokenReviews(), Audience: aud, AnyUser: true}
	if id, err := anyUser.Authenticate(request("agent-token")); err != nil || id != "system:serviceaccount:team:agent" {
		t.Fatalf("AnyUser: %q, %v", id, err)
	}
	for name, tok := range map[string]string{"other audience": "push-token", "unknown": "nope", "none": ""} {
		if _, err := anyUser.Authenticate(request(tok)); !errors.Is(err, authn.ErrUnauthenticated) {
			t.Errorf("%s: %v, want unauthenticated", name, err)
		}
	}
	// The identity says how it was verified: a ServiceAccount, or another user.
	if id, _, err := anyUser.AuthenticateToken(context.Background(), "agent-token"); err != nil || id.Kind != hooks.IdentityServiceAccount {
		t.Fatalf("ServiceAccount token: %+v, %v; want kind serviceaccount", id, err)
	}
	if id, _, err := anyUser.AuthenticateToken(context.Background(), "user-token"); err != nil || id.Kind != hooks.IdentityUser {
		t.Fatalf("user token: %+v, %v; want kind user", id, err)
	}
	// Without AnyUser, only Allowed users pass (the push authenticator's behaviour).
	only := &tokenreview.TokenReview{Client: cs.AuthenticationV1().TokenReviews(), Audience: aud}
	if _, err := only.Authenticate(request("agent-token")); !errors.Is(err, authn.ErrForbidden) {
		t.Fatalf("without AnyUser and an empty Allowed: %v, want forbidden", err)
	}
}
