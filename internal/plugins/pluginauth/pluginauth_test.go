package pluginauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/toolhooks/toolhooks/internal/plugins/pluginauth"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

const (
	namespace = "toolhooks-system"
	audience  = "toolhooks-plugins"
	gatewaySA = "system:serviceaccount:" + namespace + ":toolhooks-gateway"
)

// token requests a token of ServiceAccount name bound to aud ("": the API
// server's own audience) from the API server.
func token(t *testing.T, cs kubernetes.Interface, name, aud string) string {
	t.Helper()
	secs := int64(600)
	var auds []string
	if aud != "" {
		auds = []string{aud}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: auds, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// TestVerifierAcceptsOnlyTheGatewaysTokenForTheAudience runs a plugin behind
// Require against a real API server: only the gateway ServiceAccount's token
// bound to the plugins' audience reaches the handler.
func TestVerifierAcceptsOnlyTheGatewaysTokenForTheAudience(t *testing.T) {
	env := testenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"toolhooks-gateway", "intruder"} {
		if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := pluginauth.New(pluginauth.Options{Client: cs.AuthenticationV1().TokenReviews(), Audience: audience,
		Gateways: []string{gatewaySA}})
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	srv := httptest.NewServer(v.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, `{"id":"1","result":true}`)
	})))
	defer srv.Close()
	post := func(header string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"method":"hook_before","id":"1"}`))
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	good := token(t, cs, "toolhooks-gateway", audience)
	if status := post("Bearer " + good); status != http.StatusOK || served.Load() != 1 {
		t.Fatalf("the gateway's token: %d, handler ran %d times; want 200 and once", status, served.Load())
	}
	for _, c := range []struct {
		name, header string
		want         int
	}{
		{"the gateway's token for another audience", "Bearer " + token(t, cs, "toolhooks-gateway", "toolhooks.dev/gateway"), http.StatusUnauthorized},
		{"the gateway's token for the API server", "Bearer " + token(t, cs, "toolhooks-gateway", ""), http.StatusUnauthorized},
		{"another ServiceAccount's token for the audience", "Bearer " + token(t, cs, "intruder", audience), http.StatusForbidden},
		{"a garbage token", "Bearer not-a-token", http.StatusUnauthorized},
		{"a truncated gateway token", "Bearer " + good[:len(good)-8], http.StatusUnauthorized},
		{"the token as basic auth", "Basic " + good, http.StatusUnauthorized},
		{"no token", "", http.StatusUnauthorized},
	} {
		if status := post(c.header); status != c.want {
			t.Errorf("%s: answered %d, want %d", c.name, status, c.want)
		}
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("the plugin's handler ran %d times, want only for the gateway's token", n)
	}
}

func TestVerifierNeedsItsOptions(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://127.0.0.1:1"})
	reviews := cs.AuthenticationV1().TokenReviews()
	for name, o := range map[string]pluginauth.Options{
		"no client":          {Audience: audience, Gateways: []string{gatewaySA}},
		"no audience":        {Client: reviews, Gateways: []string{gatewaySA}},
		"no gateway":         {Client: reviews, Audience: audience},
		"not an SA username": {Client: reviews, Audience: audience, Gateways: []string{"alice"}},
	} {
		if _, err := pluginauth.New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
