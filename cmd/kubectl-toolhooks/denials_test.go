package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/cli"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayk8s"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/standalone"
	"github.com/toolhooks/toolhooks/internal/testenv"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// denialPolicies are applied both to the API server and, as files, to the
// gateway. WORKSPACE is replaced by the gateway's workspace.
const denialPolicies = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: coding, namespace: agents}
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env"]
  shell: {allow: true, allowedCommands: ["git status"]}
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: shell-dryrun, namespace: agents}
spec:
  tools: {deny: ["shell"]}
  enforcementAction: Warn
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget, namespace: agents}
spec:
  maxToolCalls: 2
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: quiet, namespace: agents}
spec:
  maxToolCalls: 1000
`

// TestDenialsFromGatewayEvents runs a real gateway whose denials become
// Events through the gatewayk8s sink on an envtest API server, then lists
// them with the denials command.
func TestDenialsFromGatewayEvents(t *testing.T) {
	kubeconfig := startDenialsEnv(t)
	t.Run("one policy as a table", func(t *testing.T) { denialsTable(t, kubeconfig) })
	t.Run("json, KIND NAME form and short names", func(t *testing.T) { denialsJSON(t, kubeconfig) })
	t.Run("every policy of the namespace, and of a kind", func(t *testing.T) { denialsAll(t, kubeconfig) })
	t.Run("no denials", func(t *testing.T) { denialsNone(t, kubeconfig) })
	t.Run("bad input", func(t *testing.T) { denialsBadInput(t, kubeconfig) })
}

// startDenialsEnv starts envtest and a gateway whose denials become Events
// through the gatewayk8s sink, makes the calls the tests list, waits for
// their Events and returns an admin kubeconfig.
func startDenialsEnv(t *testing.T) string {
	t.Helper()
	env := testenv.Start(t)
	kubeconfig := env.AdminKubeconfig(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	policies := strings.ReplaceAll(denialPolicies, "WORKSPACE", ws)
	for doc := range strings.SplitSeq(policies, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("Creating %s: %v", u.GetName(), err)
		}
	}
	dir := t.TempDir()
	writeFile(t, dir, "policies.yaml", policies)

	sink, err := gatewayk8s.NewEvents(ctx, cs, gatewayk8s.EventSinkOptions{
		Pod: corev1.ObjectReference{Namespace: "agents", Name: "gateway-7d9f-abcde"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Stop)
	// Each sender is a caller with its own static token.
	tokens := "tokens:\n"
	for _, who := range []string{"alice", "bob", "carol", "dave"} {
		tokens += "- {identity: " + who + ", token: " + who + "-token-0123456789}\n"
	}
	callers, err := authn.ParseStaticTokens([]byte(tokens))
	if err != nil {
		t.Fatal(err)
	}
	s, err := gateway.New(gateway.Options{Workspace: ws, DenialSink: sink, Logger: slog.New(slog.DiscardHandler),
		Audit: audit.SinkFunc(func(context.Context, audit.Record) error { return nil }), Callers: &authn.Request{Tokens: callers}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := standalone.Load(ctx, s, standalone.Options{Dir: dir, Namespace: "agents"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	decide := func(session, sender, tool, args string, wantAllowed bool) {
		t.Helper()
		body := fmt.Sprintf(`{"sessionId":%q,"tool":%q,"arguments":%s}`, session, tool, args)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/decisions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+sender+"-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var d wire.DecisionResponse
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.Allowed != wantAllowed {
			t.Fatalf("%s %s: allowed %v, want %v (%+v)", tool, args, d.Allowed, wantAllowed, d.Denial)
		}
	}
	decide("s1", "alice", "read_file", `{"path":"config/.env"}`, false)
	decide("s1", "alice", "read_file", `{"path":"config/.env"}`, false)
	decide("s2", "bob", "shell", `{"command":"git status"}`, true) // shell-dryrun warns
	decide("s3", "carol", "read_file", `{"path":"a.txt"}`, true)
	decide("s3", "carol", "read_file", `{"path":"b.txt"}`, true)
	decide("s3", "carol", "read_file", `{"path":"c.txt"}`, false) // over budget
	decide("s4", "dave", "list_dir", `{"path":"config/.env"}`, false)

	// The events broadcaster writes asynchronously: wait until the four
	// Events are there, the repeated denial counted as a series of two and
	// the same policy's denial of another tool kept apart with its own note.
	waitFor(t, func() (bool, string) {
		recs, err := cli.ListDenials(ctx, cs, dyn, cli.DenialQuery{Namespace: "agents"})
		if err != nil {
			return false, err.Error()
		}
		byTool := map[string]cli.DenialRecord{}
		for _, r := range recs {
			byTool[r.Policy.Name+"/"+r.Tool] = r
		}
		return len(recs) == 4 && byTool["coding/read_file"].Count == 2 && byTool["coding/list_dir"].Session == "s4",
			fmt.Sprintf("%+v", recs)
	})
	return kubeconfig
}

func denialsTable(t *testing.T, kubeconfig string) {
	r := runCLI(t, "denials", "autonomypolicy/coding", "-n", "agents", "--kubeconfig", kubeconfig)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and a row per tool:\n%s", r.stdout)
	}
	if strings.Contains(lines[1], "list_dir") { // newest first
		lines[1], lines[2] = lines[2], lines[1]
	}
	if f := strings.Fields(lines[2]); len(f) < 8 || f[5] != "list_dir" || f[6] != "s4" || f[7] != "dave" {
		t.Errorf("row %q, want the list_dir denial of session s4 by dave", lines[2])
	}
	for _, h := range []string{"LAST SEEN", "COUNT", "ACTION", "POLICY", "GATEWAY", "TOOL", "SESSION", "SENDER", "RULE", "REASON"} {
		if !strings.Contains(lines[0], h) {
			t.Errorf("header %q lacks %s", lines[0], h)
		}
	}
	f := strings.Fields(lines[1])
	want := []string{"2", "Denied", "autonomypolicy/coding", "gateway-7d9f-abcde", "read_file", "s1", "alice", "forbiddenPathGlobs"}
	if len(f) < 2+len(want) || strings.Join(f[1:1+len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("row %q, want the fields after the age to start with %q", lines[1], want)
	}
	if !strings.Contains(lines[1], "config/.env") {
		t.Errorf("row %q does not give the reason", lines[1])
	}
}

func denialsJSON(t *testing.T, kubeconfig string) {
	for _, args := range [][]string{{"ap", "coding"}, {"AutonomyPolicy/coding"}, {"autonomypolicies.policy.toolhooks.dev/coding"}} {
		r := runCLI(t, append(append([]string{"denials"}, args...), "-n", "agents", "--kubeconfig", kubeconfig, "-o", "json")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		var recs []cli.DenialRecord
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, r.stdout)
		}
		if len(recs) != 2 {
			t.Fatalf("%v: %d records, want one per tool", args, len(recs))
		}
		got := recs[0]
		if got.Tool != "read_file" {
			got = recs[1]
		}
		if got.Count != 2 || got.Action != "Denied" || got.Tool != "read_file" || got.Session != "s1" || got.Sender != "alice" ||
			got.Rule != "forbiddenPathGlobs" || got.Gateway != "gateway-7d9f-abcde" ||
			got.Policy != (cli.PolicyObject{Kind: "AutonomyPolicy", Namespace: "agents", Name: "coding"}) ||
			time.Since(got.LastSeen) > time.Hour || time.Since(got.LastSeen) < 0 {
			t.Errorf("%v: %+v", args, got)
		}
	}
}

func denialsAll(t *testing.T, kubeconfig string) {
	r := runCLI(t, "denials", "-n", "agents", "--kubeconfig", kubeconfig, "-o", "json")
	var recs []cli.DenialRecord
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || r.code != 0 {
		t.Fatalf("exit %d %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	got := map[string]cli.DenialRecord{}
	for _, rec := range recs {
		got[rec.Policy.Kind+"/"+rec.Policy.Name] = rec
	}
	if w := got["AutonomyPolicy/shell-dryrun"]; w.Action != "Warned" || w.Tool != "shell" || w.Session != "s2" || w.Rule != "toolDeny" {
		t.Errorf("warn-mode record %+v", w)
	}
	if b := got["ContractPolicy/budget"]; b.Action != "Denied" || b.Session != "s3" || b.Sender != "carol" || b.Count != 1 {
		t.Errorf("budget record %+v", b)
	}
	if len(recs) != 4 {
		t.Errorf("%d records, want 4: %+v", len(recs), recs)
	}
	r = runCLI(t, "denials", "ctp", "-n", "agents", "--kubeconfig", kubeconfig)
	if r.code != 0 || !strings.Contains(r.stdout, "contractpolicy/budget") || strings.Contains(r.stdout, "autonomypolicy/") {
		t.Errorf("ctp: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "denials", "-n", "agents", "--kubeconfig", kubeconfig, "--limit", "1")
	if n := strings.Count(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || n != 1 {
		t.Errorf("--limit 1: exit %d, %d rows\n%s", r.code, n, r.stdout)
	}
}

func denialsNone(t *testing.T, kubeconfig string) {
	r := runCLI(t, "denials", "contractpolicy/quiet", "-n", "agents", "--kubeconfig", kubeconfig)
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No denials found for contractpolicy/quiet in namespace agents") {
		t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "denials", "contractpolicy/quiet", "-n", "agents", "--kubeconfig", kubeconfig, "-o", "json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("json: exit %d stdout %q", r.code, r.stdout)
	}
	r = runCLI(t, "denials", "ap/coding", "-n", "agents", "--kubeconfig", kubeconfig, "--since", "1ns")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "within 1ns") {
		t.Errorf("--since 1ns: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "denials", "ap/coding", "-n", "default", "--kubeconfig", kubeconfig)
	if r.code != 2 || !strings.Contains(r.stderr, `autonomypolicy "coding" not found in namespace "default"`) {
		t.Errorf("other namespace: exit %d stderr %q", r.code, r.stderr)
	}
}

func denialsBadInput(t *testing.T, kubeconfig string) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"pods/coding"}, `unknown kind "pods"`},
		{[]string{"deployment", "coding"}, `unknown kind "deployment"`},
		{[]string{"ap/missing"}, `autonomypolicy "missing" not found in namespace "agents"`},
		{[]string{"ap/"}, "names no policy"},
		{[]string{"ap/coding", "x"}, "not both"},
		{[]string{"ap/coding", "-o", "yaml"}, `--output "yaml"`},
		{[]string{"ap/coding", "--context", "nowhere"}, "nowhere"},
	}
	for _, c := range cases {
		r := runCLI(t, append(append([]string{"denials"}, c.args...), "-n", "agents", "--kubeconfig", kubeconfig)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// waitFor polls cond until it holds, failing with its last description
// after a generous deadline.
func waitFor(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met: %s", desc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDenialsWithoutACluster fails clearly when no cluster is configured.
func TestDenialsWithoutACluster(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var out, errOut bytes.Buffer
	code := run([]string{"denials", "--kubeconfig", empty}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "kubeconfig") {
		t.Fatalf("exit %d stderr %q", code, errOut.String())
	}
}
