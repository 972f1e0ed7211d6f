package pki_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/toolhooks/toolhooks/internal/pki"
)

func TestServingCertificateVerifiesOnlyForItsNamesAndCA(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("test-ca", now, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other-ca", now, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServing([]string{"gw.ns.svc", "gw"}, now, 20*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("a certificate outlives its CA: %s after %s", leaf.Cert.NotAfter, ca.Cert.NotAfter)
	}
	pool := func(c *pki.KeyPair) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(c.Cert)
		return p
	}
	cases := []struct {
		name  string
		roots *x509.CertPool
		dns   string
		at    time.Time
		ok    bool
	}{
		{"its CA and name", pool(ca), "gw.ns.svc", now, true},
		{"its other name", pool(ca), "gw", now, true},
		{"another name", pool(ca), "evil.ns.svc", now, false},
		{"another CA", pool(other), "gw.ns.svc", now, false},
		{"after expiry", pool(ca), "gw.ns.svc", now.Add(11 * time.Hour), false},
		{"within the backdating", pool(ca), "gw.ns.svc", now.Add(-pki.Backdate / 2), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: c.roots, DNSName: c.dns, CurrentTime: c.at,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if (err == nil) != c.ok {
				t.Errorf("verify: %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestRenewAtIsTwoThirdsThroughTheLifetime(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now, 3*time.Hour-pki.Backdate)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pki.RenewAt(ca.Cert), ca.Cert.NotBefore.Add(2*time.Hour); !got.Equal(want) {
		t.Errorf("RenewAt = %s, want %s", got, want)
	}
}

func TestParseKeyPairRefusesMismatchesAndGarbage(t *testing.T) {
	now := time.Now()
	a, _ := pki.NewCA("a", now, time.Hour)
	b, _ := pki.NewCA("b", now, time.Hour)
	if _, err := pki.ParseKeyPair(a.CertPEM, a.KeyPEM); err != nil {
		t.Fatalf("a pair that belongs together: %v", err)
	}
	for name, c := range map[string][2][]byte{
		"another key":      {a.CertPEM, b.KeyPEM},
		"no certificate":   {nil, a.KeyPEM},
		"no key":           {a.CertPEM, nil},
		"a key as cert":    {a.KeyPEM, a.KeyPEM},
		"trailing garbage": {append(bytes.Clone(a.CertPEM), "junk"...), a.KeyPEM},
	} {
		if _, err := pki.ParseKeyPair(c[0], c[1]); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if certs, err := pki.ParseCerts(append(bytes.Clone(a.CertPEM), b.CertPEM...)); err != nil || len(certs) != 2 {
		t.Errorf("bundle of two: %d certificates, %v", len(certs), err)
	}
}

// writePair writes a key pair the way a Secret volume update does: each
// file swapped in whole.
func writePair(t *testing.T, dir string, kp *pki.KeyPair) {
	t.Helper()
	for name, b := range map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReloaderRefusesABadPairAtStartAndKeepsTheLastGoodOne(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := pki.NewReloader(certFile, keyFile, nil); err == nil {
		t.Fatal("a reloader started without files")
	}
	now := time.Now()
	ca, _ := pki.NewCA("ca", now, time.Hour)
	first, _ := ca.IssueServing([]string{"gw"}, now, time.Hour)
	second, _ := ca.IssueServing([]string{"gw"}, now, time.Hour)
	mismatched := &pki.KeyPair{CertPEM: first.CertPEM, KeyPEM: second.KeyPEM}
	writePair(t, dir, mismatched)
	if _, err := pki.NewReloader(certFile, keyFile, nil); err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Fatalf("a reloader started with a mismatched pair: %v", err)
	}
	writePair(t, dir, first)
	r, err := pki.NewReloader(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	ctx := t.Context()
	go r.Run(ctx, 5*time.Millisecond)

	// A broken update (truncated key) keeps the first pair in service.
	if err := os.WriteFile(keyFile, second.KeyPEM[:20], 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); changed || err == nil {
		t.Fatalf("a truncated key loaded: changed %v, err %v", changed, err)
	}
	if serial() != first.Cert.SerialNumber.String() {
		t.Fatal("the last good pair left service")
	}
	// A good update is picked up by the running reloader.
	writePair(t, dir, second)
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return serial() == second.Cert.SerialNumber.String(), nil
	})
	if err != nil {
		t.Fatalf("the new pair was never served: %v", err)
	}
	cfg := r.ServerConfig()
	if cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("MinVersion %x, want TLS 1.2 at least", cfg.MinVersion)
	}
}
