package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"
	"github.com/toolhooks/toolhooks/internal/controller"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// prometheusOperatorVersion is the prometheus-operator module whose
// ServiceMonitor CRD validates the chart's ServiceMonitors.
const prometheusOperatorVersion = "v0.85.0"

var chartDir = filepath.Join(testenv.RepoRoot(), "charts", "toolhooks")

// tool returns the pinned tool ./bin/NAME, failing the test when it is missing.
func tool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(testenv.RepoRoot(), "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing (%v): run make %s", path, err, name)
	}
	return path
}

// run runs a command and returns its stdout, and stderr in the error.
func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// helmTemplate renders the chart as release in namespace with --set values.
func helmTemplate(t *testing.T, release, namespace string, sets ...string) (string, error) {
	t.Helper()
	return run(tool(t, "helm"), withSets([]string{"template", release, chartDir, "--namespace", namespace, "--include-crds"}, sets)...)
}

// withSets appends a --set for each of sets to args.
func withSets(args, sets []string) []string {
	out := make([]string, 0, len(args)+2*len(sets))
	out = append(out, args...)
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// mustTemplate is helmTemplate failing the test on error.
func mustTemplate(t *testing.T, release, namespace string, sets ...string) string {
	t.Helper()
	out, err := helmTemplate(t, release, namespace, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// manifest is a list of rendered objects.
type manifest []unstructured.Unstructured

func parseManifest(t *testing.T, text string) manifest {
	t.Helper()
	var out manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Reading the rendered manifest: %v", err)
		}
		var obj map[string]any
		// Strict: a duplicated key (which parsers resolve differently) fails.
		if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
			t.Fatalf("Parsing the rendered manifest: %v\n%s", err, doc)
		}
		if obj != nil {
			out = append(out, unstructured.Unstructured{Object: obj})
		}
	}
}

// get returns the one object of kind and name, failing the test without it.
func (m manifest) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for i := range m {
		if m[i].GetKind() == kind && m[i].GetName() == name {
			return &m[i]
		}
	}
	t.Fatalf("The manifest has no %s %s; it has %v", kind, name, m.names())
	return nil
}

func (m manifest) names() []string {
	out := make([]string, 0, len(m))
	for _, o := range m {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func (m manifest) count(kind string) int {
	n := 0
	for _, o := range m {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

// into converts an object to a typed one.
func into[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatalf("Converting %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &out
}

// createNamespace creates a namespace for the test (which may already exist).
func createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := testEnv.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Creating namespace %s: %v", name, err)
	}
}

// kubectlApply applies text with the envtest kubectl (extra args such as
// --dry-run=server) and checks that it reports every object of want.
func kubectlApply(t *testing.T, text string, want manifest, extra ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := testEnv.Kubectl(t, append([]string{"apply", "-f", path}, extra...)...)
	if err != nil {
		t.Fatalf("kubectl apply %v: %v\n%s", extra, err, out)
	}
	var lines []string // one per object; kubectl also prints warnings
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "Warning: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("kubectl apply %v reported %d objects, want %d:\n%s", extra, len(lines), len(want), out)
	}
	for _, o := range want {
		if !strings.Contains(out, "/"+o.GetName()+" ") {
			t.Errorf("kubectl apply %v did not report %s/%s:\n%s", extra, o.GetKind(), o.GetName(), out)
		}
	}
}

// installServiceMonitorCRD installs prometheus-operator's ServiceMonitor CRD
// from its Go module (through the module proxy or cache).
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	mod := "github.com/prometheus-operator/prometheus-operator@" + prometheusOperatorVersion
	t.Logf("Fetching %s for the ServiceMonitor CRD", mod)
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir() // outside the module: go.mod is not touched
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s (needs the Go module proxy or cache): %v\n%s", mod, err, out)
	}
	var info struct{ Dir string }
	if err := yaml.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s printed no directory (%v):\n%s", mod, err, out)
	}
	crd := filepath.Join(info.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml")
	if out, err := testEnv.Kubectl(t, "apply", "--server-side", "-f", crd); err != nil {
		t.Fatalf("Installing the ServiceMonitor CRD: %v\n%s", err, out)
	}
	if out, err := testEnv.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com"); err != nil {
		t.Fatalf("Waiting for the ServiceMonitor CRD: %v\n%s", err, out)
	}
}

// allOptions turns on every optional part of the chart.
var allOptions = []string{
	"metrics.serviceMonitor.enabled=true",
	"metrics.serviceMonitor.labels.release=prometheus",
	"gateway.workspace.persistentVolumeClaim.enabled=true",
	"gateway.workspace.persistentVolumeClaim.storageClassName=standard",
	"gateway.workspace.persistentVolumeClaim.accessModes[0]=ReadWriteMany",
	"gateway.service.type=LoadBalancer",
	"gateway.podLabels.agent=coding",
	"gateway.extraArgs[0]=--tool-timeout=1m",
	"controller.extraArgs[0]=--zap-log-level=debug",
	"controller.replicas=2",
	"controller.image.tag=dev",
	"gateway.image.tag=dev",
	"imagePullSecrets[0].name=registry",
	"controller.serviceAccount.annotations.team=platform",
	"gateway.nodeSelector.kubernetes\\.io/os=linux",
	"gateway.extraEnv[0].name=GOCACHE",
	"gateway.extraEnv[0].value=/tmp/go-cache",
	"gateway.extraVolumes[0].name=plugins",
	"gateway.extraVolumes[0].configMap.name=toolhooks-plugins",
	"gateway.extraVolumeMounts[0].name=plugins",
	"gateway.extraVolumeMounts[0].mountPath=/plugins",
	"gateway.extraVolumeMounts[0].readOnly=true",
	"gateway.mcp.enabled=true",
	"gateway.auth.allowAnonymous=true",
	"gateway.mcp.deniedTools=hide",
	"gateway.mcp.upstreams[0].name=tickets",
	"gateway.mcp.upstreams[0].http.url=http://tickets.agents.svc:8080/mcp",
	"gateway.stateStore.redis.address=redis.data.svc:6379",
	"gateway.stateStore.redis.existingSecret=redis-auth",
	"gateway.stateStore.redis.usernameKey=username",
	"gateway.stateStore.redis.tls.enabled=true",
	"gateway.stateStore.redis.tls.caSecret=redis-ca",
	"gateway.stateStore.redis.tls.serverName=redis.data.svc",
}

