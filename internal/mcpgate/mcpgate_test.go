package mcpgate_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

const codingPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: coding-agent}
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env"]
`

const readOnlyPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: read-only}
spec:
  mode: ReadOnly
  workspace: {root: WORKSPACE, only: true}
  tools: {deny: ["shell"]}
`

const budgetPolicy = `---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget}
spec:
  maxToolCalls: 3
`

func TestListAllowedAndDeniedCalls(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)

	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(list.Tools))
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		// The policy does not allow the shell: only shell is denied by its name alone.
		if marked := strings.HasPrefix(tool.Description, mcpgate.DeniedMarker); marked != (tool.Name == "shell") {
			t.Errorf("%s: marked=%v: %q", tool.Name, marked, tool.Description)
		}
	}
	slices.Sort(names)
	if want := []string{"edit_file", "list_dir", "read_file", "shell", "write_file"}; !slices.Equal(names, want) {
		t.Fatalf("tools/list = %v, want %v", names, want)
	}

	res := call(t, cs, "read_file", `{"path":"README.md"}`)
	if res.IsError || text(res) != "# project\n" {
		t.Fatalf("allowed read: isError=%v text=%q", res.IsError, text(res))
	}
	rec := lastRecord(t, e.audit)
	if rec.Outcome != hooks.StatusSucceeded || rec.SessionID != cs.ID() || rec.SessionID == "" ||
		rec.ChannelID != mcpgate.ChannelID || rec.SenderID != "alice" {
		t.Fatalf("audit record of the allowed call: %+v (MCP session %q)", rec, cs.ID())
	}

	res = call(t, cs, "read_file", `{"path":"config/.env"}`)
	d := denialOf(t, res)
	if d == nil || d.Hook != "AutonomyPolicy/default/coding-agent" || d.Rule != autonomy.RuleForbiddenPaths ||
		d.Policy == nil || d.Policy.Kind != "AutonomyPolicy" || d.Policy.Name != "coding-agent" || d.Reason == "" {
		t.Fatalf("structured denial = %+v", d)
	}
	// The text, which is all many hosts show the model, gives the reason
	// after the compatible first line, and then the structured content.
	want := hooks.DenialText + "AutonomyPolicy/default/coding-agent\nPolicy: default/coding-agent\n" +
		"Rule: " + autonomy.RuleForbiddenPaths + "\nReason: " + d.Reason
	if !res.IsError || text(res) != want || !strings.Contains(d.Reason, `"**/.env"`) {
		t.Fatalf("denied read: isError=%v text=%q, want %q", res.IsError, text(res), want)
	}
	if ts := texts(res); len(ts) != 2 || !jsonEqual(t, ts[1], res.StructuredContent) {
		t.Fatalf("the structured denial is not repeated as text: %q", ts)
	}
	if _, ok := res.Meta[mcpgate.MetaDenial]; !ok {
		t.Fatalf("_meta lacks %s: %v", mcpgate.MetaDenial, res.Meta)
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusDenied || rec.Denial.Rule != autonomy.RuleForbiddenPaths {
		t.Fatalf("audit record of the denied call: %+v", rec)
	}

	// Malformed arguments reach the executor's strict parser, not a lenient one.
	res = call(t, cs, "read_file", `{"path":"README.md","path":"config/.env"}`)
	if d := denialOf(t, res); !res.IsError || d == nil || d.Hook != hooks.ArgumentsHookName {
		t.Fatalf("duplicate keys: isError=%v denial=%+v text=%q", res.IsError, d, text(res))
	}
}

