package controller

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/toolhooks/toolhooks/internal/pki"
)

// Keys of the gateway TLS Secrets (those of a kubernetes.io/tls Secret and
// of cert-manager's).
const (
	SecretCertKey = corev1.TLSCertKey       // tls.crt
	SecretKeyKey  = corev1.TLSPrivateKeyKey // tls.key
	SecretCAKey   = "ca.crt"
)

// Default lifetimes of the controller-managed gateway CA and serving
// certificate; each is renewed once less than a third of it remains.
const (
	DefaultGatewayCALifetime   = 365 * 24 * time.Hour
	DefaultGatewayCertLifetime = 30 * 24 * time.Hour
)

// GatewayCA keeps the CA that signs the gateways' serving certificate, and
// that certificate, in two Secrets of the controller's namespace:
//
//   - CASecret: the CA (tls.crt, tls.key) and the trust bundle (ca.crt),
//     read by the controller only;
//   - ServingSecret: the gateways' serving certificate and key (tls.crt,
//     tls.key) and the same trust bundle (ca.crt), mounted by the gateway
//     pods and read by the Pusher.
//
// It creates what is missing or invalid and renews the serving certificate
// and the CA once less than a third of their lifetime remains. A renewed CA
// stays in the trust bundle beside its successor until it expires, and
// every certificate it signed expires no later than it does, so a gateway
// still presenting the previous certificate (its mounted Secret not yet
// updated) keeps verifying. It runs as a manager.Runnable on the leader.
type GatewayCA struct {
	// Client writes the Secrets.
	Client client.Client
	// Reader reads them (the API server, not a cache that may lag a write).
	Reader client.Reader
	// Cache, when set, wakes the loop when either Secret changes (deleted,
	// edited).
	Cache cache.Informers
	// Namespace, CASecret and ServingSecret name the Secrets.
	Namespace, CASecret, ServingSecret string
	// DNSNames are the serving certificate's names; the Pusher verifies the
	// first (PushTLS.ServerName).
	DNSNames []string
	// CALifetime and CertLifetime default to DefaultGatewayCALifetime and
	// DefaultGatewayCertLifetime.
	CALifetime, CertLifetime time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// MaxInterval bounds the wait between checks (1h when 0).
	MaxInterval time.Duration
	// RetryInterval is the wait after a failed check (5s when 0).
	RetryInterval time.Duration
	// KeepMissing leaves a missing Secret missing (an error, retried) instead
	// of creating it: for Secrets that an installer owns (the Helm chart
	// creates them empty), so that one deleted on uninstall is not re-created
	// by a controller still shutting down.
	KeepMissing bool
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update,namespace=system

func (g *GatewayCA) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *GatewayCA) lifetimes() (ca, cert time.Duration) {
	ca, cert = g.CALifetime, g.CertLifetime
	if ca <= 0 {
		ca = DefaultGatewayCALifetime
	}
	if cert <= 0 {
		cert = DefaultGatewayCertLifetime
	}
	return ca, cert
}

// Validate checks the configuration.
func (g *GatewayCA) Validate() error {
	ca, cert := g.lifetimes()
	switch {
	case g.Client == nil || g.Reader == nil:
		return errors.New("the gateway CA needs a client and a reader")
	case g.Namespace == "" || g.CASecret == "" || g.ServingSecret == "":
		return errors.New("the gateway CA needs a namespace and the names of its two Secrets")
	case g.CASecret == g.ServingSecret:
		return fmt.Errorf("the gateway CA Secret and serving Secret are both %q: the gateways would mount the CA key", g.CASecret)
	case len(g.DNSNames) == 0:
		return errors.New("the gateway serving certificate needs a DNS name")
	case cert > ca:
		return fmt.Errorf("the gateway certificate lifetime %s is longer than the CA's %s", cert, ca)
	}
	return nil
}