func TestChartLintsStrictly(t *testing.T) {
	helm := tool(t, "helm")
	for name, sets := range map[string][]string{"defaults": nil, "all options": allOptions} {
		out, err := run(helm, withSets([]string{"lint", "--strict", chartDir}, sets)...)
		if err != nil {
			t.Errorf("helm lint with %s: %v\n%s", name, err, out)
		}
	}
}

func TestChartSchemaRejectsBadValues(t *testing.T) {
	cases := map[string]struct{ set, field string }{
		"string replicas":         {"gateway.replicas=two", "gateway.replicas"},
		"negative replicas":       {"controller.replicas=-1", "controller.replicas"},
		"port out of range":       {"gateway.port=70000", "gateway.port"},
		"unknown service type":    {"gateway.service.type=Internal", "gateway.service.type"},
		"unknown pull policy":     {"controller.image.pullPolicy=Sometimes", "controller.image.pullPolicy"},
		"leader election string":  {"controller.leaderElection=maybe", "controller.leaderElection"},
		"bad duration":            {"gateway.toolTimeout=soon", "gateway.toolTimeout"},
		"misspelt key":            {"gateway.replica=3", "replica"},
		"empty repository":        {"gateway.image.repository=", "gateway.image.repository"},
		"relative workspace":      {"gateway.workspace.mountPath=workspace", "gateway.workspace.mountPath"},
		"unknown mcp list mode":   {"gateway.mcp.deniedTools=show", "gateway.mcp.deniedTools"},
		"mcp upstream name":       {"gateway.mcp.upstreams[0].name=fs_1", "/gateway/mcp/upstreams/0/name"},
		"mcp token cache ttl":     {"gateway.mcp.tokenCacheTTL=-1m", "gateway.mcp.tokenCacheTTL"},
		"unknown sandbox network": {"gateway.sandbox.network=none", "gateway.sandbox.network"},
		"negative process bound":  {"gateway.sandbox.maxProcesses=-1", "gateway.sandbox.maxProcesses"},
		"bad memory quantity":     {"gateway.sandbox.maxMemory=lots", "gateway.sandbox.maxMemory"},
		"no mcp sessions":         {"gateway.mcp.maxSessions=0", "gateway.mcp.maxSessions"},
		"mcp sessions per caller": {"gateway.mcp.maxSessionsPerCaller=1.5", "gateway.mcp.maxSessionsPerCaller"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplate(t, "toolhooks", "toolhooks-system", c.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded, want a schema error:\n%.400s", c.set, out)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.field) {
				t.Errorf("helm template --set %s failed without a schema error naming %s:\n%s", c.set, c.field, msg)
			}
		})
	}
	// helm lint rejects them too.
	if out, err := run(tool(t, "helm"), "lint", "--strict", chartDir, "--set", "gateway.replicas=two"); err == nil {
		t.Errorf("helm lint accepted a string gateway.replicas:\n%s", out)
	}
}

func TestChartRendersObjectsTheAPIServerAccepts(t *testing.T) {
	installServiceMonitorCRD(t)
	generated, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRDs (%v)", err)
	}
	for _, c := range []struct {
		name, release, namespace string
		sets                     []string
		monitors                 int
	}{
		{"defaults", "toolhooks", "chart-defaults", nil, 0},
		{"all options", "agents", "chart-all-options", allOptions, 2},
		{"metrics off", "plain", "chart-metrics-off", []string{"metrics.enabled=false", "controller.leaderElection=false",
			"gateway.workspace.existingClaim=shared"}, 0},
		// Helm's longest release name: every derived name must still be valid.
		{"long release name", "a-release-name-as-long-as-helm-allows-it-to-be-12345", "chart-long-name", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := mustTemplate(t, c.release, c.namespace, c.sets...)
			m := parseManifest(t, text)
			if got := m.count("CustomResourceDefinition"); got != len(generated) {
				t.Errorf("rendered %d CRDs, want the %d toolhooks CRDs", got, len(generated))
			}
			if got := m.count("ServiceMonitor"); got != c.monitors {
				t.Errorf("rendered %d ServiceMonitors, want %d", got, c.monitors)
			}
			createNamespace(t, c.namespace)
			kubectlApply(t, text, m, "--dry-run=server")
		})
	}
}

