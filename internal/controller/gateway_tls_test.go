package controller

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/pki"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

type staticTokens string

func (s staticTokens) Token(context.Context) (string, error) { return string(s), nil }

const tlsTestToken = "push-token-0123456789abcdef"

// tlsGateway is an internal/gateway server on a real TLS listener whose key
// pair is read from files (as from a mounted Secret) by a pki.Reloader.
type tlsGateway struct {
	t                 *testing.T
	certFile, keyFile string
	pod               *corev1.Pod
	port              int
}

func startTLSGateway(t *testing.T, certPEM, keyPEM []byte) *tlsGateway {
	t.Helper()
	dir := t.TempDir()
	g := &tlsGateway{t: t, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	g.mount(certPEM, keyPEM)
	tok, err := gateway.NewStaticToken(tlsTestToken)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Options{Workspace: t.TempDir(), Audit: &audit.Memory{}, Authenticator: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	reloader, err := pki.NewReloader(g.certFile, g.keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go reloader.Run(ctx, 10*time.Millisecond)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", reloader.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	g.port = ln.Addr().(*net.TCPAddr).Port
	g.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Status: corev1.PodStatus{PodIP: "127.0.0.1"}}
	return g
}

// mount replaces the key pair files the way the kubelet updates a Secret
// volume: each file is swapped in whole.
func (g *tlsGateway) mount(certPEM, keyPEM []byte) {
	g.t.Helper()
	for path, b := range map[string][]byte{g.keyFile: keyPEM, g.certFile: certPEM} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			g.t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			g.t.Fatal(err)
		}
	}
}

// presentedSerial is the serial of the certificate the gateway presents now
// (verified against roots at the time now).
func (g *tlsGateway) presentedSerial(roots []byte, serverName string, now time.Time) (*big.Int, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(g.port)),
		&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: serverName, Time: func() time.Time { return now }})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// pushConfig is a valid configuration whose revision names n.
func pushConfig(t *testing.T, n int) *gatewayconfig.Config {
	t.Helper()
	cfg, _ := compile.Compile(compile.Gateway{Namespace: "ns", Labels: map[string]string{"app": "gw"}},
		compile.PoliciesOf(compile.ObjectsOf[policyv1alpha1.AutonomyPolicy](compiledPolicy("p", "u-p", int64(n), fmt.Sprintf("**/.secret-%d", n)))))
	if cfg == nil {
		t.Fatal("the test policy did not compile")
	}
	return cfg
}