// Start runs the loop until ctx ends.
func (g *GatewayCA) Start(ctx context.Context) error {
	if err := g.Validate(); err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("gateway-ca")
	wake := make(chan struct{}, 1)
	if g.Cache != nil {
		inf, err := g.Cache.GetInformer(ctx, &corev1.Secret{})
		if err != nil {
			return fmt.Errorf("watching Secrets: %w", err)
		}
		kick := func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok && s.Namespace == g.Namespace &&
				(s.Name == g.CASecret || s.Name == g.ServingSecret) {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick,
		}); err != nil {
			return fmt.Errorf("watching Secrets: %w", err)
		}
	}
	maxWait, retry := g.MaxInterval, g.RetryInterval
	if maxWait <= 0 {
		maxWait = time.Hour
	}
	if retry <= 0 {
		retry = 5 * time.Second
	}
	for {
		wait := maxWait
		next, err := g.Ensure(ctx)
		if err != nil {
			logger.Error(err, "Gateway TLS certificates not ensured; retrying", "retryIn", retry)
			wait = retry
		} else {
			wait = min(wait, max(next.Sub(g.now()), time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// Ensure brings both Secrets up to date once and returns when the next
// renewal is due.
func (g *GatewayCA) Ensure(ctx context.Context) (time.Time, error) {
	caObj, err := g.get(ctx, g.CASecret)
	if err != nil {
		return time.Time{}, err
	}
	servingObj, err := g.get(ctx, g.ServingSecret)
	if err != nil {
		return time.Time{}, err
	}
	caLife, certLife := g.lifetimes()
	plan, err := planGatewayTLS(caObj.Data, servingObj.Data, g.DNSNames, g.now(), caLife, certLife)
	if err != nil {
		return time.Time{}, err
	}
	logger := log.FromContext(ctx).WithName("gateway-ca")
	// The CA first: a serving certificate is never written under a CA
	// whose key was not kept.
	if plan.newCA {
		logger.Info("Issued a gateway CA", "secret", g.CASecret, "notAfter", plan.caNotAfter)
	}
	if err := g.write(ctx, caObj, plan.ca); err != nil {
		return time.Time{}, err
	}
	if plan.newCert {
		logger.Info("Issued a gateway serving certificate", "secret", g.ServingSecret, "notAfter", plan.certNotAfter,
			"dnsNames", g.DNSNames)
	}
	if err := g.write(ctx, servingObj, plan.serving); err != nil {
		return time.Time{}, err
	}
	return plan.next, nil
}

// get reads a Secret; a missing one comes back empty, without a
// resourceVersion.
func (g *GatewayCA) get(ctx context.Context, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := g.Reader.Get(ctx, types.NamespacedName{Namespace: g.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: name}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", g.Namespace, name, err)
	}
	return s, nil
}

// write stores data into s (creating it when missing); unchanged data is
// not written.
func (g *GatewayCA) write(ctx context.Context, s *corev1.Secret, data map[string][]byte) error {
	if s.ResourceVersion == "" {
		if g.KeepMissing {
			return fmt.Errorf("secret %s/%s does not exist (it is created by the installer, not the controller)", s.Namespace, s.Name)
		}
		s.Type = corev1.SecretTypeTLS
		s.Labels = map[string]string{"app.kubernetes.io/managed-by": "toolhooks-controller"}
		s.Data = data
		if err := g.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	}
	if maps.EqualFunc(s.Data, data, bytes.Equal) {
		return nil
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	maps.Copy(s.Data, data)
	if err := g.Client.Update(ctx, s); err != nil {
		return fmt.Errorf("updating Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// tlsPlan is what the two Secrets should hold.
type tlsPlan struct {
	ca, serving                    map[string][]byte
	newCA, newCert                 bool
	caNotAfter, certNotAfter, next time.Time
}

// planGatewayTLS computes the Secrets' contents from what they hold now:
// it keeps a valid CA and serving certificate until their renewal is due,
// replaces what is missing, invalid or due, and keeps renewed CAs in the
// bundle until they expire. It is pure but for the keys it generates.
func planGatewayTLS(caData, servingData map[string][]byte, dnsNames []string, now time.Time,
	caLife, certLife time.Duration) (tlsPlan, error) {
	var plan tlsPlan
	var older []*x509.Certificate
	ca, err := pki.ParseKeyPair(caData[SecretCertKey], caData[SecretKeyKey])
	if err == nil && !ca.Cert.IsCA {
		err = errors.New("not a CA certificate")
	}
	if err == nil {
		if prev, err := pki.ParseCerts(caData[SecretCAKey]); err == nil {
			older = prev
		}
	}
	if err != nil || !now.Before(pki.RenewAt(ca.Cert)) {
		if err == nil {
			older = append(older, ca.Cert) // renewed: trusted until it expires
		}
		if ca, err = pki.NewCA("toolhooks-gateway-ca", now, caLife); err != nil {
			return plan, err
		}
		plan.newCA = true
	}
	bundle := []*x509.Certificate{ca.Cert}
	plan.next = pki.RenewAt(ca.Cert)
	for _, c := range older {
		if !c.IsCA || !now.Before(c.NotAfter) || slices.ContainsFunc(bundle, c.Equal) {
			continue
		}
		bundle = append(bundle, c)
		plan.next = earliest(plan.next, c.NotAfter)
	}
	bundlePEM := pki.EncodeCerts(bundle)

	leaf, err := pki.ParseKeyPair(servingData[SecretCertKey], servingData[SecretKeyKey])
	if err != nil || leaf.Cert.CheckSignatureFrom(ca.Cert) != nil || !slices.Equal(leaf.Cert.DNSNames, dnsNames) ||
		!now.Before(pki.RenewAt(leaf.Cert)) {
		if leaf, err = ca.IssueServing(dnsNames, now, certLife); err != nil {
			return plan, err
		}
		plan.newCert = true
	}
	plan.next = earliest(plan.next, pki.RenewAt(leaf.Cert))
	plan.caNotAfter, plan.certNotAfter = ca.Cert.NotAfter, leaf.Cert.NotAfter
	plan.ca = map[string][]byte{SecretCertKey: ca.CertPEM, SecretKeyKey: ca.KeyPEM, SecretCAKey: bundlePEM}
	plan.serving = map[string][]byte{SecretCertKey: leaf.CertPEM, SecretKeyKey: leaf.KeyPEM, SecretCAKey: bundlePEM}
	return plan, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// SecretTrustBundle returns the PEM trust bundle (ca.crt) of a Secret read
// through r, for PushTLS.Roots. A missing Secret or key is an error: pushes
// wait for the bundle instead of going out unverified.
func SecretTrustBundle(r client.Reader, key types.NamespacedName) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		var s corev1.Secret
		if err := r.Get(ctx, key, &s); err != nil {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		b := s.Data[SecretCAKey]
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, fmt.Errorf("secret %s has no %s", key, SecretCAKey)
		}
		return b, nil
	}
}

// WithSecretsIn restricts the manager's cache of Secrets to namespace (the
// controller reads only its gateway TLS Secrets, there).
func WithSecretsIn(opts cache.Options, namespace string) cache.Options {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	return opts
}