func TestSessionBudgetAcrossCalls(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy + budgetPolicy)
	first := connect(t, e.url, aliceToken)
	for i := range 3 {
		if res := call(t, first, "list_dir", `{}`); res.IsError {
			t.Fatalf("call %d within the budget denied: %s", i+1, text(res))
		}
	}
	res := call(t, first, "list_dir", `{}`)
	if d := denialOf(t, res); !res.IsError || d == nil || d.Rule != contract.RuleMaxToolCalls || d.Hook != "ContractPolicy/default/budget" {
		t.Fatalf("4th call of the session: isError=%v denial=%+v", res.IsError, d)
	}
	// A new MCP session is a new hook session with its own budget.
	second := connect(t, e.url, aliceToken)
	if second.ID() == first.ID() {
		t.Fatal("two MCP sessions share an id")
	}
	if res := call(t, second, "list_dir", `{}`); res.IsError {
		t.Fatalf("first call of a new session denied: %s", text(res))
	}
	if res := call(t, first, "list_dir", `{}`); !res.IsError {
		t.Fatal("the exhausted session got another call")
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	initBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	for name, header := range map[string]string{
		"no token":    "",
		"wrong token": "Bearer not-a-valid-token-at-all",
		"not bearer":  "Basic " + aliceToken,
	} {
		req, _ := http.NewRequest(http.MethodPost, e.url, bytes.NewReader(initBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, resp.StatusCode)
		}
	}
	if _, err := connectErr(e.url, ""); err == nil {
		t.Error("an MCP client without a token connected")
	}
	// A session opened by alice cannot be used with bob's token.
	cs := connect(t, e.url, aliceToken)
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_dir","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob using alice's session: status %d, want 403", resp.StatusCode)
	}
}

func TestAnonymousOnlyWhenAllowed(t *testing.T) {
	bare, err := gateway.New(gateway.Options{Workspace: t.TempDir(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bare.Close)
	if _, err := mcpgate.NewHandler(mcpgate.Options{Gateway: bare}); err == nil {
		t.Fatal("a handler for a gateway without a callers' authenticator was built")
	}
	e := newEnv(t, envOptions{anonymous: true})
	e.apply(codingPolicy)
	cs := connect(t, e.url, "")
	if res := call(t, cs, "list_dir", `{}`); res.IsError {
		t.Fatalf("anonymous call: %s", text(res))
	}
	if rec := lastRecord(t, e.audit); rec.SenderID != mcpgate.AnonymousSender {
		t.Fatalf("anonymous sender = %q", rec.SenderID)
	}
	// A token, when given, must still be valid: no downgrade to anonymous.
	if _, err := connectErr(e.url, "Bearer-garbage-token-123"); err == nil {
		t.Fatal("an invalid token was accepted as anonymous")
	}
	alice := connect(t, e.url, aliceToken)
	call(t, alice, "list_dir", `{}`)
	if rec := lastRecord(t, e.audit); rec.SenderID != "alice" {
		t.Fatalf("sender with a token = %q", rec.SenderID)
	}
	// Anonymous without any authenticator: tokens are refused.
	e2 := newEnv(t, envOptions{anonymous: true, noAuth: true})
	if _, err := connectErr(e2.url, aliceToken); err == nil {
		t.Fatal("a token was accepted by an endpoint without an authenticator")
	}
}

func TestToolsListMarksOutrightDenials(t *testing.T) {
	for _, mode := range []string{mcpgate.DeniedMark, mcpgate.DeniedHide} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, envOptions{denied: mode})
			cs := connect(t, e.url, aliceToken)
			// Before any configuration every call is denied, and every tool is marked.
			listed := listTools(t, cs)
			if mode == mcpgate.DeniedMark && len(listed) != 5 {
				t.Fatalf("listed %d tools before a configuration, want 5", len(listed))
			}
			for _, tool := range listed {
				if !strings.HasPrefix(tool.Description, mcpgate.DeniedMarker) {
					t.Errorf("%s not marked before a configuration", tool.Name)
				}
			}

			e.apply(readOnlyPolicy)
			listed = listTools(t, cs)
			want := map[string]string{ // tool -> rule a call gets ("" allowed)
				"read_file": "", "list_dir": "", "write_file": autonomy.RuleReadOnly,
				"edit_file": autonomy.RuleReadOnly, "shell": autonomy.RuleToolDeny,
			}
			for name, rule := range want {
				tool, shown := listed[name]
				switch {
				case rule == "" && (!shown || strings.HasPrefix(tool.Description, mcpgate.DeniedMarker)):
					t.Errorf("%s: shown=%v, want listed unmarked", name, shown)
				case rule != "" && mode == mcpgate.DeniedHide && shown:
					t.Errorf("%s is listed; hide mode must leave it out", name)
				case rule != "" && mode == mcpgate.DeniedMark:
					if !shown || !strings.HasPrefix(tool.Description, mcpgate.DeniedMarker) {
						t.Errorf("%s: shown=%v description=%q, want marked", name, shown, tool.Description)
					} else if d, _ := tool.Meta[mcpgate.MetaDenial].(map[string]any); d["rule"] != rule {
						t.Errorf("%s: listed denial %v, want rule %s", name, tool.Meta[mcpgate.MetaDenial], rule)
					}
				}
				// What a call gets agrees with the listing, hidden or not.
				res := call(t, cs, name, `{"path":"README.md","content":"x","old_string":"a","new_string":"b","command":"ls"}`)
				d := denialOf(t, res)
				if rule == "" {
					if d != nil {
						t.Errorf("%s: listed as allowed, call denied: %+v", name, d)
					}
				} else if d == nil || d.Rule != rule || d.Hook != "AutonomyPolicy/default/read-only" {
					t.Errorf("%s: call got %+v (text %q), want rule %s", name, d, text(res), rule)
				}
			}
		})
	}
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func upstreamConfig(url string) *mcpgate.Config {
	return &mcpgate.Config{Upstreams: []mcpgate.UpstreamConfig{{
		Name: "up", HTTP: &mcpgate.HTTPConfig{URL: url},
		Tools: map[string]mcpgate.ToolConfig{"where": {PathArgs: []string{"where"}, ReadOnly: true}},
	}}}
}

