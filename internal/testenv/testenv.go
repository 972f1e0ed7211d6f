// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with the project's CRDs installed, for integration tests.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a controller-runtime client with the project's scheme.
	Client client.Client
	// Scheme holds the core and project types.
	Scheme *k8sruntime.Scheme
	// Assets is the directory holding kube-apiserver, etcd and kubectl.
	Assets string
	env    *envtest.Environment
}

// RepoRoot returns the repository root, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// Assets returns KUBEBUILDER_ASSETS, building the binaries with
// hack/setup-envtest.sh when the variable is unset.
func Assets(t testing.TB) string {
	t.Helper()
	dir, err := assets()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	assetsOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "setup-envtest.sh"))
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			assetsErr = fmt.Errorf("building envtest binaries with hack/setup-envtest.sh: %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		assetsDir = lines[len(lines)-1]
	})
	return assetsDir, assetsErr
}

// NewScheme returns a scheme with the core Kubernetes and toolhooks types.
func NewScheme(t testing.TB) *k8sruntime.Scheme {
	t.Helper()
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newScheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the core types to the scheme: %w", err)
	}
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the toolhooks types to the scheme: %w", err)
	}
	return s, nil
}

// Start starts kube-apiserver and etcd with the CRDs from config/crd/bases and
// stops them when the test ends.
func Start(t testing.TB) *Env {
	t.Helper()
	e, err := StartMain()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("Stopping envtest: %v", err)
		}
	})
	return e
}

// StartMain starts kube-apiserver and etcd with the CRDs from config/crd/bases
// for a whole test binary: call it from TestMain, share the Env between the
// tests, and call Stop after m.Run.
func StartMain() (*Env, error) {
	dir, err := assets()
	if err != nil {
		return nil, err
	}
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: dir,
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating client: %w", err), e.Stop())
	}
	return &Env{Config: cfg, Client: c, Scheme: s, Assets: dir, env: e}, nil
}

// Stop stops kube-apiserver and etcd.
func (e *Env) Stop() error {
	if err := e.env.Stop(); err != nil {
		return fmt.Errorf("stopping envtest: %w", err)
	}
	return nil
}

// AdminKubeconfig writes a kubeconfig for a system:masters user of the
// environment into a temporary file and returns its path.
func (e *Env) AdminKubeconfig(t testing.TB) string {
	t.Helper()
	path, _ := e.User(t, "kubectl-admin", "system:masters")
	return path
}

// User adds a user authenticated by a client certificate, with groups, and
// returns a kubeconfig file for it (in a temporary directory) and its
// rest.Config. The API server authorizes it by RBAC.
func (e *Env) User(t testing.TB, name string, groups ...string) (string, *rest.Config) {
	t.Helper()
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("Adding user %s: %v", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("Writing kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, user.Config()
}

// Kubectl runs the envtest kubectl (built by hack/setup-envtest.sh, not the one
// on PATH) against the environment and returns its combined output.
func (e *Env) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.Assets, "kubectl"), append([]string{"--kubeconfig", e.AdminKubeconfig(t)}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var quietLogs sync.Once

// StartManager runs a controller-runtime manager against the environment
// until the test ends (metrics and probes off, controller-runtime logs
// discarded unless TOOLHOOKS_TEST_LOGS is set); setup registers the reconcilers before it starts.
func (e *Env) StartManager(t testing.TB, cacheOptions cache.Options, setup func(manager.Manager) error) {
	t.Helper()
	quietLogs.Do(func() {
		if os.Getenv("TOOLHOOKS_TEST_LOGS") != "" {
			ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
		} else {
			ctrllog.SetLogger(logr.Discard())
		}
	})
	mgr, err := manager.New(e.Config, manager.Options{
		Scheme:                 e.Scheme,
		Cache:                  cacheOptions,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests start several managers in one process.
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		t.Fatalf("Creating manager: %v", err)
	}
	if err := setup(mgr); err != nil {
		t.Fatalf("Setting up reconcilers: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Manager: %v", err)
		}
	})
}
