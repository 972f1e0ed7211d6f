package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A real gateway writing the decision log keeps no secret that a command
// line or an argument's name says is one: --password=..., PGPASSWORD=...,
// curl -u user:..., mysql -p..., a URL's password, and the keys pwd and
// client_secret; not in the arguments, nor in the denial reasons that quote
// the command.
func TestTheGatewayBinaryDecisionLogMasksSecretsOnCommandLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws, policies := filepath.Join(tmp, "workspace"), filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(policies, "agent.yaml"), `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: agent, namespace: team}
spec:
  workspace: {root: `+ws+`, only: true}
  shell: {allow: true, allowedCommands: ["echo *"]}
`)
	tokens := filepath.Join(tmp, "tokens.yaml")
	writeFile(t, tokens, "tokens: [{identity: agent, token: agent-token-0123456789}]\n")
	g := startGateway(t, bin, "--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--namespace", "team",
		"--auth-tokens-file", tokens, "--decision-log")

	calls := []struct{ tool, args string }{
		{"shell", `{"command":"mysql -u root --password=hunter2-A -e 'select 1'"}`},
		{"shell", `{"command":"PGPASSWORD=hunter2-B psql -h db && curl -u me:hunter2-C https://x # --token hunter2-D"}`},
		{"shell", `{"command":["mysql","-phunter2-E","db"]}`},
		{"shell", `{"command":"sh -c \"redis-cli -a 'hunter2 F' ping\""}`},
		{"db_query", `{"pwd":"hunter2-G","dsn":"postgres://app:hunter2-H@db/x","client_secret":"hunter2-I","max_tokens":5}`},
	}
	for _, c := range calls {
		req, err := http.NewRequest(http.MethodPost, g.base+"/v1/tool-calls",
			strings.NewReader(`{"sessionId":"s1","tool":"`+c.tool+`","arguments":`+c.args+`}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer agent-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d", c.args, resp.StatusCode)
		}
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(); err != nil {
		t.Errorf("the gateway exited with %v after SIGTERM", err)
	}
	out := g.stdout.String()
	if strings.Contains(out, "hunter2") {
		t.Errorf("a secret is in the decision log:\n%s", out)
	}
	var records int
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var rec struct {
			Msg       string
			Arguments json.RawMessage `json:"arguments"`
			Masked    []string        `json:"maskedArguments"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", line, err)
		}
		if rec.Msg != "Tool call" {
			continue
		}
		records++
		if !strings.Contains(string(rec.Arguments), "[MASKED]") || len(rec.Masked) == 0 {
			t.Errorf("record without masked arguments: %s", line)
		}
	}
	if records != len(calls) {
		t.Errorf("%d decision log records, want %d:\n%s", records, len(calls), out)
	}
}