// TestChartWorkspaceVolume checks the gateway's workspace: an emptyDir by
// default, else a claim the chart creates or an existing one.
func TestChartWorkspaceVolume(t *testing.T) {
	volume := func(m manifest) corev1.Volume {
		d := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway"))
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "workspace" {
				return v
			}
		}
		t.Fatal("the gateway has no workspace volume")
		return corev1.Volume{}
	}
	m := parseManifest(t, mustTemplate(t, "toolhooks", "ns"))
	if v := volume(m); v.EmptyDir == nil || m.count("PersistentVolumeClaim") != 0 {
		t.Errorf("default workspace = %+v, want an emptyDir and no claim", v.VolumeSource)
	}
	m = parseManifest(t, mustTemplate(t, "toolhooks", "ns", "gateway.workspace.persistentVolumeClaim.enabled=true",
		"gateway.workspace.persistentVolumeClaim.size=5Gi"))
	pvc := into[corev1.PersistentVolumeClaim](t, m.get(t, "PersistentVolumeClaim", "toolhooks-gateway-workspace"))
	if v := volume(m); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.Name ||
		pvc.Spec.Resources.Requests.Storage().String() != "5Gi" {
		t.Errorf("PVC workspace = %+v with claim %s %v", v.VolumeSource, pvc.Name, pvc.Spec.Resources.Requests)
	}
	m = parseManifest(t, mustTemplate(t, "toolhooks", "ns", "gateway.workspace.existingClaim=mine",
		"gateway.workspace.persistentVolumeClaim.enabled=true"))
	if v := volume(m); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "mine" || m.count("PersistentVolumeClaim") != 0 {
		t.Errorf("existing-claim workspace = %+v, want claim mine and none created", v.VolumeSource)
	}
}

// TestChartSandboxNetwork checks the gateway denies the processes its tools
// start the network unless gateway.sandbox.network allows it.
func TestChartSandboxNetwork(t *testing.T) {
	for set, want := range map[string]string{"": "deny", "gateway.sandbox.network=allow": "allow"} {
		var sets []string
		if set != "" {
			sets = []string{set}
		}
		m := parseManifest(t, mustTemplate(t, "toolhooks", "ns", sets...))
		gw := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway"))
		if got := argValue(t, gw.Spec.Template.Spec.Containers[0].Args, "sandbox-network"); got != want {
			t.Errorf("with %q the gateway runs with --sandbox-network=%s, want %s", set, got, want)
		}
	}
}

// TestChartSandboxLimits checks the per-program limits reach the gateway's
// flags, with the defaults of the values file.
func TestChartSandboxLimits(t *testing.T) {
	for set, want := range map[string][4]string{
		"": {"256", "2Gi", "5m", "1Gi"},
		"gateway.sandbox.maxProcesses=0,gateway.sandbox.maxMemory=512Mi,gateway.sandbox.maxCPUTime=1m,gateway.sandbox.maxFileSize=0": {
			"0", "512Mi", "1m", "0"},
	} {
		var sets []string
		if set != "" {
			sets = []string{set}
		}
		m := parseManifest(t, mustTemplate(t, "toolhooks", "ns", sets...))
		args := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec.Containers[0].Args
		for i, flag := range []string{"sandbox-max-processes", "sandbox-max-memory", "sandbox-max-cpu-time", "sandbox-max-file-size"} {
			if got := argValue(t, args, flag); got != want[i] {
				t.Errorf("with %q the gateway runs with --%s=%s, want %s", set, flag, got, want[i])
			}
		}
	}
}

// TestChartDecisionLog checks that the decision log is off unless enabled,
// and that its values reach the gateway's flags.
func TestChartDecisionLog(t *testing.T) {
	gatewayArgs := func(sets ...string) []string {
		m := parseManifest(t, mustTemplate(t, "toolhooks", "ns", sets...))
		return into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec.Containers[0].Args
	}
	if args := gatewayArgs(); slices.Contains(args, "--decision-log") {
		t.Errorf("the decision log is on by default: %q", args)
	}
	args := gatewayArgs("gateway.audit.decisionLog.enabled=true", "gateway.audit.decisionLog.maxBytes=4096",
		"gateway.audit.decisionLog.maskKeys={password,session_key}")
	if !slices.Contains(args, "--decision-log") || argValue(t, args, "decision-log-max-bytes") != "4096" ||
		argValue(t, args, "decision-log-mask-keys") != "password,session_key" {
		t.Errorf("decision log flags = %q", args)
	}
	if out, err := helmTemplate(t, "toolhooks", "ns", "gateway.audit.decisionLog.maxBytes=10"); err == nil ||
		!strings.Contains(err.Error(), "maxBytes") {
		t.Errorf("a 10-byte bound was accepted: %v\n%.300s", err, out)
	}
}

