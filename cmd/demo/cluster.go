package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/compile"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/plugins/pluginauth"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// The cluster demo's names.
const (
	demoNamespace       = "default"
	controllerNamespace = "toolhooks-system"
	controllerSA        = "toolhooks-controller"
	controllerIdentity  = "system:serviceaccount:" + controllerNamespace + ":" + controllerSA
	// The gateways' ServiceAccount: its token, bound to pluginAudience, is
	// what they present to the approval service.
	gatewaySA       = "toolhooks-gateway"
	gatewayIdentity = "system:serviceaccount:" + demoNamespace + ":" + gatewaySA
	pluginAudience  = "toolhooks-plugins"
)

// clusterGateway is one gateway pod of the cluster demo: a Pod object whose
// status.podIP is a loopback address a real gateway process listens on.
type clusterGateway struct {
	name   string // script key
	ip     string
	labels map[string]string
}

var clusterGateways = []clusterGateway{
	{name: gwCoding, ip: "127.0.0.2", labels: map[string]string{policyv1alpha1.GatewayLabel: "main"}},
	{name: gwAuditor, ip: "127.0.0.3", labels: map[string]string{policyv1alpha1.GatewayLabel: "main", "toolhooks.dev/agent": gwAuditor}},
}

// step prints a progress line.
func progress(out *printer, start time.Time, format string, a ...any) {
	out.printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
}

