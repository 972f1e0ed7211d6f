package gateway_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// TestDecisionsRejectLooseTopLevels sends bodies a lenient decoder would
// have read as another request: a key in another case, a key twice,
// invalid UTF-8 and escaped lone surrogates. Each is a 400 and one audit
// record of the refusal, never a decision.
func TestDecisionsRejectLooseTopLevels(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	for _, body := range []string{
		`{"TOOL":"shell","tool":"read_file","arguments":{"path":"README.md"}}`,
		`{"tool":"read_file","TOOL":"shell","arguments":{"command":"cat config/.env"}}`,
		`{"Tool":"read_file"}`,
		`{"tool":"read_file","Arguments":{"path":"config/.env"}}`,
		`{"tool":"read_file","tool":"shell"}`,
		"{\"tool\":\"shell\xff\",\"arguments\":{\"command\":\"cat config/.env\"}}",
		"{\"tool\":\"read_file\",\"sessionId\":\"s\xfe\"}",
		"{\"tool\":\"read_file\",\"arguments\":{\"path\":\"config/.env\xff\"}}",
		`{"tool":"shell\ud800","arguments":{"command":"cat config/.env"}}`,
		`{"tool":"read_file","sessionId":"\udc00x"}`,
		`{"tool":"read_file","arguments":{"path":"config/.env\ud800"}}`,
		`{"tool":"read_file","arguments":{"p\udc00ath":"config/.env"}}`,
	} {
		for _, path := range []string{"/v1/decisions", "/v1/tool-calls"} {
			status, resp := e.do(http.MethodPost, path, "application/json", []byte(body), agentAuth)
			if status != http.StatusBadRequest || !strings.Contains(string(resp), "malformed JSON body") {
				t.Errorf("%s %q answered %d %s; want 400 malformed JSON body", path, body, status, resp)
			}
		}
	}
	// Each is audited as a refused call (rule MalformedRequest), never decided.
	recs := e.audit.Records()
	for _, r := range recs {
		if r.Outcome != hooks.StatusDenied || r.Denial == nil || r.Denial.Rule != hooks.RuleMalformedRequest || r.Tool != "" {
			t.Errorf("a rejected request's record %+v", r)
		}
	}
	if len(recs) != 24 {
		t.Errorf("24 rejected requests left %d audit records", len(recs))
	}
	// A valid surrogate pair is still fine.
	if status, resp := e.do(http.MethodPost, "/v1/decisions", "application/json",
		[]byte(`{"tool":"read_file","sessionId":"\ud83d\ude00","arguments":{"path":"README.md"}}`), agentAuth); status != http.StatusOK {
		t.Errorf("a valid surrogate pair answered %d %s", status, resp)
	}
}

// agentAuth is the header of an authenticated agent.
var agentAuth = map[string]string{"Authorization": "Bearer " + agentToken}

const soundPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: coding-agent
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env", "secrets/**"]
  shell:
    allow: true
    allowedCommands: ["echo *", "ls", "ls *", "cat *", "git status", "[ *", "go test *", "go build *"]
`

// TestDecisionsShellSoundness sends the shell classes a static check used
// to misread through POST /v1/decisions with a compiled policy.
func TestDecisionsShellSoundness(t *testing.T) {
	e := newEnv(t, nil)
	if err := os.MkdirAll(filepath.Join(e.ws, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "secrets", "key"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.mustPush(compileYAML(t, e.ws, soundPolicy))
	shell := func(cmd string) string {
		b, _ := json.Marshal(map[string]string{"command": cmd})
		return string(b)
	}
	for _, cmd := range []string{
		"cat config/.[[:alpha:]]nv",
		"cat s[[:alpha:]]crets/key",
		"cat config/.[[=e=]]nv",
		"ls > config/.[[:alpha:]]nv",
		"ls > {config/.env,}",
		"cat - < {secrets/key,}",
		"git status > {../x,}",
		"[ -n x ] || cat $'config/.env'",
		"[[ -n x || cat config/.env > y ]]",
		"ls .[[:punct:]]",
	} {
		if d := e.decide("shell", shell(cmd)); d.Allowed {
			t.Errorf("%q was allowed", cmd)
		}
	}
	for _, cmd := range []string{"cat src/main{.go,}", "echo x{,}", "echo {a,b}{c,}", "ls src/[[:alpha:]]*.go"} {
		if d := e.decide("shell", shell(cmd)); !d.Allowed {
			t.Errorf("%q was denied: %+v", cmd, d.Denial)
		}
	}
}