// TestChartRBACMatchesGeneratedRoles compares the chart's rendered rules with
// the roles controller-gen generates into config/rbac (and the hand-written
// push-token role), so neither can drift from the other.
func TestChartRBACMatchesGeneratedRoles(t *testing.T) {
	m := parseManifest(t, mustTemplate(t, "toolhooks", "toolhooks-system"))
	rules := func(kind, name string) []rbacv1.PolicyRule {
		if kind == "ClusterRole" {
			return into[rbacv1.ClusterRole](t, m.get(t, kind, name)).Rules
		}
		return into[rbacv1.Role](t, m.get(t, kind, name)).Rules
	}
	generated := func(file string) []rbacv1.PolicyRule {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		// The rules of every role in the file: gateway/role.yaml holds a
		// ClusterRole and a Role, push_token_role.yaml a Role and its binding.
		var out []rbacv1.PolicyRule
		for doc := range strings.SplitSeq(string(b), "\n---\n") {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("Parsing config/rbac/%s: %v", file, err)
			}
			if meta.Kind != "Role" && meta.Kind != "ClusterRole" {
				continue
			}
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatalf("Parsing config/rbac/%s: %v", file, err)
			}
			out = append(out, r.Rules...)
		}
		return out
	}
	for _, c := range []struct {
		file  string
		chart []rbacv1.PolicyRule
	}{
		// The controller's Secrets rule only in the release namespace.
		{"role.yaml", append(rules("ClusterRole", "toolhooks-manager-role"), rules("Role", "toolhooks-manager-role")...)},
		// The gateway's TokenReview rule is cluster-wide, its Events rule only
		// in the release namespace.
		{"gateway/role.yaml", append(rules("ClusterRole", "toolhooks-gateway-role"), rules("Role", "toolhooks-gateway-role")...)},
		{"push_token_role.yaml", rules("Role", "toolhooks-push-token-role")},
		{"leader_election_role.yaml", rules("Role", "toolhooks-leader-election-role")},
		{"metrics_auth_role.yaml", rules("ClusterRole", "toolhooks-metrics-auth-role")},
		{"metrics_reader_role.yaml", rules("ClusterRole", "toolhooks-metrics-reader")},
		{"toolcallapproval_approver_role.yaml", rules("ClusterRole", "toolhooks-approver")},
		{"toolcallapproval_viewer_role.yaml", rules("ClusterRole", "toolhooks-approval-viewer")},
	} {
		want := generated(c.file)
		if len(want) == 0 {
			t.Fatalf("config/rbac/%s has no rules", c.file)
		}
		if !reflect.DeepEqual(normalizeRules(c.chart), normalizeRules(want)) {
			t.Errorf("the chart's rules for config/rbac/%s drifted (run make manifests):\nchart: %+v\nconfig: %+v", c.file, c.chart, want)
		}
	}
	// The gateway's ClusterRole grants nothing namespaced: only the reviews
	// that authenticate its callers and check its approvers.
	for _, r := range rules("ClusterRole", "toolhooks-gateway-role") {
		tokens := slices.Equal(r.APIGroups, []string{"authentication.k8s.io"}) && slices.Equal(r.Resources, []string{"tokenreviews"})
		access := slices.Equal(r.APIGroups, []string{"authorization.k8s.io"}) && slices.Equal(r.Resources, []string{"subjectaccessreviews"})
		if !tokens && !access || !slices.Equal(r.Verbs, []string{"create"}) {
			t.Errorf("the gateway's ClusterRole grants %+v, want only creating tokenreviews and subjectaccessreviews", r)
		}
	}
}

// TestChartApprovalPolicyMatchesConfig checks the chart's admission policy
// is config/approval's, bound, and that the controller cannot approve.
func TestChartApprovalPolicyMatchesConfig(t *testing.T) {
	m := parseManifest(t, mustTemplate(t, "toolhooks", "toolhooks-system"))
	vap := m.get(t, "ValidatingAdmissionPolicy", "toolhooks-toolcallapproval-decisions")
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "approval", "validating_admission_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vap.Object["spec"], want["spec"]) {
		t.Errorf("the chart's admission policy drifted from config/approval (run make manifests):\nchart: %v\nconfig: %v", vap.Object["spec"], want["spec"])
	}
	binding := m.get(t, "ValidatingAdmissionPolicyBinding", "toolhooks-toolcallapproval-decisions")
	if spec, _ := binding.Object["spec"].(map[string]any); spec["policyName"] != vap.GetName() || fmt.Sprint(spec["validationActions"]) != "[Deny]" {
		t.Errorf("binding spec %v, want it to deny by %s", spec, vap.GetName())
	}
	for _, r := range into[rbacv1.ClusterRole](t, m.get(t, "ClusterRole", "toolhooks-manager-role")).Rules {
		if slices.Contains(r.Verbs, "approve") || slices.Contains(r.Verbs, "*") {
			t.Errorf("the controller's role grants %+v: it must not approve", r)
		}
	}
}

func normalizeRules(rules []rbacv1.PolicyRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		for _, l := range [][]string{r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, r.NonResourceURLs} {
			slices.Sort(l)
		}
		out = append(out, fmt.Sprintf("%q %q %q %q %q", r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, r.NonResourceURLs))
	}
	slices.Sort(out)
	return out
}

