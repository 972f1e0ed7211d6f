package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/pki"
)

func TestTLSFlags(t *testing.T) {
	ws := t.TempDir()
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"a certificate without its key": {[]string{"--tls-cert-file", "c.pem"}, "--tls-cert-file and --tls-key-file go together"},
		"a key without its certificate": {[]string{"--tls-key-file", "k.pem"}, "--tls-cert-file and --tls-key-file go together"},
		"no listener at all":            {[]string{"--listen", ""}, "--listen is required without --tls-cert-file"},
		"no TLS listener":               {[]string{"--tls-cert-file", "c", "--tls-key-file", "k", "--tls-listen", ""}, "--tls-listen must not be empty"},
		"no reloading":                  {[]string{"--tls-cert-file", "c", "--tls-key-file", "k", "--tls-reload-interval", "0s"}, "must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags(append([]string{"--workspace", ws}, c.args...), io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// writeKeyPair writes kp to dir/tls.crt and dir/tls.key, each swapped in
// whole as a Secret volume update does.
func writeKeyPair(t *testing.T, dir string, certPEM, keyPEM []byte) {
	t.Helper()
	for name, b := range map[string][]byte{"tls.key": keyPEM, "tls.crt": certPEM} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTheGatewayRefusesToStartWithoutAValidKeyPair(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ca.IssueServing([]string{"gw"}, now, time.Hour)
	b, _ := ca.IssueServing([]string{"gw"}, now, time.Hour)
	for name, c := range map[string]struct {
		cert, key []byte
		want      string
	}{
		"missing files":        {nil, nil, "no such file"},
		"a key of another":     {a.CertPEM, b.KeyPEM, "private key does not match"},
		"a truncated key":      {a.CertPEM, a.KeyPEM[:40], "TLS key pair"},
		"a key as the cert":    {a.KeyPEM, a.KeyPEM, "TLS key pair"},
		"an empty certificate": {[]byte{}, a.KeyPEM, "TLS key pair"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if c.cert != nil {
				writeKeyPair(t, dir, c.cert, c.key)
			}
			ctx := t.Context()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"--workspace", t.TempDir(), "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0",
					"--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-key-file", filepath.Join(dir, "tls.key"),
					"--sandbox", "off", "--allow-anonymous"}, io.Discard, io.Discard)
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("run = %v, want an error naming %q", err, c.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the gateway started serving without a valid key pair")
			}
		})
	}
}

// TestTheGatewayBinaryServesItsAPIOverTLS runs cmd/gateway with a key pair:
// HTTPS serves the API with that certificate and picks up a new one without
// a restart, and the plain listener refuses the configuration API.
func TestTheGatewayBinaryServesItsAPIOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws, policies, tlsDir := filepath.Join(tmp, "ws"), filepath.Join(tmp, "policies"), filepath.Join(tmp, "tls")
	for _, d := range []string{ws, policies, tlsDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(policies, "p.yaml"), []byte(`apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: p, namespace: default}
spec:
  workspace: {root: `+ws+`}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(tmp, "token")
	if err := os.WriteFile(token, []byte("push-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewCA("ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := ca.IssueServing([]string{"gw.ns.svc"}, now, time.Hour)
	writeKeyPair(t, tlsDir, first.CertPEM, first.KeyPEM)
	g := startGateway(t, bin, "--workspace", ws, "--policies", policies, "--policy-debounce", "10ms", "--sandbox", "off",
		"--static-token-file", token, "--allow-anonymous",
		"--tls-listen", "127.0.0.1:0", "--tls-cert-file", filepath.Join(tlsDir, "tls.crt"),
		"--tls-key-file", filepath.Join(tlsDir, "tls.key"), "--tls-reload-interval", "10ms")
	if g.tlsAddr == "" {
		t.Fatal("the gateway logged no TLS address")
	}
	client := func(roots *pki.KeyPair) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(roots.Cert)
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: "gw.ns.svc"}}}
	}
	serial := func() string {
		resp, err := client(ca).Get("https://" + g.tlsAddr + "/v1/config")
		if err != nil {
			t.Fatalf("GET /v1/config over TLS: %v", err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/config over TLS: %s", resp.Status)
		}
		if resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("TLS version %x", resp.TLS.Version)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serving certificate %s, want %s", got, first.Cert.SerialNumber)
	}
	// The plain listener refuses a push (its token never travels in clear)
	// and the configuration status; the rest of its API works.
	req, _ := http.NewRequest(http.MethodPut, g.base+"/v1/config", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer push-token-0123456789abcdef")
	for _, r := range []*http.Request{req, mustRequest(t, http.MethodGet, g.base+"/v1//config")} {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s on the plain listener: %s, want 403", r.Method, r.URL.Path, resp.Status)
		}
	}
	if resp, err := http.Get(g.base + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz on the plain listener: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	// A client trusting another CA is refused.
	other, _ := pki.NewCA("other", now, time.Hour)
	if resp, err := client(other).Get("https://" + g.tlsAddr + "/v1/config"); err == nil {
		_ = resp.Body.Close()
		t.Error("a client trusting another CA was served")
	}
	// A renewed key pair is served without a restart.
	second, _ := ca.IssueServing([]string{"gw.ns.svc"}, now, time.Hour)
	writeKeyPair(t, tlsDir, second.CertPEM, second.KeyPEM)
	deadline := time.Now().Add(10 * time.Second)
	for serial() != second.Cert.SerialNumber.String() {
		if time.Now().After(deadline) {
			t.Fatal("the renewed key pair was never served")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g.cmd.ProcessState != nil {
		t.Error("the gateway restarted")
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
