package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/controller"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

const (
	controllerNamespace = "toolhooks-system"
	controllerSA        = "toolhooks-controller"
	controllerIdentity  = "system:serviceaccount:" + controllerNamespace + ":" + controllerSA
)

var buildGatewayOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolhooks-gateway-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	return bin, nil
})

// gatewayProc is a real gateway process listening on a loopback address.
type gatewayProc struct {
	t    *testing.T
	addr string
	args []string
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

func startGateway(t *testing.T, ip string, port int, args ...string) *gatewayProc {
	t.Helper()
	bin, err := buildGatewayOnce()
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens: [{identity: alice, token: "+aliceToken+"}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(args, "--auth-tokens-file", tokens)
	g := &gatewayProc{t: t, addr: net.JoinHostPort(ip, strconv.Itoa(port)), args: append([]string{bin}, args...)}
	g.start()
	t.Cleanup(g.stop)
	return g
}

func (g *gatewayProc) start() {
	g.t.Helper()
	g.logs = &bytes.Buffer{}
	g.cmd = exec.Command(g.args[0], append([]string{"--listen", g.addr}, g.args[1:]...)...)
	g.cmd.Stdout, g.cmd.Stderr = io.Discard, g.logs
	if err := g.cmd.Start(); err != nil {
		g.t.Fatalf("Starting gateway: %v", err)
	}
	poll(g.t, "gateway "+g.addr+" to listen", func() (bool, string) {
		resp, err := http.Get("http://" + g.addr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

func (g *gatewayProc) stop() {
	if g.cmd != nil && g.cmd.Process != nil {
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
		g.cmd = nil
	}
}

type callResult struct {
	Status string  `json:"status"`
	Result string  `json:"result"`
	Denial *denial `json:"denial"`
	// Withheld explains a result a ResultPolicy withheld.
	Withheld *denial `json:"withheld"`
}

type denial struct {
	Hook   string `json:"hook"`
	Policy struct {
		Kind, Namespace, Name string
	} `json:"policy"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

func (g *gatewayProc) readFile(path string) callResult {
	g.t.Helper()
	return g.call("read_file", fmt.Sprintf(`{"path":%q}`, path))
}

// aliceToken is the callers' static token of the test gateways' caller "alice".
const aliceToken = "alice-integration-token-0123456789"

func (g *gatewayProc) call(tool, args string) callResult {
	g.t.Helper()
	body := fmt.Sprintf(`{"sessionId":"s-1","channelId":"test","senderId":"alice","tool":%q,"arguments":%s}`, tool, args)
	req, err := http.NewRequest(http.MethodPost, "http://"+g.addr+"/v1/tool-calls", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("Calling %s: %v", tool, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var r callResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		g.t.Fatalf("Decoding the reply to %s: %v", tool, err)
	}
	return r
}

// metric returns the value of one sample (name with its labels, as the
// text exposition format writes it) of the gateway's /metrics, or 0.
func (g *gatewayProc) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return f
		}
	}
	return 0
}

func (g *gatewayProc) revision() string {
	resp, err := http.Get("http://" + g.addr + "/v1/config")
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	var st struct {
		Revision string `json:"revision"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return st.Revision
}

func (g *gatewayProc) ready() bool {
	resp, err := http.Get("http://" + g.addr + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (g *gatewayProc) push(token string, cfg *gatewayconfig.Config) int {
	b, _ := json.Marshal(cfg)
	req, _ := http.NewRequest(http.MethodPut, "http://"+g.addr+"/v1/config", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 25*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) {
			ok, state := cond()
			last = state
			return ok, nil
		})
	if err != nil {
		t.Fatalf("Timed out waiting for %s; last: %s", what, last)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

func startController(t *testing.T, port int) *controller.Store {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	store := controller.NewStore()
	tokens := &controller.ServiceAccountTokens{Client: cs, Namespace: controllerNamespace, Name: controllerSA,
		Audience: gatewayconfig.PushAudience}
	gw := controller.GatewayReconciler{Pusher: &controller.Pusher{Tokens: tokens, Port: port}, Resync: 2 * time.Second}
	testEnv.StartManager(t, controller.CacheOptions(), func(mgr ctrl.Manager) error {
		return controller.SetupAll(mgr, store, gw, controller.DefaultApprovalRetention)
	})
	return store
}

// ensureControllerServiceAccount creates the controller's namespace and
// ServiceAccount once per API server.
func ensureControllerServiceAccount(t *testing.T) {
	t.Helper()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: controllerSA}},
	} {
		if err := testEnv.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func createGatewayPod(t *testing.T, ns, name, ip string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{policyv1alpha1.GatewayLabel: "main"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "toolhooks/gateway:dev"}}},
	}
	if err := testEnv.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "gateway", Ready: true, Image: "toolhooks/gateway:dev"}}}
	if err := testEnv.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := testEnv.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("Creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// TestGatewaysEnforcePushedPoliciesEndToEnd tells one story in order: push,
// enforce, deny with an Event, edit, restart, reject bad pushes, survive an
// invalid edit. Each step depends on the state the previous one left.
func TestGatewaysEnforcePushedPoliciesEndToEnd(t *testing.T) { //nolint:gocyclo // one ordered end-to-end story
	ctx := context.Background()
	const ns = "e2e-push"
	mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	ensureControllerServiceAccount(t)

	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("KEY=secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	kubeconfig := testEnv.AdminKubeconfig(t)
	pods := []*corev1.Pod{createGatewayPod(t, ns, "gw-0", "127.0.0.2"), createGatewayPod(t, ns, "gw-1", "127.0.0.3")}
	gws := make([]*gatewayProc, 0, len(pods))
	for _, pod := range pods {
		gws = append(gws, startGateway(t, pod.Status.PodIP, port, "--workspace", ws, "--kubeconfig", kubeconfig,
			"--controller-identity", controllerIdentity, "--pod-name", pod.Name, "--pod-namespace", ns, "--pod-uid", string(pod.UID)))
	}
	// Before any configuration a gateway denies everything and is not ready.
	if r := gws[0].readFile("notes.md"); r.Status != "denied" || gws[0].ready() {
		t.Fatalf("unconfigured gateway: status %s ready %v, want denied and not ready", r.Status, gws[0].ready())
	}

	store := startController(t, port)
	policy := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "coding"},
		Spec: policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: ws, Only: true},
			ForbiddenPathGlobs: []string{"**/.env"}}}
	mustCreate(t, policy)

	waitEnforced := func(want int32) {
		t.Helper()
		poll(t, fmt.Sprintf("policy generation %d enforced by %d gateways", policy.Generation, want), func() (bool, string) {
			if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(policy.Status.Conditions, policyv1alpha1.ConditionEnforced)
			if c == nil {
				return false, "no Enforced condition"
			}
			ok := c.Status == metav1.ConditionTrue && c.ObservedGeneration == policy.Generation && policy.Status.Gateways.Enforcing == want
			return ok, fmt.Sprintf("%s/%s enforcing=%d gen=%d/%d", c.Status, c.Reason, policy.Status.Gateways.Enforcing, c.ObservedGeneration, policy.Generation)
		})
	}
	waitEnforced(2)
	for _, g := range gws {
		if !g.ready() {
			t.Errorf("gateway %s not ready after its push", g.addr)
		}
	}

	// A denied call returns the structured denial, and the Event reaches kubectl describe.
	r := gws[1].readFile(".env")
	if r.Status != "denied" || r.Denial == nil || r.Denial.Policy.Name != "coding" || r.Denial.Policy.Kind != "AutonomyPolicy" ||
		r.Denial.Rule != "forbiddenPathGlobs" || r.Result != "Tool execution denied by hook: AutonomyPolicy/"+ns+"/coding" {
		t.Fatalf("read of .env = %+v / %+v, want a structured denial by AutonomyPolicy coding", r, r.Denial)
	}
	if ok := gws[0].readFile("notes.md"); ok.Status != "succeeded" || ok.Result != "hello\n" {
		t.Fatalf("read of notes.md = %+v, want succeeded with the file", ok)
	}
	poll(t, "kubectl describe to show the denial", func() (bool, string) {
		out, err := testEnv.Kubectl(t, "describe", "autonomypolicy", "-n", ns, "coding")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "ToolCallDenied") && strings.Contains(out, `"read_file"`) && strings.Contains(out, "alice"), out
	})

	// Edit: the new revision is enforced and status shows the new generation.
	before := gws[0].revision()
	policy.Spec.ForbiddenPathGlobs = append(policy.Spec.ForbiddenPathGlobs, "**/*.md")
	if err := testEnv.Client.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	waitEnforced(2)
	if gws[0].revision() == before {
		t.Error("gateway revision unchanged after the policy edit")
	}
	if r := gws[0].readFile("notes.md"); r.Status != "denied" {
		t.Errorf("after the edit notes.md should be forbidden, got %s", r.Status)
	}

	// Restart a gateway: the new process knows nothing; the controller re-pushes.
	gws[0].stop()
	gws[0].start()
	if gws[0].revision() != "" {
		t.Log("restarted gateway already has a revision (pushed very quickly)")
	}
	poll(t, "the restarted gateway to be re-pushed and ready", func() (bool, string) {
		want, _ := store.Get(client.ObjectKeyFromObject(pods[0]))
		rev := gws[0].revision()
		return want != nil && rev == want.Revision && gws[0].ready(), rev
	})

	// Pushes without the controller's identity are rejected.
	cfg, _ := store.Get(client.ObjectKeyFromObject(pods[0]))
	cs, err := kubernetes.NewForConfig(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder"}})
	tokenFor := func(nsName, sa, audience string) string {
		tr, err := cs.CoreV1().ServiceAccounts(nsName).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	stale := *cfg
	stale.IssuedAt = 1
	for name, tc := range map[string]struct {
		token string
		want  int
	}{
		"no token":        {"", http.StatusUnauthorized},
		"a garbage token": {"not-a-token", http.StatusUnauthorized},
		"the controller's token for another audience": {tokenFor(controllerNamespace, controllerSA, "https://kubernetes.default.svc"), http.StatusUnauthorized},
		"another service account's token":             {tokenFor(ns, "intruder", gatewayconfig.PushAudience), http.StatusForbidden},
		"a replayed stale configuration":              {tokenFor(controllerNamespace, controllerSA, gatewayconfig.PushAudience), http.StatusConflict},
	} {
		if got := gws[1].push(tc.token, &stale); got != tc.want {
			t.Errorf("push with %s: HTTP %d, want %d", name, got, tc.want)
		}
	}

	// An invalid edit leaves the last good list in force.
	good := gws[1].revision()
	policy.Spec.ForbiddenPathGlobs = []string{"/[unclosed"}
	if err := testEnv.Client.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	poll(t, "Accepted=False/InvalidGlob", func() (bool, string) {
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(policy.Status.Conditions, policyv1alpha1.ConditionAccepted)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == policyv1alpha1.ReasonInvalidGlob &&
			c.ObservedGeneration == policy.Generation, fmt.Sprint(c)
	})
	if got := gws[1].revision(); got != good {
		t.Errorf("revision changed from %s to %s after an invalid edit", good, got)
	}
	if r := gws[1].readFile(".env"); r.Status != "denied" {
		t.Errorf("after an invalid edit the last good policy must still deny .env, got %s", r.Status)
	}
	if c := meta.FindStatusCondition(policy.Status.Conditions, policyv1alpha1.ConditionEnforced); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Enforced = %+v, want False while the current generation does not compile", c)
	}
}

// TestPluginHookFromTheClusterDeniesThroughAGateway applies a PluginHook whose
// stdio transport runs a JavaScript plugin module (api.on handlers); the
// gateway starts it, the plugin denies shell, and the denial shows on the
// PluginHook.
func TestPluginHookFromTheClusterDeniesThroughAGateway(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for the plugin tests (.ci/run installs it)")
	}
	ctx := context.Background()
	const ns = "e2e-plugin"
	mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	ensureControllerServiceAccount(t)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "deny-shell.mjs")
	src := `export default function (api) {
  api.on("tool:before", (ctx) => ctx.toolName === "shell"
    ? { allow: false, reason: "shell needs a human approval" }
    : true);
}
`
	if err := os.WriteFile(plugin, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	pod := createGatewayPod(t, ns, "gw", "127.0.0.4")
	gw := startGateway(t, "127.0.0.4", port, "--workspace", dir, "--kubeconfig", testEnv.AdminKubeconfig(t),
		"--controller-identity", controllerIdentity, "--pod-name", pod.Name, "--pod-namespace", ns, "--pod-uid", string(pod.UID))
	startController(t, port)

	hook := &policyv1alpha1.PluginHook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approvals"},
		Spec: policyv1alpha1.PluginHookSpec{
			Events:        []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Transport:     policyv1alpha1.PluginTransport{Stdio: &policyv1alpha1.StdioTransport{Command: "node", Args: []string{plugin}}},
			FailurePolicy: policyv1alpha1.FailurePolicyFail,
		}}
	mustCreate(t, hook)
	poll(t, "the PluginHook to be enforced", func() (bool, string) {
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(hook), hook); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(hook.Status.Conditions, policyv1alpha1.ConditionEnforced)
		return c != nil && c.Status == metav1.ConditionTrue && gw.ready(), fmt.Sprint(c)
	})

	r := gw.call("shell", `{"command":"ls"}`)
	if r.Status != "denied" || r.Denial == nil || r.Denial.Policy.Kind != "PluginHook" || r.Denial.Policy.Name != "approvals" ||
		!strings.Contains(r.Denial.Reason, "shell needs a human approval") {
		t.Fatalf("shell call = %+v / %+v, want the plugin's denial with its reason", r, r.Denial)
	}
	if ok := gw.readFile("deny-shell.mjs"); ok.Status != "succeeded" {
		t.Fatalf("read_file = %+v, want the plugin to allow it", ok)
	}
	poll(t, "kubectl describe pluginhook to show the denial", func() (bool, string) {
		out, err := testEnv.Kubectl(t, "describe", "pluginhook", "-n", ns, "approvals")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "ToolCallDenied") && strings.Contains(out, "shell needs a human approval"), out
	})

	// A plugin that keeps failing: its failure policy (Ignore) applies, and once
	// its circuit opens the PluginHook reports Degraded.
	broken := filepath.Join(dir, "broken.mjs")
	if err := os.WriteFile(broken, []byte(`export default function (api) {
  api.on("tool:before", () => { throw new Error("approval backend down"); });
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	flaky := &policyv1alpha1.PluginHook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flaky"},
		Spec: policyv1alpha1.PluginHookSpec{
			Events:        []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Tools:         []string{"list_dir"},
			Transport:     policyv1alpha1.PluginTransport{Stdio: &policyv1alpha1.StdioTransport{Command: "node", Args: []string{broken}}},
			FailurePolicy: policyv1alpha1.FailurePolicyIgnore, // fail-open only when said explicitly
		}}
	mustCreate(t, flaky)
	poll(t, "the flaky PluginHook to be enforced", func() (bool, string) {
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(flaky), flaky); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(flaky.Status.Conditions, policyv1alpha1.ConditionEnforced)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprint(c)
	})
	for i := range 6 {
		if r := gw.call("list_dir", `{"path":"."}`); r.Status != "succeeded" {
			t.Fatalf("list_dir %d with a failing Ignore plugin = %+v, want it to proceed", i, r)
		}
	}
	poll(t, "Degraded=True on the flaky PluginHook", func() (bool, string) {
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(flaky), flaky); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(flaky.Status.Conditions, policyv1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == policyv1alpha1.ReasonCircuitOpen, fmt.Sprint(c)
	})
	if c := meta.FindStatusCondition(hook.Status.Conditions, policyv1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("the healthy plugin's Degraded = %+v, want False", c)
	}
}