// deployment is appsv1.Deployment without importing apps for one use.
type deployment struct {
	Spec struct {
		Replicas *int32                 `json:"replicas"`
		Selector *metav1.LabelSelector  `json:"selector"`
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// argValue returns the value of --name=value in args.
func argValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no --%s in %q", name, args)
	return ""
}

// TestChartWorkloadsAgree checks that the controller and gateway Deployments
// wire to each other: the push identity, audience and port, the labels, and
// the hardened pod settings.
func TestChartWorkloadsAgree(t *testing.T) {
	for _, c := range []struct{ release, namespace, prefix string }{
		{"toolhooks", "toolhooks-system", "toolhooks"},
		{"team-a", "agents", "team-a-toolhooks"},
	} {
		t.Run(c.release, func(t *testing.T) {
			m := parseManifest(t, mustTemplate(t, c.release, c.namespace, "gateway.port=9090", "gateway.tls.port=9443"))
			ctrl := into[deployment](t, m.get(t, "Deployment", c.prefix+"-controller-manager"))
			gw := into[deployment](t, m.get(t, "Deployment", c.prefix+"-gateway"))
			svc := into[corev1.Service](t, m.get(t, "Service", c.prefix+"-gateway"))
			sa := m.get(t, "ServiceAccount", c.prefix+"-controller-manager").GetName()
			m.get(t, "ServiceAccount", c.prefix+"-gateway")

			cPod, gPod := ctrl.Spec.Template.Spec, gw.Spec.Template.Spec
			cArgs, gArgs := cPod.Containers[0].Args, gPod.Containers[0].Args
			if cPod.ServiceAccountName != sa || gPod.ServiceAccountName != c.prefix+"-gateway" {
				t.Errorf("service accounts = %s and %s", cPod.ServiceAccountName, gPod.ServiceAccountName)
			}
			if got := argValue(t, cArgs, "push-service-account"); got != c.namespace+"/"+sa {
				t.Errorf("controller pushes as %s, want %s/%s", got, c.namespace, sa)
			}
			if got, want := argValue(t, gArgs, "controller-identity"), "system:serviceaccount:"+c.namespace+":"+sa; got != want {
				t.Errorf("gateway accepts pushes from %s, want %s", got, want)
			}
			if a, b := argValue(t, cArgs, "push-audience"), argValue(t, gArgs, "push-audience"); a != b || a == "" {
				t.Errorf("push audiences differ: controller %q, gateway %q", a, b)
			}
			pushRole := into[rbacv1.Role](t, m.get(t, "Role", c.prefix+"-push-token-role"))
			if got := pushRole.Rules[0].ResourceNames; !slices.Equal(got, []string{sa}) {
				t.Errorf("the push-token role is for %v, want [%s]", got, sa)
			}
			if argValue(t, gArgs, "listen") != ":9090" || gPod.Containers[0].Ports[0].ContainerPort != 9090 || svc.Spec.Ports[0].Port != 9090 {
				t.Errorf("gateway port is not 9090 everywhere: listen %q, container %d, service %d",
					argValue(t, gArgs, "listen"), gPod.Containers[0].Ports[0].ContainerPort, svc.Spec.Ports[0].Port)
			}
			// The controller pushes to the HTTPS port.
			if argValue(t, cArgs, "gateway-port") != "9443" || argValue(t, gArgs, "tls-listen") != ":9443" ||
				len(gPod.Containers[0].Ports) != 2 || gPod.Containers[0].Ports[1].ContainerPort != 9443 ||
				len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Port != 9443 {
				t.Errorf("gateway TLS port is not 9443 everywhere: controller %q, tls-listen %q, container %v, service %v",
					argValue(t, cArgs, "gateway-port"), argValue(t, gArgs, "tls-listen"), gPod.Containers[0].Ports, svc.Spec.Ports)
			}
			if !slices.Contains(cArgs, "--leader-elect") {
				t.Errorf("controller args %q lack --leader-elect", cArgs)
			}
			if _, ok := gw.Spec.Template.Labels["toolhooks.dev/gateway"]; !ok {
				t.Errorf("gateway pods %v lack the toolhooks.dev/gateway label the controller finds them by", gw.Spec.Template.Labels)
			}
			for name, d := range map[string]*deployment{"controller": ctrl, "gateway": gw} {
				sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("%s selector %v does not match its pods %v", name, d.Spec.Selector, d.Spec.Template.Labels)
				}
				checkHardened(t, name, d.Spec.Template.Spec)
			}
			sel := metav1.SetAsLabelSelector(svc.Spec.Selector)
			if s, _ := metav1.LabelSelectorAsSelector(sel); !s.Matches(labels.Set(gw.Spec.Template.Labels)) ||
				s.Matches(labels.Set(ctrl.Spec.Template.Labels)) {
				t.Errorf("the gateway Service selector %v must select the gateway pods only", svc.Spec.Selector)
			}
			mounts := map[string]string{}
			for _, vm := range gPod.Containers[0].VolumeMounts {
				mounts[vm.MountPath] = vm.Name
			}
			if ws := argValue(t, gArgs, "workspace"); mounts[ws] != "workspace" || mounts["/tmp"] != "tmp" {
				t.Errorf("gateway mounts %v, want workspace at %s and tmp at /tmp", mounts, ws)
			}
			env := map[string]string{}
			for _, e := range gPod.Containers[0].Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					env[e.Name] = e.ValueFrom.FieldRef.FieldPath
				}
			}
			if want := map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"}; !reflect.DeepEqual(env, want) {
				t.Errorf("gateway downward-API env = %v, want %v", env, want)
			}
		})
	}
}

// checkHardened checks a pod runs non-root on a read-only root filesystem
// without privileges, with probes.
func checkHardened(t *testing.T, name string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s pod security context = %+v", name, psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s container %s security context = %+v", name, c.Name, sc)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s container %s lacks probes", name, c.Name)
		}
		if len(c.Command) != 0 {
			t.Errorf("%s container %s overrides the image entrypoint with %q", name, c.Name, c.Command)
		}
	}
}