// runCluster is the cluster demo: envtest's kube-apiserver and etcd, the
// controller manager, a redis-server and two gateway processes in cluster
// mode counting budgets and rate limits in that Redis; the samples
// are applied with kubectl and pushed by the controller; the script is
// played; kubectl describe shows the denials. Everything is stopped and
// removed on return, including after Ctrl-C.
func runCluster(ctx context.Context, out *printer, o options) error { //nolint:gocyclo // one ordered story
	start := time.Now()
	// Before anything starts: without redis-server the demo cannot run.
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errNoRedis
	}
	d, cleanup, err := setup(out, "cluster mode: envtest control plane, controller, redis-server and gateway processes",
		map[string]string{flagGateway: o.gateway, "manager": o.manager})
	defer cleanup()
	if err != nil {
		return err
	}
	ctrllog.SetLogger(logr.Discard()) // envtest's own log; its failures come back as errors
	progress(out, start, "Starting kube-apiserver and etcd (envtest) with the toolhooks CRDs...")
	env, err := testenv.StartMain()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
	}()
	kubeconfig := filepath.Join(d.root, "kubeconfig")
	if err := writeKubeconfig(env.Config, kubeconfig); err != nil {
		return err
	}
	kubectl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(env.Assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return string(b), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, b)
		}
		return string(b), nil
	}
	progress(out, start, "API server up at %s", env.Config.Host)

	c := env.Client
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: controllerSA}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: gatewaySA}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	pluginToken, err := guardApprovals(ctx, env.Config, d)
	if err != nil {
		return err
	}
	progress(out, start, "The approval service at %s verifies its callers by TokenReview: only %s's tokens for audience %q",
		d.approvalsURL, gatewayIdentity, pluginAudience)
	port, err := freePort()
	if err != nil {
		return err
	}
	var procs []*process
	defer func() { // gateways and controller stop before the API server does
		for _, p := range slices.Backward(procs) {
			p.Stop()
		}
	}()
	redisPort, err := freePort()
	if err != nil {
		return err
	}
	progress(out, start, "Starting redis-server on 127.0.0.1:%d (the gateways' shared state store: "+
		"budgets and rate limits exact across both)...", redisPort)
	redis, err := startRedis(ctx, redisPort, redisDir(d))
	if err != nil {
		return err
	}
	procs = append(procs, redis.process) // stopped after the gateways
	progress(out, start, "redis-server: pid %d on %s (no snapshots, append-only file, noeviction)", redis.cmd.Process.Pid, redis.addr)
	gateways := map[string]*gatewayProcess{}
	for _, cg := range clusterGateways {
		pod, err := createGatewayPod(ctx, c, "gateway-"+cg.name, cg.ip, cg.labels)
		if err != nil {
			return err
		}
		// The store's deadline is 1s, not the 250ms default: here Redis shares
		// the machine's cores with a control plane and the demo's own tests,
		// and a call the store does not answer in time is denied (fail closed),
		// which would make the session's outcome depend on the machine's load.
		g, err := startGateway(ctx, "gateway "+cg.name, o.gateway, "--listen", net.JoinHostPort(cg.ip, strconv.Itoa(port)),
			"--workspace", d.workspace, "--kubeconfig", kubeconfig, "--controller-identity", controllerIdentity,
			"--pod-name", pod.Name, "--pod-namespace", pod.Namespace, "--pod-uid", string(pod.UID),
			"--auth-tokens-file", d.tokens, "--plugin-token-file", pluginToken,
			"--state-store-redis-address", redis.addr, "--state-store-timeout", "1s")
		if err != nil {
			return err
		}
		procs, gateways[cg.name] = append(procs, g.process), g
		progress(out, start, "Gateway pod %s: pid %d on %s (cluster mode: pushes authenticated by TokenReview)",
			pod.Name, g.cmd.Process.Pid, g.addr)
	}
	mgr, err := startProcess(ctx, "controller", o.manager, []string{"--kubeconfig", kubeconfig,
		"--push-service-account", controllerNamespace + "/" + controllerSA, "--gateway-port", strconv.Itoa(port),
		// The demo's gateways listen on loopback addresses of this machine only.
		"--gateway-tls=false",
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--resync", "2s"}, nil)
	if err != nil {
		return err
	}
	procs = append(procs, mgr)
	progress(out, start, "Controller manager: pid %d", mgr.cmd.Process.Pid)

	progress(out, start, "kubectl apply -f (the samples as above):")
	applied, err := kubectl("apply", "-n", demoNamespace, "-f", d.policies)
	if err != nil {
		return err
	}
	out.printf("%s", indent(applied))
	progress(out, start, "Waiting for the controller to push the policies to both gateways (Enforced=True)...")
	if err := waitEnforced(ctx, c, mgr, 90*time.Second); err != nil {
		return err
	}
	for _, cg := range clusterGateways {
		g := gateways[cg.name]
		if err := g.waitReady(ctx, 30*time.Second); err != nil {
			return err
		}
		store, err := g.stateStore(ctx)
		if err != nil {
			return err
		}
		progress(out, start, "Gateway pod gateway-%s state store: %s", cg.name, store)
	}
	listed, err := kubectl("get", "toolhooks", "-n", demoNamespace)
	if err != nil {
		return err
	}
	out.printf("%s", indent(listed))
	out.printf("\n")

	if err := playAndSummarize(ctx, out, gateways, o.audit, start); err != nil {
		return err
	}

	out.printf("\n")
	progress(out, start, "kubectl describe autonomypolicy coding-agent (denials are Events on the policy; "+
		"one gateway's denials of one policy form a series: the first one's message and a count):")
	described, err := waitKubectl(ctx, kubectl, []string{"describe", "autonomypolicy", "-n", demoNamespace, codingAgent.name},
		func(s string) bool { return strings.Contains(s, "ToolCallDenied") }, 30*time.Second)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, described)
	}
	out.printf("%s", indent(described))
	progress(out, start, "kubectl get events --field-selector reason=ToolCallDenied (every policy that denied):")
	events, err := waitKubectl(ctx, kubectl, []string{"get", "events", "-n", demoNamespace, "--field-selector", "reason=ToolCallDenied",
		"--sort-by", ".metadata.creationTimestamp",
		"-o", "custom-columns=POLICY:.involvedObject.kind,NAME:.involvedObject.name,POD:.related.name,MESSAGE:.message"},
		func(s string) bool {
			return strings.Contains(s, "coding-agent") && strings.Contains(s, "auditor") &&
				strings.Contains(s, "ci-bot") && strings.Contains(s, "approval-service")
		}, 30*time.Second)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, events)
	}
	out.printf("%s", indent(events))
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	out.printf("\n")
	if err := approvalScene(ctx, out, start, c, cs, kubectl, gateways[gwCoding].addr); err != nil {
		return err
	}
	hold(ctx, out, o, gateways[gwCoding].addr)
	progress(out, start, "Stopping the gateways, the controller, redis-server and the control plane; removing %s", d.root)
	return nil
}

