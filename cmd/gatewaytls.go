package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolhooks/toolhooks/internal/controller"
)

// gatewayTLSFlags configure how pushes to the gateways are secured.
type gatewayTLSFlags struct {
	enabled       bool
	manageCA      bool
	namespace     string
	servingSecret string
	caSecret      string
	serverName    string
	dnsNames      string
	caLifetime    time.Duration
	certLifetime  time.Duration
	keepMissing   bool
}

func (f *gatewayTLSFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "gateway-tls", true,
		"Push over HTTPS, verifying each gateway's certificate against the trust bundle (ca.crt) of --gateway-tls-secret; "+
			"false pushes over plain HTTP (the push token can then be read on the network).")
	fs.BoolVar(&f.manageCA, "manage-gateway-ca", true,
		"Keep a CA in --gateway-ca-secret and the gateways' serving certificate in --gateway-tls-secret, "+
			"renewing both before they expire; false reads only ca.crt of --gateway-tls-secret (cert-manager).")
	fs.StringVar(&f.namespace, "gateway-tls-namespace", "",
		"The namespace of the gateway TLS Secrets (default: $POD_NAMESPACE).")
	fs.StringVar(&f.servingSecret, "gateway-tls-secret", "toolhooks-gateway-tls",
		"The Secret with the gateways' serving certificate (tls.crt, tls.key) and the trust bundle pushes verify against (ca.crt).")
	fs.StringVar(&f.caSecret, "gateway-ca-secret", "toolhooks-gateway-ca",
		"The Secret the controller keeps its gateway CA in (with --manage-gateway-ca).")
	fs.StringVar(&f.serverName, "gateway-tls-server-name", "",
		"The DNS name every gateway's certificate must carry: pods are dialled by IP, verified as this name "+
			"(default: toolhooks-gateway.NAMESPACE.svc).")
	fs.StringVar(&f.dnsNames, "gateway-tls-dns-names", "",
		"Comma-separated further DNS names of the managed serving certificate (the gateway Service's other names).")
	fs.BoolVar(&f.keepMissing, "gateway-tls-keep-missing-secrets", false,
		"With --manage-gateway-ca, fill the two Secrets but never create them (an installer such as the Helm chart owns them).")
	fs.DurationVar(&f.caLifetime, "gateway-ca-lifetime", controller.DefaultGatewayCALifetime,
		"Lifetime of the managed gateway CA; it is renewed when a third of it remains.")
	fs.DurationVar(&f.certLifetime, "gateway-cert-lifetime", controller.DefaultGatewayCertLifetime,
		"Lifetime of the managed gateway serving certificate; it is renewed when a third of it remains.")
}

// complete fills the defaults that depend on the environment.
func (f *gatewayTLSFlags) complete() error {
	if f.namespace == "" {
		f.namespace = os.Getenv("POD_NAMESPACE")
	}
	if f.namespace == "" {
		return errors.New("--gateway-tls-namespace is required outside a pod (POD_NAMESPACE unset)")
	}
	if f.serverName == "" {
		f.serverName = "toolhooks-gateway." + f.namespace + ".svc"
	}
	if f.servingSecret == "" || (f.manageCA && f.caSecret == "") {
		return errors.New("--gateway-tls-secret and --gateway-ca-secret must not be empty")
	}
	if f.caLifetime <= 0 || f.certLifetime <= 0 || f.certLifetime > f.caLifetime {
		return fmt.Errorf("--gateway-cert-lifetime %s and --gateway-ca-lifetime %s: both positive, the certificate's no longer",
			f.certLifetime, f.caLifetime)
	}
	return nil
}

// setup secures p: without TLS it warns; with it, p verifies gateways
// against the serving Secret's bundle and, with --manage-gateway-ca, the
// manager runs the CA.
func (f *gatewayTLSFlags) setup(mgr ctrl.Manager, p *controller.Pusher) error {
	if !f.enabled {
		setupLog.Info("WARNING: --gateway-tls=false: configurations and push tokens go to the gateways over plain HTTP")
		return nil
	}
	p.TLS = &controller.PushTLS{
		ServerName: f.serverName,
		Roots: controller.SecretTrustBundle(mgr.GetClient(),
			types.NamespacedName{Namespace: f.namespace, Name: f.servingSecret}),
	}
	setupLog.Info("Pushing over TLS", "serverName", f.serverName, "trustBundle", f.namespace+"/"+f.servingSecret,
		"manageCA", f.manageCA)
	if !f.manageCA {
		return nil
	}
	names := []string{f.serverName}
	for n := range strings.SplitSeq(f.dnsNames, ",") {
		if n = strings.TrimSpace(n); n != "" && n != f.serverName {
			names = append(names, n)
		}
	}
	ca := &controller.GatewayCA{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
		Namespace: f.namespace, CASecret: f.caSecret, ServingSecret: f.servingSecret, DNSNames: names,
		CALifetime: f.caLifetime, CertLifetime: f.certLifetime, KeepMissing: f.keepMissing,
	}
	if err := ca.Validate(); err != nil {
		return err
	}
	return mgr.Add(ca)
}
