package claudehook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/claudehook"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
)

// A fake GitHub token, built at run time so that no scanner of this
// repository mistakes the source for a leak.
var fakeToken = "ghp_" + "8Rf3kXq9PzL2mN7vB4cT1wY6hJ0sD5aE2gKq"

// withResultPolicy adds a result policy scanning every tool's result for
// secrets with action to the gateway's configuration.
func withResultPolicy(t *testing.T, g *gw, action resultscan.Action) {
	t.Helper()
	cfg := *g.srv.Config()
	cfg.Hooks = append(append([]gatewayconfig.Hook(nil), cfg.Hooks...), gatewayconfig.Hook{Name: "ResultPolicy/default/no-secrets",
		Kind: resultscan.KindName, Policy: hooks.PolicyRef{Kind: "ResultPolicy", Namespace: "default", Name: "no-secrets"},
		Spec: gatewayconfig.MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Detectors: []string{resultscan.SetSecrets}, Action: action})})
	cfg.Revision, cfg.IssuedAt = "", cfg.IssuedAt+1
	if _, err := g.srv.Apply(context.Background(), &cfg, "test"); err != nil {
		t.Fatal(err)
	}
}

func postEvent(t *testing.T, g *gw, tool string, response any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"session_id": "s1", "hook_event_name": "PostToolUse", "cwd": g.ws,
		"tool_name": tool, "tool_input": map[string]any{"command": "env"}, "tool_use_id": "toolu_1", "tool_response": response})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answerOf decodes the hook's JSON answer.
func answerOf(t *testing.T, got outcome) map[string]any {
	t.Helper()
	if got.code != 0 {
		t.Fatalf("exit %d stderr %q", got.code, got.stderr)
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(got.stdout), &a); err != nil {
		t.Fatalf("stdout %q: %v", got.stdout, err)
	}
	return a
}

func TestPostToolUseScansResults(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	withResultPolicy(t, g, resultscan.Redact)
	o := claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken}

	// Claude Code's own tools' output cannot be replaced: the model is told
	// the result is withheld, and shown only the redacted text.
	bash := postEvent(t, g, "Bash", map[string]any{"stdout": "HOME=/root\nGITHUB_TOKEN=" + fakeToken + "\n", "stderr": "", "interrupted": false})
	a := answerOf(t, runHook(t, bash, o))
	reason, _ := a["reason"].(string)
	if a["decision"] != "block" || strings.Contains(reason, fakeToken) || !strings.Contains(reason, "github-token") ||
		!strings.Contains(reason, resultscan.RedactedMarker("github-token")) {
		t.Fatalf("Bash: %v", a)
	}
	recs := g.audit.Records()
	if rec := recs[len(recs)-1]; rec.Tool != "shell" || len(rec.Filtering) != 1 || rec.SenderID != "dev" {
		t.Errorf("audit %+v", rec)
	}

	// An MCP tool's output is replaced with the redacted text.
	mcp := postEvent(t, g, "mcp__docs__search", []any{map[string]any{"type": "text", "text": "key " + fakeToken}})
	a = answerOf(t, runHook(t, mcp, o))
	out, _ := a["hookSpecificOutput"].(map[string]any)
	if text, _ := out["updatedMCPToolOutput"].(string); out["hookEventName"] != "PostToolUse" || strings.Contains(text, fakeToken) ||
		!strings.Contains(text, "key "+resultscan.RedactedMarker("github-token")) {
		t.Fatalf("MCP: %v", a)
	}

	// A secret in a member name is found too.
	a = answerOf(t, runHook(t, postEvent(t, g, "Read", map[string]any{fakeToken: 1}), o))
	if a["decision"] != "block" {
		t.Fatalf("member name: %v", a)
	}

	// The gateway's own MCP tools were scanned when it served them.
	before := len(g.audit.Records())
	got := runHook(t, postEvent(t, g, "mcp__toolhooks__read_file", "x "+fakeToken), claudehook.Options{Gateway: g.url, Sender: "dev",
		Token: devToken, GatewayMCPServers: []string{"toolhooks"}})
	if got.code != 0 || got.stdout != "" || len(g.audit.Records()) != before {
		t.Errorf("gateway MCP server: %+v", got)
	}
}

func TestPostToolUseWithheld(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	withResultPolicy(t, g, resultscan.Withhold)
	a := answerOf(t, runHook(t, postEvent(t, g, "Bash", map[string]any{"stdout": fakeToken}),
		claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken}))
	reason, _ := a["reason"].(string)
	if a["decision"] != "block" || strings.Contains(reason, fakeToken) || !strings.Contains(reason, "ResultPolicy/default/no-secrets") {
		t.Fatalf("%v", a)
	}
}

// A result that cannot be scanned is withheld, unless --on-error=allow.
func TestPostToolUseFailsClosed(t *testing.T) {
	in := `{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"env"},"tool_response":{"stdout":"x"}}`
	a := answerOf(t, runHook(t, in, claudehook.Options{Gateway: "http://127.0.0.1:1"}))
	if reason, _ := a["reason"].(string); a["decision"] != "block" || !strings.Contains(reason, "could not scan") {
		t.Fatalf("%v", a)
	}
	got := runHook(t, in, claudehook.Options{Gateway: "http://127.0.0.1:1", OnError: claudehook.OnErrorAllow})
	if got.code != 0 || got.stdout != "" || !strings.Contains(got.stderr, "NOT scanned") {
		t.Fatalf("%+v", got)
	}
}

func TestResponseText(t *testing.T) {
	for in, want := range map[string]string{
		`"plain\ntext"`: "plain\ntext",
		`{"stdout":"a","stderr":"b","n":1,"ok":true}`: "n\nok\nstderr\nb\nstdout\na\n",
		`[{"type":"text","text":"t"},"s"]`:            "text\nt\ntype\ntext\ns\n",
		`null`:                                        "",
		``:                                            "",
	} {
		got, err := claudehook.ResponseText(json.RawMessage(in))
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := claudehook.ResponseText(json.RawMessage(`{"a":1,"a":2}`)); err == nil {
		t.Errorf("duplicate member names were accepted")
	}
}