func TestHTTPUpstream(t *testing.T) {
	up, calls := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL + "/")})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	listed := listTools(t, cs)
	for _, name := range []string{"up_echo", "up_where", "up_fail", "up_hang", "up_crash", "read_file"} {
		if _, ok := listed[name]; !ok {
			t.Errorf("tools/list lacks %s", name)
		}
	}

	res := call(t, cs, "up_echo", `{"text":"hi"}`)
	if res.IsError || text(res) != "echo: hi" {
		t.Fatalf("upstream echo: isError=%v text=%q", res.IsError, text(res))
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["echoed"] != "hi" {
		t.Fatalf("the upstream's structured content was not passed through: %v", res.StructuredContent)
	}
	// Its result has text: the structured content is not repeated.
	if ts := texts(res); len(ts) != 1 {
		t.Fatalf("upstream echo's texts: %q", ts)
	}
	// A result with structured content and no text: its JSON is added as text.
	if ts := texts(call(t, cs, "up_json", `{}`)); len(ts) != 1 || ts[0] != `{"n":1,"s":"x"}` {
		t.Fatalf("up_json's texts: %q", ts)
	}
	call(t, cs, "up_echo", `{"text":"hi"}`)
	if rec := lastRecord(t, e.audit); rec.Tool != "up_echo" || rec.Outcome != hooks.StatusSucceeded || rec.SenderID != "alice" {
		t.Fatalf("audit: %+v", rec)
	}

	// The configured path argument is checked like a built-in's path.
	before := calls.Load()
	for _, p := range []string{"/etc/passwd", "config/.env", filepath.Join(e.ws, "..", "x")} {
		res = call(t, cs, "up_where", fmt.Sprintf(`{"where":%q}`, p))
		if d := denialOf(t, res); !res.IsError || d == nil || d.Hook != "AutonomyPolicy/default/coding-agent" {
			t.Errorf("up_where %s: isError=%v denial=%+v text=%q", p, res.IsError, d, text(res))
		}
	}
	// So are the default path keys for every upstream tool.
	res = call(t, cs, "up_echo", `{"text":"x","path":"/etc/passwd"}`)
	if d := denialOf(t, res); d == nil || d.Rule != autonomy.RuleWorkspaceOnly {
		t.Errorf("up_echo with a path outside: %+v", d)
	}
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("%d denied calls reached the upstream", n)
	}
	if res = call(t, cs, "up_where", `{"where":"README.md"}`); res.IsError || text(res) != "at README.md" {
		t.Fatalf("allowed up_where: %q", text(res))
	}

	// The upstream's own tool error stays a tool error, and the call failed.
	if res = call(t, cs, "up_fail", `{}`); !res.IsError || text(res) != "boom" || denialOf(t, res) != nil {
		t.Fatalf("up_fail: isError=%v text=%q", res.IsError, text(res))
	}
	if rec := lastRecord(t, e.audit); rec.Tool != "up_fail" || rec.Outcome != hooks.StatusFailed {
		t.Fatalf("audit of up_fail: %+v", rec)
	}

	// Upstream down: a clear tool error, quickly, never an allow.
	up.CloseClientConnections()
	up.Close()
	start := time.Now()
	res = call(t, cs, "up_echo", `{"text":"hi"}`)
	if !res.IsError || !strings.HasPrefix(text(res), hooks.FailedText) || !strings.Contains(text(res), `upstream MCP server "up"`) {
		t.Fatalf("upstream down: isError=%v text=%q", res.IsError, text(res))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the call with the upstream down took %v", took)
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusFailed {
		t.Fatalf("audit outcome with the upstream down: %s", rec.Outcome)
	}
}