// impersonate returns a clientset acting as the ServiceAccount.
func impersonate(t *testing.T, namespace, name string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestChartRBACLetsThePushHandshakeWorkAndNothingMore installs the chart's
// objects for real and acts as its ServiceAccounts: the controller mints its
// push token with the project's token source, the gateway reviews it with the
// project's authenticator and accepts it, and each is denied what it must not do.
func TestChartRBACLetsThePushHandshakeWorkAndNothingMore(t *testing.T) {
	const release, ns = "rbac-check", "chart-rbac"
	m := parseManifest(t, mustTemplate(t, release, ns))
	var objects manifest
	for _, o := range m {
		if o.GetKind() != "CustomResourceDefinition" {
			objects = append(objects, o)
		}
	}
	var text strings.Builder
	for _, o := range objects {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString("---\n")
		text.Write(b)
	}
	createNamespace(t, ns)
	kubectlApply(t, text.String(), objects)
	t.Cleanup(func() {
		for _, o := range objects {
			if o.GetNamespace() == "" { // cluster-scoped: the namespace does not take them along
				if out, err := testEnv.Kubectl(t, "delete", strings.ToLower(o.GetKind()), o.GetName()); err != nil {
					t.Logf("Deleting %s/%s: %v\n%s", o.GetKind(), o.GetName(), err, out)
				}
			}
		}
	})

	prefix := release + "-toolhooks"
	ctrlSA, gwSA := prefix+"-controller-manager", prefix+"-gateway"
	gw := into[deployment](t, m.get(t, "Deployment", prefix+"-gateway"))
	gArgs := gw.Spec.Template.Spec.Containers[0].Args
	ctrl := into[deployment](t, m.get(t, "Deployment", prefix+"-controller-manager"))
	cArgs := ctrl.Spec.Template.Spec.Containers[0].Args
	saNS, saName, _ := strings.Cut(argValue(t, cArgs, "push-service-account"), "/")

	ctx := context.Background()
	controllerCS, gatewayCS := impersonate(t, ns, ctrlSA), impersonate(t, ns, gwSA)
	// RBAC takes effect once the authorizer's informers see the new bindings.
	var token string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		token, err = (&controller.ServiceAccountTokens{Client: controllerCS, Namespace: saNS, Name: saName,
			Audience: argValue(t, cArgs, "push-audience")}).Token(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("The controller cannot mint its push token under the chart's RBAC: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	review := &tokenreview.TokenReview{Client: gatewayCS.AuthenticationV1().TokenReviews(),
		Audience: argValue(t, gArgs, "push-audience"), Allowed: []string{argValue(t, gArgs, "controller-identity")}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://gateway/v1/config", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	user, err := review.Authenticate(req)
	if err != nil {
		t.Fatalf("The gateway rejected the controller's push token: %v", err)
	}
	if want := "system:serviceaccount:" + ns + ":" + ctrlSA; user != want {
		t.Errorf("the push came from %s, want %s", user, want)
	}

	denied := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
	_, err = controllerCS.CoreV1().ServiceAccounts(ns).CreateToken(ctx, gwSA, tokenRequest(), metav1.CreateOptions{})
	denied("the controller minting the gateway's token", err)
	_, err = gatewayCS.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ctrlSA, tokenRequest(), metav1.CreateOptions{})
	denied("the gateway minting the controller's token", err)
	_, err = gatewayCS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	denied("the gateway listing pods", err)
	_, err = gatewayCS.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	denied("the gateway listing secrets", err)
	_, err = gatewayCS.CoreV1().ConfigMaps(ns).Get(ctx, "anything", metav1.GetOptions{})
	denied("the gateway reading configmaps", err)
	_, err = controllerCS.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	denied("the controller listing secrets outside its namespace", err)

	// The controller keeps the gateway TLS Secrets in its own namespace only.
	for _, c := range []struct {
		verb, namespace string
		allowed         bool
	}{
		{"get", ns, true}, {"list", ns, true}, {"watch", ns, true}, {"update", ns, true}, {"create", ns, true},
		{"get", "default", false}, {"update", "default", false}, {"delete", ns, false},
	} {
		out, err := testEnv.Kubectl(t, "auth", "can-i", c.verb, "secrets", "-n", c.namespace,
			"--as", "system:serviceaccount:"+ns+":"+ctrlSA)
		if got := strings.TrimSpace(out) == "yes" && err == nil; got != c.allowed {
			t.Errorf("controller may %s Secrets in %s: %v (%q), want %v", c.verb, c.namespace, got, out, c.allowed)
		}
	}

	// The gateway records Events in its own namespace only.
	for _, c := range []struct {
		namespace string
		allowed   bool
	}{{ns, true}, {"default", false}} {
		out, err := testEnv.Kubectl(t, "auth", "can-i", "create", "events.events.k8s.io", "-n", c.namespace,
			"--as", "system:serviceaccount:"+ns+":"+gwSA)
		if got := strings.TrimSpace(out) == "yes" && err == nil; got != c.allowed {
			t.Errorf("gateway may create Events in %s: %v (%q), want %v", c.namespace, got, out, c.allowed)
		}
	}
}

func tokenRequest() *authnv1.TokenRequest {
	return &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{"toolhooks.dev/gateway-config"}}}
}

// TestChartCRDsAreTheGeneratedOnes checks the chart ships exactly the CRDs
// controller-gen writes into config/crd/bases (make manifests copies them).
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	bases := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")
	want, err := filepath.Glob(filepath.Join(bases, "*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs in %s (%v)", bases, err)
	}
	got, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if len(got) != len(want) {
		t.Errorf("the chart has %d CRD files, config/crd/bases %d (run make manifests)", len(got), len(want))
	}
	for _, w := range want {
		a, _ := os.ReadFile(w)
		b, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(w)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("charts/toolhooks/crds/%s differs from config/crd/bases (run make manifests): %v", filepath.Base(w), err)
		}
	}
}

