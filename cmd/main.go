/*
Copyright 2026 The toolhooks Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command manager runs the toolhooks controller: it compiles the policies that
// select each gateway pod into that pod's ordered hook list and reports each
// policy's status.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	// Import all Kubernetes client auth plugins (e.g. Azure, GCP, OIDC, etc.)
	// to ensure that exec-entrypoint and run can make use of them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/controller"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	// +kubebuilder:scaffold:imports
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))
	// +kubebuilder:scaffold:scheme
}

func main() {
	var (
		metricsAddr          string
		probeAddr            string
		enableLeaderElection bool
		secureMetrics        bool
		enableHTTP2          bool
		push                 bool
		gatewayPort          int
		pushAudience         string
		pushServiceAccount   string
		pushTokenFile        string
		resync               time.Duration
		approvalRetention    time.Duration
		gwTLS                gatewayTLSFlags
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to. "+
		"Use :8443 for HTTPS or :8080 for HTTP, or leave as 0 to disable the metrics service.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false,
		"Enable leader election, so that only one controller manager is active.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"Serve the metrics endpoint over HTTPS with authentication; false serves plain HTTP.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Enable HTTP/2 for the metrics server.")
	flag.BoolVar(&push, "push", true, "Push each gateway pod's compiled configuration to it; false only compiles and reports status.")
	flag.IntVar(&gatewayPort, "gateway-port", 0, fmt.Sprintf("The port gateway pods serve their API on "+
		"(default %d, or %d with --gateway-tls).", controller.DefaultGatewayTLSPort, controller.DefaultGatewayPort))
	flag.StringVar(&pushAudience, "push-audience", gatewayconfig.PushAudience,
		"The audience of the ServiceAccount token presented to gateways.")
	flag.StringVar(&pushServiceAccount, "push-service-account", "",
		"NAMESPACE/NAME of the ServiceAccount whose audience-bound tokens authenticate pushes "+
			"(default: $POD_NAMESPACE/toolhooks-controller-manager).")
	flag.StringVar(&pushTokenFile, "push-token-file", "",
		"Read the push token from this projected token file instead of requesting one.")
	flag.DurationVar(&approvalRetention, "approval-retention", controller.DefaultApprovalRetention,
		"How long a ToolCallApproval is kept after it was approved, denied, expired or used; then it is deleted.")
	flag.DurationVar(&resync, "resync", 30*time.Second,
		"How often to re-verify each gateway's revision, re-pushing to gateways that restarted.")
	gwTLS.register(flag.CommandLine)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOptions := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOptions.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	cacheOpts := controller.CacheOptions()
	if push && gwTLS.enabled {
		if err := gwTLS.complete(); err != nil {
			setupLog.Error(err, "Invalid gateway TLS flags")
			os.Exit(1)
		}
		cacheOpts = controller.WithSecretsIn(cacheOpts, gwTLS.namespace)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsOptions,
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         enableLeaderElection,
		LeaderElectionID:       "toolhooks-controller.toolhooks.dev",
		// The process ends right after the manager stops, so it can hand the
		// lease over at once instead of making the next leader wait it out.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		setupLog.Error(err, "Failed to create manager")
		os.Exit(1)
	}
	gateways := controller.GatewayReconciler{Resync: resync}
	if push {
		tokens, err := pushTokens(mgr.GetConfig(), pushTokenFile, pushServiceAccount, pushAudience)
		if err != nil {
			setupLog.Error(err, "Failed to set up push authentication")
			os.Exit(1)
		}
		gateways.Pusher = &controller.Pusher{Tokens: tokens, Port: gatewayPort}
		if err := gwTLS.setup(mgr, gateways.Pusher); err != nil {
			setupLog.Error(err, "Failed to set up gateway TLS")
			os.Exit(1)
		}
	}
	if err := controller.SetupAll(mgr, controller.NewStore(), gateways, approvalRetention); err != nil {
		setupLog.Error(err, "Failed to set up controllers")
		os.Exit(1)
	}
	// +kubebuilder:scaffold:builder

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "Failed to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		setupLog.Error(err, "Failed to set up ready check")
		os.Exit(1)
	}
	setupLog.Info("Starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "Failed to run manager")
		os.Exit(1)
	}
}

// pushTokens picks how the controller authenticates to gateways: a projected
// token file, or audience-bound tokens requested for its ServiceAccount.
func pushTokens(cfg *rest.Config, file, serviceAccount, audience string) (controller.TokenSource, error) {
	if file != "" {
		return controller.FileToken(file), nil
	}
	if serviceAccount == "" {
		ns := os.Getenv("POD_NAMESPACE")
		if ns == "" {
			return nil, errors.New("--push-service-account is required outside a pod (POD_NAMESPACE unset)")
		}
		serviceAccount = ns + "/toolhooks-controller-manager"
	}
	ns, name, ok := strings.Cut(serviceAccount, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--push-service-account %q: want NAMESPACE/NAME", serviceAccount)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &controller.ServiceAccountTokens{Client: cs, Namespace: ns, Name: name, Audience: audience}, nil
}

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
