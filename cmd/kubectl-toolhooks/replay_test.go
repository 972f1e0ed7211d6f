package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolhooks/toolhooks/internal/cli"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// replayPolicies are the policies a session is recorded under; the
// changed set drops git status from the shell allow-list, forbids
// secrets/**, and lowers the budget from 10 to 4.
const replayPolicies = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: agent}
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: [FORBIDDEN]
  shell: {allow: true, allowedCommands: [ls, COMMANDS]}
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget}
spec: {maxToolCalls: BUDGET}
`

func writePolicies(t *testing.T, dir, ws, forbidden, commands, budget string) {
	t.Helper()
	writeFile(t, dir, "policies.yaml", strings.NewReplacer("WORKSPACE", ws, "FORBIDDEN", forbidden, "COMMANDS", commands,
		"BUDGET", budget).Replace(replayPolicies))
}

// TestReplayReportsExactlyTheCallsAPolicyChangeChanges records a session
// through a real gateway process with the decision log on, changes the
// policies, and replays the log: the shell, path and budget changes are
// reported, and only they; the call whose path was masked in the log is
// reported as not exact.
func TestReplayReportsExactlyTheCallsAPolicyChangeChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	tmp := t.TempDir()
	ws, before, after := filepath.Join(tmp, "ws"), filepath.Join(tmp, "before"), filepath.Join(tmp, "after")
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	for _, f := range []string{"notes.txt", "secrets/key.txt", "tokens/" + token + ".txt"} {
		writeFile(t, ws, f, "x")
	}
	writePolicies(t, before, ws, `"**/.env"`, `"git status"`, "10")
	writePolicies(t, after, ws, `"secrets/**"`, `"git log"`, "4")
	logFile := filepath.Join(tmp, "audit.log")

	gw := filepath.Join(tmp, "gateway")
	if out, err := exec.Command("go", "build", "-o", gw, "../gateway").CombinedOutput(); err != nil {
		t.Fatalf("go build ../gateway: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := exec.Command(gw, "--listen", addr, "--workspace", ws, "--policies", before, "--allow-anonymous",
		"--audit-file", logFile, "--decision-log")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never became ready:\n%s", stderr.String())
		}
	}
	calls := []struct{ tool, args string }{
		{"shell", `{"command":"ls"}`},
		{"shell", `{"command":"git status"}`},       // the shell rule denies it after
		{"read_file", `{"path":"notes.txt"}`},       //
		{"read_file", `{"path":"secrets/key.txt"}`}, // the path rule denies it after
		{"read_file", `{"path":"tokens/` + token + `.txt"}`},
		{"read_file", `{"path":"notes.txt"}`},
		{"read_file", `{"path":"notes.txt"}`}, // the 5th counted call after: over the budget of 4
	}
	for i, c := range calls {
		body := fmt.Sprintf(`{"sessionId":"s-1","tool":%q,"arguments":%s}`, c.tool, c.args)
		resp, err := http.Post("http://"+addr+"/v1/tool-calls", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Status string }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		if out.Status != "succeeded" {
			t.Fatalf("recorded call %d (%s %s) = %s, want succeeded", i+1, c.tool, c.args, out.Status)
		}
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), token) {
		t.Fatal("the decision log holds the secret from the path")
	}

	// Unchanged policies: nothing changes.
	r := runCLI(t, "replay", logFile, "-f", before, "--workspace", ws, "--fail-on-change", "-o", "json")
	var same cli.ReplayReport
	if err := json.Unmarshal([]byte(r.stdout), &same); err != nil || r.code != 0 || same.Summary.Calls != len(calls) || same.Summary.Changed != 0 {
		t.Fatalf("replay against the recorded policies: exit %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}

	r = runCLI(t, "replay", logFile, "-f", after, "--workspace", ws, "--fail-on-change", "-o", "json")
	var rep cli.ReplayReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 {
		t.Fatalf("replay against the changed policies: exit %d (want 1) %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	var got []string
	for _, c := range rep.Changed {
		got = append(got, fmt.Sprintf("%s %s->%s %s", c.Source[strings.LastIndex(c.Source, ":")+1:], c.Recorded.Decision,
			c.Replayed.Decision, c.Replayed.Rule))
	}
	// The log holds a decision record before each call's record: lines 2, 4, ...
	want := []string{"4 allowed->denied shellAllowList", "8 allowed->denied forbiddenPathGlobs", "14 allowed->denied maxToolCalls"}
	if !slices.Equal(got, want) {
		t.Errorf("changed = %q, want %q\n%s", got, want, r.stdout)
	}
	if len(rep.Inexact) != 1 || rep.Inexact[0].Tool != "read_file" || !strings.Contains(strings.Join(rep.Inexact[0].Inexact, " "), "/path was masked") {
		t.Errorf("not exact = %+v, want the call whose path was masked", rep.Inexact)
	}
	if s := rep.Summary; s.Calls != 7 || s.AllowedToDeny != 3 || s.EvaluatedExact != 3 || s.NotEvaluated != 0 {
		t.Errorf("summary = %+v", s)
	}

	// The text form names both sides.
	r = runCLI(t, "replay", logFile, "-f", after, "--workspace", ws)
	if r.code != 0 || !strings.Contains(r.stdout, "CHANGED "+logFile+":4: allowed -> denied  shell") ||
		!strings.Contains(r.stdout, "replayed:  denied by AutonomyPolicy/default/agent rule=shellAllowList") ||
		!strings.Contains(r.stdout, "NOT EXACT") || !strings.Contains(r.stdout, "7 calls: 3 changed") {
		t.Errorf("text report (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "replay", logFile, "--workspace", ws); r.code != 2 {
		t.Errorf("replay without policies: exit %d, want 2", r.code)
	}

	// The changed policies applied to a cluster: --from-cluster reads them
	// from the API server and reports the same calls.
	env := testenv.Start(t)
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(t, "apply", "-n", "agents", "-f", filepath.Join(after, "policies.yaml")); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	r = runCLI(t, "replay", logFile, "--from-cluster", "--kubeconfig", env.AdminKubeconfig(t), "-n", "agents",
		"--workspace", ws, "-o", "json")
	var fromCluster cli.ReplayReport
	if err := json.Unmarshal([]byte(r.stdout), &fromCluster); err != nil || r.code != 0 || fromCluster.Summary != rep.Summary {
		t.Errorf("replay --from-cluster: exit %d %v, summary %+v, want %+v\n%s", r.code, err, fromCluster.Summary, rep.Summary, r.stderr)
	}
	if r := runCLI(t, "replay", logFile, "--from-cluster", "-f", after, "--workspace", ws); r.code != 2 {
		t.Errorf("replay with both -f and --from-cluster: exit %d, want 2", r.code)
	}
}