// TestChartMountsStaticTokensAndTheOIDCCA: a Secret of static caller tokens
// and a ConfigMap with the OIDC issuer's CA are mounted read-only where the
// gateway's flags point.
func TestChartMountsStaticTokensAndTheOIDCCA(t *testing.T) {
	m := parseManifest(t, mustTemplate(t, "toolhooks", "ns", "gateway.auth.staticTokensSecret=dev-tokens",
		"gateway.auth.oidc.issuerURL=https://issuer.example", "gateway.auth.oidc.audience=toolhooks",
		"gateway.auth.oidc.caConfigMap=issuer-ca"))
	gw := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway"))
	spec := gw.Spec.Template.Spec
	args := spec.Containers[0].Args
	for flag, want := range map[string]string{"auth-tokens-file": "/etc/toolhooks/auth/tokens.yaml", "auth-oidc-ca-file": "/etc/toolhooks/oidc/ca.crt",
		// A value ending in ':' stays a string, not a YAML key.
		"auth-oidc-username-prefix": "oidc:", "auth-oidc-groups-prefix": "oidc:", "auth-oidc-issuer-url": "https://issuer.example"} {
		if got := argValue(t, args, flag); got != want {
			t.Errorf("--%s=%s, want %s", flag, got, want)
		}
	}
	mounts := map[string]string{}
	for _, vm := range spec.Containers[0].VolumeMounts {
		if vm.ReadOnly {
			mounts[vm.Name] = vm.MountPath
		}
	}
	if mounts["auth-tokens"] != "/etc/toolhooks/auth" || mounts["oidc-ca"] != "/etc/toolhooks/oidc" {
		t.Errorf("read-only mounts %v", mounts)
	}
	found := 0
	for _, v := range spec.Volumes {
		switch {
		case v.Name == "auth-tokens" && v.Secret != nil && v.Secret.SecretName == "dev-tokens" && v.Secret.Items[0].Key == "tokens.yaml":
			found++
		case v.Name == "oidc-ca" && v.ConfigMap != nil && v.ConfigMap.Name == "issuer-ca" && v.ConfigMap.Items[0].Key == "ca.crt":
			found++
		}
	}
	if found != 2 {
		t.Errorf("volumes %+v: want the tokens Secret and the CA ConfigMap", spec.Volumes)
	}
	// Without them, neither flag nor volume.
	plain := into[deployment](t, parseManifest(t, mustTemplate(t, "toolhooks", "ns")).get(t, "Deployment", "toolhooks-gateway"))
	for _, a := range plain.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--auth-tokens-file") || strings.HasPrefix(a, "--auth-oidc-ca-file") {
			t.Errorf("a default install passes %s", a)
		}
	}
}

// gatewayTLSVolume returns the Secret the gateway pods mount their key pair
// from, checking the flags read it from the mount.
func gatewayTLSVolume(t *testing.T, pod corev1.PodSpec) string {
	t.Helper()
	args := pod.Containers[0].Args
	var dir string
	for _, vm := range pod.Containers[0].VolumeMounts {
		if vm.Name == "tls" {
			dir = vm.MountPath
		}
	}
	if dir == "" || argValue(t, args, "tls-cert-file") != dir+"/tls.crt" || argValue(t, args, "tls-key-file") != dir+"/tls.key" {
		t.Fatalf("gateway TLS flags %q do not read the tls volume mounted at %q", args, dir)
	}
	for _, v := range pod.Volumes {
		if v.Name == "tls" && v.Secret != nil {
			keys := []string{}
			for _, it := range v.Secret.Items {
				keys = append(keys, it.Key)
			}
			if !slices.Equal(keys, []string{"tls.crt", "tls.key"}) {
				t.Errorf("the gateway mounts keys %v of its TLS Secret, want tls.crt and tls.key only (never a CA key)", keys)
			}
			return v.Secret.SecretName
		}
	}
	t.Fatal("no tls Secret volume on the gateway pods")
	return ""
}