// unrelatedCA is the PEM of a CA that signed nothing the gateways serve.
func unrelatedCA(t *testing.T, now time.Time) []byte {
	t.Helper()
	ca, err := pki.NewCA("someone-else", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

func TestGatewayCAIssuesRotatesAndPushesVerify(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	ns := "toolhooks-tls"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const serverName = "toolhooks-gateway." + "toolhooks-tls" + ".svc"
	dnsNames := []string{serverName, "toolhooks-gateway", "toolhooks-gateway.toolhooks-tls"}
	t0 := time.Now()
	clock := &testClock{now: t0}
	servingKey := types.NamespacedName{Namespace: ns, Name: "gateway-tls"}
	caKey := types.NamespacedName{Namespace: ns, Name: "gateway-ca"}
	var trust func(context.Context) ([]byte, error)
	env.StartManager(t, WithSecretsIn(CacheOptions(), ns), func(mgr ctrl.Manager) error {
		trust = SecretTrustBundle(mgr.GetClient(), servingKey)
		return mgr.Add(&GatewayCA{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
			Namespace: ns, CASecret: caKey.Name, ServingSecret: servingKey.Name, DNSNames: dnsNames,
			CALifetime: 12 * time.Hour, CertLifetime: 6 * time.Hour, Now: clock.Now, MaxInterval: 20 * time.Millisecond, RetryInterval: 20 * time.Millisecond,
		})
	})

	// secrets waits until the Secrets satisfy ok, and the Pusher's trust
	// bundle (read from the manager's cache) is the serving Secret's, and
	// returns both.
	secrets := func(what string, ok func(ca, serving *corev1.Secret) bool) (*corev1.Secret, *corev1.Secret) {
		t.Helper()
		var ca, serving corev1.Secret
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if env.Client.Get(ctx, caKey, &ca) != nil || env.Client.Get(ctx, servingKey, &serving) != nil {
				return false, nil
			}
			if !ok(&ca, &serving) {
				return false, nil
			}
			cached, err := trust(ctx)
			return err == nil && bytes.Equal(cached, serving.Data[SecretCAKey]), nil
		})
		if err != nil {
			t.Fatalf("Waiting for %s: %v", what, err)
		}
		return &ca, &serving
	}
	leafOf := func(s *corev1.Secret) *pki.KeyPair {
		t.Helper()
		kp, err := pki.ParseKeyPair(s.Data[SecretCertKey], s.Data[SecretKeyKey])
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	bundleOf := func(s *corev1.Secret) []*x509.Certificate {
		t.Helper()
		certs, err := pki.ParseCerts(s.Data[SecretCAKey])
		if err != nil {
			t.Fatal(err)
		}
		return certs
	}

	// Creation: a P-256 CA, a serving certificate for the fixed server name
	// signed by it, the same bundle in both Secrets, the CA key only in the
	// CA Secret.
	caSecret, serving := secrets("the Secrets", func(_, s *corev1.Secret) bool { return len(s.Data[SecretCertKey]) > 0 })
	ca := leafOf(caSecret)
	leaf1 := leafOf(serving)
	if !ca.Cert.IsCA || ca.Key.Curve != elliptic.P256() {
		t.Errorf("CA: IsCA %v, curve %v; want a P-256 CA", ca.Cert.IsCA, ca.Key.Curve.Params().Name)
	}
	if serving.Type != corev1.SecretTypeTLS || string(serving.Data[SecretCAKey]) != string(caSecret.Data[SecretCAKey]) {
		t.Errorf("serving Secret: type %s, ca.crt equal to the CA Secret's: %v", serving.Type,
			string(serving.Data[SecretCAKey]) == string(caSecret.Data[SecretCAKey]))
	}
	if string(serving.Data[SecretKeyKey]) == string(caSecret.Data[SecretKeyKey]) {
		t.Error("the serving Secret holds the CA key")
	}
	if got := bundleOf(serving); len(got) != 1 || !got[0].Equal(ca.Cert) {
		t.Errorf("bundle holds %d certificates, want the CA alone", len(got))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := leaf1.Cert.Verify(x509.VerifyOptions{DNSName: serverName, Roots: pool, CurrentTime: t0,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for %s against the CA: %v", serverName, err)
	}
	if _, ok := leaf1.Key.Public().(*ecdsa.PublicKey); !ok || leaf1.Cert.NotAfter.Sub(leaf1.Cert.NotBefore) != 6*time.Hour+pki.Backdate {
		t.Errorf("serving certificate valid %s, want 6h (+ %s backdating)", leaf1.Cert.NotAfter.Sub(leaf1.Cert.NotBefore), pki.Backdate)
	}

	gw := startTLSGateway(t, serving.Data[SecretCertKey], serving.Data[SecretKeyKey])
	pusher := &Pusher{Tokens: staticTokens(tlsTestToken), Port: gw.port, Now: clock.Now,
		TLS: &PushTLS{ServerName: serverName, Roots: trust}}
	stranger := &Pusher{Tokens: staticTokens(tlsTestToken), Port: gw.port, Now: clock.Now,
		TLS: &PushTLS{ServerName: serverName, Roots: func(context.Context) ([]byte, error) { return unrelatedCA(t, clock.Now()), nil }}}
	revision := 0
	// push pushes a new revision with p and, when it succeeds, checks the
	// gateway enforces it.
	push := func(p *Pusher) error {
		t.Helper()
		revision++
		cfg := pushConfig(t, revision)
		if err := p.Push(ctx, gw.pod, cfg); err != nil {
			return err
		}
		st, err := pusher.Status(ctx, gw.pod)
		if err != nil || st.Revision != cfg.Revision {
			t.Fatalf("after a push of %s the gateway reports %q (%v)", cfg.Revision, st.Revision, err)
		}
		return nil
	}
	// refused checks that a push with p fails verifying the gateway and
	// leaves the configuration in force unchanged.
	refused := func(p *Pusher, want string) {
		t.Helper()
		before, err := pusher.Status(ctx, gw.pod)
		if err != nil {
			t.Fatal(err)
		}
		err = push(p)
		if !isVerificationError(err) {
			t.Fatalf("push %s: err = %v, want a certificate verification error", want, err)
		}
		after, err := pusher.Status(ctx, gw.pod)
		if err != nil || after.Revision != before.Revision {
			t.Errorf("a refused push %s changed the gateway's revision from %q to %q (%v)", want, before.Revision, after.Revision, err)
		}
	}
	if err := push(pusher); err != nil {
		t.Fatalf("push over TLS: %v", err)
	}
	refused(stranger, "verifying against an unrelated CA")

	// Serving certificate rotation: once a third of its life remains it is
	// re-issued by the same CA; the running gateway picks the new files up
	// without a restart.
	clock.Set(pki.RenewAt(leaf1.Cert).Add(time.Minute))
	_, serving = secrets("the serving certificate's renewal", func(_, s *corev1.Secret) bool {
		kp, err := pki.ParseKeyPair(s.Data[SecretCertKey], s.Data[SecretKeyKey])
		return err == nil && kp.Cert.SerialNumber.Cmp(leaf1.Cert.SerialNumber) != 0
	})
	leaf2 := leafOf(serving)
	if err := leaf2.Cert.CheckSignatureFrom(ca.Cert); err != nil || len(bundleOf(serving)) != 1 {
		t.Errorf("renewed certificate: signed by the same CA: %v; bundle size %d, want 1", err, len(bundleOf(serving)))
	}
	gw.mount(serving.Data[SecretCertKey], serving.Data[SecretKeyKey])
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s, err := gw.presentedSerial(serving.Data[SecretCAKey], serverName, clock.Now())
		return err == nil && s.Cmp(leaf2.Cert.SerialNumber) == 0, nil
	})
	if err != nil {
		t.Fatalf("the gateway never presented the renewed certificate: %v", err)
	}
	if err := push(pusher); err != nil {
		t.Fatalf("push after the certificate's renewal: %v", err)
	}
	refused(stranger, "verifying against an unrelated CA after renewal")

	// CA rotation: the new CA signs a new serving certificate at once, and
	// the old CA stays in the bundle, so a gateway still presenting the
	// previous certificate keeps taking pushes until that certificate expires.
	clock.Set(pki.RenewAt(ca.Cert).Add(time.Minute))
	if !clock.Now().Before(leaf2.Cert.NotAfter) {
		t.Fatal("test setup: the previous certificate expired before the CA's renewal")
	}
	caSecret, serving = secrets("the CA's renewal", func(c, _ *corev1.Secret) bool {
		kp, err := pki.ParseKeyPair(c.Data[SecretCertKey], c.Data[SecretKeyKey])
		return err == nil && !kp.Cert.Equal(ca.Cert)
	})
	_, serving = secrets("a certificate from the new CA", func(_, s *corev1.Secret) bool {
		kp, err := pki.ParseKeyPair(s.Data[SecretCertKey], s.Data[SecretKeyKey])
		return err == nil && kp.Cert.CheckSignatureFrom(leafOf(caSecret).Cert) == nil
	})
	ca2 := leafOf(caSecret)
	leaf3 := leafOf(serving)
	if b := bundleOf(serving); len(b) != 2 || !b[0].Equal(ca2.Cert) || !b[1].Equal(ca.Cert) {
		t.Fatalf("bundle after the CA's renewal holds %d certificates, want the new CA and the old", len(b))
	}
	if err := push(pusher); err != nil {
		t.Fatalf("push to a gateway still presenting the old CA's certificate: %v", err)
	}
	clock.Set(leaf2.Cert.NotAfter.Add(time.Minute))
	// A new connection (a connection kept alive was verified when it was
	// opened) to a gateway still presenting the expired certificate.
	fresh := &Pusher{Tokens: pusher.Tokens, Port: pusher.Port, Now: clock.Now, TLS: pusher.TLS}
	if err := push(fresh); !isVerificationError(err) {
		t.Fatalf("push to a gateway presenting an expired certificate: err = %v, want a verification error", err)
	}
	gw.mount(serving.Data[SecretCertKey], serving.Data[SecretKeyKey])
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s, err := gw.presentedSerial(serving.Data[SecretCAKey], serverName, clock.Now())
		return err == nil && s.Cmp(leaf3.Cert.SerialNumber) == 0, nil
	})
	if err != nil {
		t.Fatalf("the gateway never presented the new CA's certificate: %v", err)
	}
	if err := push(pusher); err != nil {
		t.Fatalf("push after the CA's renewal: %v", err)
	}
	refused(stranger, "verifying against an unrelated CA after the CA's renewal")

	// Once the old CA has expired (and every certificate it signed with it),
	// it leaves the bundle.
	clock.Set(ca.Cert.NotAfter.Add(time.Minute))
	secrets("the old CA's removal from the bundle", func(_, s *corev1.Secret) bool {
		b, err := pki.ParseCerts(s.Data[SecretCAKey])
		return err == nil && len(b) == 1 && b[0].Equal(ca2.Cert)
	})

	// A deleted serving Secret is issued again at once.
	if err := env.Client.Delete(ctx, serving); err != nil {
		t.Fatal(err)
	}
	secrets("the serving Secret's re-creation", func(_, s *corev1.Secret) bool {
		kp, err := pki.ParseKeyPair(s.Data[SecretCertKey], s.Data[SecretKeyKey])
		return err == nil && kp.Cert.CheckSignatureFrom(ca2.Cert) == nil && s.UID != serving.UID
	})
}