func TestReadOnlyTraitOfUpstreamTool(t *testing.T) {
	up, _ := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(readOnlyPolicy)
	cs := connect(t, e.url, aliceToken)
	listed := listTools(t, cs)
	if strings.HasPrefix(listed["up_where"].Description, mcpgate.DeniedMarker) {
		t.Error("up_where is declared read-only but marked denied")
	}
	if !strings.HasPrefix(listed["up_echo"].Description, mcpgate.DeniedMarker) {
		t.Error("up_echo is not declared read-only but not marked denied in readonly mode")
	}
	if res := call(t, cs, "up_where", `{"where":"README.md"}`); res.IsError {
		t.Errorf("read-only upstream tool denied: %s", text(res))
	}
	if d := denialOf(t, call(t, cs, "up_echo", `{"text":"x"}`)); d == nil || d.Rule != autonomy.RuleReadOnly {
		t.Errorf("mutating upstream tool in readonly mode: %+v", d)
	}
}

func TestStdioUpstreamDiesAndRestarts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &mcpgate.Config{Upstreams: []mcpgate.UpstreamConfig{{
		Name: "proc", Stdio: &mcpgate.StdioConfig{Command: exe, Env: map[string]string{upstreamEnvVar: "1"}},
	}}}
	e := newEnv(t, envOptions{upstreams: cfg})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	if res := call(t, cs, "proc_echo", `{"text":"one"}`); res.IsError || text(res) != "echo: one" {
		t.Fatalf("stdio upstream: %q", text(res))
	}
	start := time.Now()
	res := call(t, cs, "proc_crash", `{}`)
	if !res.IsError || !strings.HasPrefix(text(res), hooks.FailedText) || !strings.Contains(text(res), `"proc"`) {
		t.Fatalf("the process died during the call: isError=%v text=%q", res.IsError, text(res))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the call whose upstream died took %v", took)
	}
	// The next call restarts the process (after the reconnect backoff).
	deadline := time.Now().Add(10 * time.Second)
	for {
		res = call(t, cs, "proc_echo", `{"text":"two"}`)
		if !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream was not restarted: %q", text(res))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if text(res) != "echo: two" {
		t.Fatalf("after the restart: %q", text(res))
	}
}

func TestHangingUpstreamTimesOut(t *testing.T) {
	up, _ := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL), toolTimeout: 500 * time.Millisecond})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	start := time.Now()
	cancelled := hangsCancelled.Load()
	res := call(t, cs, "up_hang", `{}`)
	if !res.IsError || text(res) != hooks.TimedOutText {
		t.Fatalf("hanging upstream: isError=%v text=%q", res.IsError, text(res))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the call took %v with a 500ms tool timeout", took)
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusTimedOut {
		t.Fatalf("audit outcome %s", rec.Outcome)
	}
	// The timeout cancelled the call at the upstream too: it does not go on.
	for deadline := time.Now().Add(10 * time.Second); hangsCancelled.Load() == cancelled; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upstream's hang call was not cancelled 10s after the tool timeout")
		}
	}
	// The connection still works for the next call.
	if res := call(t, cs, "up_echo", `{"text":"after"}`); res.IsError || text(res) != "echo: after" {
		t.Fatalf("after the timeout: %q", text(res))
	}
}
