package authn_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// issuer is a minimal OpenID Connect issuer over real HTTPS: a discovery
// document and a JWKS holding one RSA key it generated.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string
	ca  string // PEM file of the server's certificate
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "key-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys",
			"authorization_endpoint": is.srv.URL + "/auth", "token_endpoint": is.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": is.kid, "alg": "RS256", "use": "sig",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	is.ca = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(is.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return is
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// sign makes a compact RS256 JWT of claims with key and kid.
func sign(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	p, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := b64(h) + "." + b64(p)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

func (is *issuer) claims(mutate func(map[string]any)) map[string]any {
	c := map[string]any{"iss": is.srv.URL, "aud": "toolhooks", "sub": "alice", "groups": []string{"dev", "ops"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func newOIDC(t *testing.T, is *issuer) *authn.OIDC {
	t.Helper()
	o, err := authn.NewOIDC(authn.OIDCOptions{IssuerURL: is.srv.URL, Audience: "toolhooks", CAFile: is.ca})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOIDCAcceptsAValidToken(t *testing.T) {
	is := newIssuer(t)
	o := newOIDC(t, is)
	id, exp, err := o.AuthenticateToken(context.Background(), sign(t, is.key, is.kid, is.claims(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if id.Username != "oidc:alice" || id.UID != "alice" || strings.Join(id.Groups, ",") != "oidc:dev,oidc:ops" || id.Kind != hooks.IdentityOIDC {
		t.Fatalf("identity = %+v", id)
	}
	if time.Until(exp) < 50*time.Minute {
		t.Fatalf("expiry %v is not the token's", exp)
	}
}

func TestOIDCRejectsForgedAndInvalidTokens(t *testing.T) {
	is := newIssuer(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	valid := sign(t, is.key, is.kid, is.claims(nil))
	parts := strings.Split(valid, ".")
	alg := func(a string) string {
		h, _ := json.Marshal(map[string]string{"alg": a, "typ": "JWT", "kid": is.kid})
		return b64(h) + "." + parts[1] + "."
	}
	tampered := is.claims(func(c map[string]any) { c["sub"] = "mallory" })
	tp, _ := json.Marshal(tampered)
	cases := map[string]string{
		"expired":              sign(t, is.key, is.kid, is.claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() })),
		"wrong audience":       sign(t, is.key, is.kid, is.claims(func(c map[string]any) { c["aud"] = "someone-else" })),
		"wrong issuer":         sign(t, is.key, is.kid, is.claims(func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"unknown key":          sign(t, other, "key-2", is.claims(nil)),
		"known kid, other key": sign(t, other, is.kid, is.claims(nil)),
		"alg none":             alg("none"),
		"alg HS256":            alg("HS256") + parts[2],
		"tampered":             parts[0] + "." + b64(tp) + "." + parts[2],
		"no signature":         parts[0] + "." + parts[1] + ".",
		"groups not strings":   sign(t, is.key, is.kid, is.claims(func(c map[string]any) { c["groups"] = []any{1} })),
		"not a JWT":            "just-a-token-that-is-long",
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			o := newOIDC(t, is)
			for _, a := range []authn.Authenticator{o, authn.Union{o}} {
				id, _, err := a.AuthenticateToken(context.Background(), tok)
				if err == nil || !errors.Is(err, authn.ErrUnauthenticated) || id != nil {
					t.Fatalf("accepted (%v, %v)", id, err)
				}
			}
		})
	}
}

func TestOIDCWrongIssuerIsLeftToTheNextAuthenticator(t *testing.T) {
	is := newIssuer(t)
	tok := sign(t, is.key, is.kid, is.claims(func(c map[string]any) { c["iss"] = "https://kubernetes.default.svc" }))
	_, _, err := newOIDC(t, is).AuthenticateToken(context.Background(), tok)
	if !errors.Is(err, authn.ErrUnrecognized) {
		t.Fatalf("err = %v, want unrecognised", err)
	}
}

func TestOIDCUntrustedIssuerCertificateFailsClosed(t *testing.T) {
	is := newIssuer(t)
	o, err := authn.NewOIDC(authn.OIDCOptions{IssuerURL: is.srv.URL, Audience: "toolhooks"}) // system roots only
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.AuthenticateToken(context.Background(), sign(t, is.key, is.kid, is.claims(nil))); !errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatalf("err = %v", err)
	}
}

func TestOIDCSubjectCannotTakeASystemName(t *testing.T) {
	is := newIssuer(t)
	tok := sign(t, is.key, is.kid, is.claims(func(c map[string]any) { c["sub"] = "system:serviceaccount:ns:sa" }))
	id, _, err := newOIDC(t, is).AuthenticateToken(context.Background(), tok)
	if err != nil || id.Username != "oidc:system:serviceaccount:ns:sa" {
		t.Fatalf("prefixed: (%v, %v)", id, err)
	}
	if _, _, ok := id.ServiceAccount(); ok {
		t.Fatal("a prefixed OIDC name was taken for a ServiceAccount")
	}
	bare, err := authn.NewOIDC(authn.OIDCOptions{IssuerURL: is.srv.URL, Audience: "toolhooks", CAFile: is.ca, UsernamePrefix: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := bare.AuthenticateToken(context.Background(), tok); err == nil {
		t.Fatalf("unprefixed system name accepted: %v", id)
	}
}