func TestPushWithoutATrustBundleFails(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nobundle"}}); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "nobundle", Name: "gateway-tls"}
	now := time.Now()
	ca, err := pki.NewCA("ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServing([]string{"gw.nobundle.svc"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	gw := startTLSGateway(t, leaf.CertPEM, leaf.KeyPEM)
	var minted int
	tokens := tokenFunc(func() string { minted++; return tlsTestToken })
	p := &Pusher{Tokens: tokens, Port: gw.port, TLS: &PushTLS{ServerName: "gw.nobundle.svc", Roots: SecretTrustBundle(c, key)}}
	// No Secret, then a Secret without ca.crt: no push, no token minted.
	if err := p.Push(ctx, gw.pod, pushConfig(t, 1)); err == nil {
		t.Fatal("push without the trust bundle's Secret succeeded")
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{SecretCAKey: []byte("  \n")}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := p.Push(ctx, gw.pod, pushConfig(t, 1)); err == nil {
		t.Fatal("push with an empty trust bundle succeeded")
	}
	if minted != 0 {
		t.Errorf("%d push tokens minted without a verified channel", minted)
	}
	// With the CA in place the push goes through.
	s.Data[SecretCAKey] = ca.CertPEM
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := p.Push(ctx, gw.pod, pushConfig(t, 1)); err != nil {
		t.Fatalf("push with the CA in the bundle: %v", err)
	}
	// The same server name but another CA's certificate is refused.
	other, err := pki.NewCA("other", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.IssueServing([]string{"gw.nobundle.svc"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	impostor := startTLSGateway(t, forged.CertPEM, forged.KeyPEM)
	p.Port = impostor.port
	err = p.Push(ctx, impostor.pod, pushConfig(t, 2))
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); !ok {
		t.Errorf("push to a gateway with another CA's certificate: err = %v, want an unknown authority", err)
	}
	trustsImpostor := &Pusher{Port: impostor.port, Tokens: tokens, TLS: &PushTLS{ServerName: "gw.nobundle.svc",
		Roots: func(context.Context) ([]byte, error) { return other.CertPEM, nil }}}
	if st, err := trustsImpostor.Status(ctx, impostor.pod); err != nil || st.Revision != "" {
		t.Errorf("the impostor received a configuration: revision %q (%v)", st.Revision, err)
	}
}

type tokenFunc func() string

func (f tokenFunc) Token(context.Context) (string, error) { return f(), nil }

func TestGatewayCAFillsInstallerOwnedSecretsWithoutCreatingThem(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	ns := "owned"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	g := &GatewayCA{Client: c, Reader: c, Namespace: ns, CASecret: "ca", ServingSecret: "tls",
		DNSNames: []string{"gw.owned.svc"}, KeepMissing: true}
	if _, err := g.Ensure(ctx); err == nil {
		t.Fatal("Ensure succeeded without the installer's Secrets")
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Fatalf("%d Secrets created (%v), want none", len(list.Items), err)
	}
	for _, name := range []string{"ca", "tls"} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	var serving corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tls"}, &serving); err != nil {
		t.Fatal(err)
	}
	kp, err := pki.ParseKeyPair(serving.Data[SecretCertKey], serving.Data[SecretKeyKey])
	if err != nil || serving.Type != corev1.SecretTypeOpaque {
		t.Fatalf("serving Secret type %s, pair %v", serving.Type, err)
	}
	// A second pass with nothing due writes nothing.
	rv := serving.ResourceVersion
	if _, err := g.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tls"}, &serving); err != nil || serving.ResourceVersion != rv {
		t.Errorf("an Ensure with nothing due rewrote the serving Secret (%v)", err)
	}
	if !slices.Equal(kp.Cert.DNSNames, g.DNSNames) {
		t.Errorf("serving certificate names %v, want %v", kp.Cert.DNSNames, g.DNSNames)
	}
}

func isVerificationError(err error) bool {
	_, ok := errors.AsType[*tls.CertificateVerificationError](err)
	return ok
}