func TestChartGatewayTLS(t *testing.T) {
	t.Run("a controller-managed CA by default", func(t *testing.T) {
		m := parseManifest(t, mustTemplate(t, "toolhooks", "agents"))
		cArgs := into[deployment](t, m.get(t, "Deployment", "toolhooks-controller-manager")).Spec.Template.Spec.Containers[0].Args
		gPod := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec
		secret := gatewayTLSVolume(t, gPod)
		if secret != "toolhooks-gateway-tls" || argValue(t, cArgs, "gateway-tls-secret") != secret {
			t.Errorf("gateway mounts %q, controller keeps %q", secret, argValue(t, cArgs, "gateway-tls-secret"))
		}
		ca := argValue(t, cArgs, "gateway-ca-secret")
		if ca == secret || argValue(t, cArgs, "manage-gateway-ca") != "true" || argValue(t, cArgs, "gateway-tls") != "true" {
			t.Errorf("controller TLS flags %q: want a managed CA in its own Secret", cArgs)
		}
		// Both Secrets belong to the release (an uninstall removes them), empty.
		for _, name := range []string{ca, secret} {
			s := into[corev1.Secret](t, m.get(t, "Secret", name))
			if len(s.Data) != 0 || len(s.StringData) != 0 {
				t.Errorf("Secret %s renders data; the controller writes it", name)
			}
		}
		server := argValue(t, cArgs, "gateway-tls-server-name")
		if server != "toolhooks-gateway.agents.svc" ||
			!slices.Contains(strings.Split(argValue(t, cArgs, "gateway-tls-dns-names"), ","), "toolhooks-gateway.agents.svc.cluster.local") {
			t.Errorf("server name %q, DNS names %q: want the gateway Service's names", server, argValue(t, cArgs, "gateway-tls-dns-names"))
		}
		if m.count("Certificate") != 0 {
			t.Error("a Certificate rendered without cert-manager")
		}
	})
	t.Run("cert-manager", func(t *testing.T) {
		m := parseManifest(t, mustTemplate(t, "toolhooks", "agents", "gateway.tls.certManager.enabled=true",
			"gateway.tls.certManager.issuerRef.name=cluster-ca", "gateway.tls.certManager.issuerRef.kind=ClusterIssuer"))
		cArgs := into[deployment](t, m.get(t, "Deployment", "toolhooks-controller-manager")).Spec.Template.Spec.Containers[0].Args
		gPod := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec
		cert := m.get(t, "Certificate", "toolhooks-gateway")
		spec, _ := cert.Object["spec"].(map[string]any)
		secret := gatewayTLSVolume(t, gPod)
		if spec["secretName"] != secret || argValue(t, cArgs, "gateway-tls-secret") != secret {
			t.Errorf("Certificate secretName %v, gateway mounts %q, controller reads %q", spec["secretName"], secret,
				argValue(t, cArgs, "gateway-tls-secret"))
		}
		var dnsNames []string
		for _, n := range spec["dnsNames"].([]any) {
			dnsNames = append(dnsNames, n.(string))
		}
		if !slices.Contains(dnsNames, argValue(t, cArgs, "gateway-tls-server-name")) {
			t.Errorf("Certificate names %v lack the controller's server name %q", dnsNames, argValue(t, cArgs, "gateway-tls-server-name"))
		}
		issuer, _ := spec["issuerRef"].(map[string]any)
		if issuer["name"] != "cluster-ca" || issuer["kind"] != "ClusterIssuer" || issuer["group"] != "cert-manager.io" {
			t.Errorf("issuerRef %v", issuer)
		}
		if argValue(t, cArgs, "manage-gateway-ca") != "false" || slices.ContainsFunc(cArgs, func(a string) bool {
			return strings.HasPrefix(a, "--gateway-ca-secret")
		}) {
			t.Errorf("controller args %q: with cert-manager it must not manage a CA", cArgs)
		}
		if m.count("Secret") != 0 {
			t.Errorf("%d Secrets rendered; cert-manager creates the one it issues", m.count("Secret"))
		}
		if out, err := helmTemplate(t, "toolhooks", "agents", "gateway.tls.certManager.enabled=true"); err == nil ||
			!strings.Contains(out+err.Error(), "issuerRef.name") {
			t.Errorf("cert-manager without an issuer rendered: %v\n%.300s", err, out)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		m := parseManifest(t, mustTemplate(t, "toolhooks", "agents", "gateway.tls.enabled=false"))
		cArgs := into[deployment](t, m.get(t, "Deployment", "toolhooks-controller-manager")).Spec.Template.Spec.Containers[0].Args
		gPod := into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec
		if argValue(t, cArgs, "gateway-tls") != "false" || argValue(t, cArgs, "gateway-port") != "8080" {
			t.Errorf("controller args %q: want plain pushes to 8080", cArgs)
		}
		if slices.ContainsFunc(gPod.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--tls-") }) ||
			m.count("Secret") != 0 || m.count("Certificate") != 0 {
			t.Errorf("TLS rendered while disabled: gateway args %q", gPod.Containers[0].Args)
		}
	})
}

// TestChartGivesTheGatewayATokenForPlugins checks the gateway's credential
// for HTTP plugins: a projected ServiceAccount token bound to the plugin
// audience, mounted read-only and named by --plugin-token-file; none when
// gateway.pluginAuth.enabled is false.
func TestChartGivesTheGatewayATokenForPlugins(t *testing.T) {
	const file = "/var/run/secrets/toolhooks.dev/plugin-token/token"
	for _, c := range []struct {
		name     string
		sets     []string
		audience string
		seconds  int64
	}{
		{"defaults", nil, "toolhooks-plugins", 3600},
		{"own audience", []string{"gateway.pluginAuth.audience=approvals.example", "gateway.pluginAuth.expirationSeconds=900"}, "approvals.example", 900},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw := into[deployment](t, parseManifest(t, mustTemplate(t, "toolhooks", "ns", c.sets...)).get(t, "Deployment", "toolhooks-gateway"))
			spec := gw.Spec.Template.Spec
			if got := argValue(t, spec.Containers[0].Args, "plugin-token-file"); got != file {
				t.Errorf("--plugin-token-file=%s, want %s", got, file)
			}
			var mounted bool
			for _, vm := range spec.Containers[0].VolumeMounts {
				mounted = mounted || (vm.Name == "plugin-token" && vm.ReadOnly && vm.MountPath+"/token" == file)
			}
			if !mounted {
				t.Errorf("no read-only plugin-token mount holding %s: %+v", file, spec.Containers[0].VolumeMounts)
			}
			var src *corev1.ServiceAccountTokenProjection
			for _, v := range spec.Volumes {
				if v.Name == "plugin-token" && v.Projected != nil && len(v.Projected.Sources) == 1 {
					src = v.Projected.Sources[0].ServiceAccountToken
				}
			}
			if src == nil || src.Path != "token" || src.Audience != c.audience || src.ExpirationSeconds == nil || *src.ExpirationSeconds != c.seconds {
				t.Fatalf("plugin-token volume projects %+v, want a token for %q lasting %ds", src, c.audience, c.seconds)
			}
		})
	}
	off := into[deployment](t, parseManifest(t, mustTemplate(t, "toolhooks", "ns", "gateway.pluginAuth.enabled=false")).get(t, "Deployment", "toolhooks-gateway"))
	for _, a := range off.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--plugin-token-file") {
			t.Errorf("with pluginAuth disabled the gateway still gets %s", a)
		}
	}
	for _, v := range off.Spec.Template.Spec.Volumes {
		if v.Name == "plugin-token" {
			t.Errorf("with pluginAuth disabled the gateway still gets the plugin-token volume")
		}
	}
	for set, field := range map[string]string{
		"gateway.pluginAuth.expirationSeconds=60": "gateway.pluginAuth.expirationSeconds",
		"gateway.pluginAuth.audience=":            "gateway.pluginAuth.audience",
	} {
		if _, err := helmTemplate(t, "toolhooks", "ns", set); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("--set %s: %v, want a schema error naming %s", set, err, field)
		}
	}
}