// guardApprovals makes the approval service accept only the gateways'
// ServiceAccount tokens for the plugin audience, verified by TokenReview,
// and writes such a token where the gateways read it (--plugin-token-file),
// as the kubelet projects it into a gateway pod; it returns the file.
func guardApprovals(ctx context.Context, cfg *rest.Config, d demoDirs) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := pluginauth.New(pluginauth.Options{Client: cs.AuthenticationV1().TokenReviews(), Audience: pluginAudience,
		Gateways: []string{gatewayIdentity}})
	if err != nil {
		return "", err
	}
	d.approvals.requireGateways(v)
	secs := int64(24 * time.Hour / time.Second) // the demo may be held for hours; a pod's token is renewed by the kubelet
	tr, err := cs.CoreV1().ServiceAccounts(demoNamespace).CreateToken(ctx, gatewaySA, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{pluginAudience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting the gateways' plugin token: %w", err)
	}
	file := filepath.Join(d.root, "plugin-token")
	if err := os.WriteFile(file, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	return file, nil
}

// writeKubeconfig writes a kubeconfig for the administrator envtest created.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: demoNamespace}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// freePort returns a TCP port free on the loopback interface.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// createGatewayPod creates a gateway Pod object and sets its status to
// running at ip, as the kubelet would.
func createGatewayPod(ctx context.Context, c client.Client, name, ip string, labels map[string]string) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "toolhooks/gateway:dev"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating pod %s: %w", name, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "gateway", Ready: true, Image: "toolhooks/gateway:dev"}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("setting the status of pod %s: %w", name, err)
	}
	return pod, nil
}

// waitEnforced waits until every policy in the namespace reports
// Enforced=True for its current generation.
func waitEnforced(ctx context.Context, c client.Client, mgr *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := mgr.exited(); err != nil {
			return err
		}
		pending, err := notEnforced(ctx, c)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not enforced after %s: %s; controller log:\n%s", timeout, strings.Join(pending, "; "),
				tail(mgr.stderr.String()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// notEnforced lists the policies not yet enforced, with their condition.
func notEnforced(ctx context.Context, c client.Client) ([]string, error) {
	var pending []string
	n := 0
	for _, k := range compile.Kinds {
		l := k.NewList()
		if err := c.List(ctx, l, client.InNamespace(demoNamespace)); err != nil {
			return nil, err
		}
		for _, o := range k.ListObjects(l) {
			n++
			cond := meta.FindStatusCondition(o.GetPolicyStatus().Conditions, policyv1alpha1.ConditionEnforced)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != o.GetGeneration() {
				pending = append(pending, fmt.Sprintf("%s/%s %v", k.Kind, o.GetName(), cond))
			}
		}
	}
	if n == 0 {
		pending = append(pending, "no policies yet")
	}
	return pending, nil
}

// waitKubectl runs kubectl with args until its output satisfies ok (Events
// arrive asynchronously) and returns that output.
func waitKubectl(ctx context.Context, kubectl func(...string) (string, error), args []string,
	ok func(string) bool, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		out, err := kubectl(args...)
		if err != nil {
			return "", err
		}
		if ok(out) {
			return out, nil
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("kubectl %s: the denials did not show after %s", strings.Join(args, " "), timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n"
}
