package claudehook_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/claudehook"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/standalone"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// gw is a real gateway serving HTTP with policies loaded from testdata.
type gw struct {
	url   string
	ws    string
	audit *audit.Memory
	srv   *gateway.Server
}

// startGateway runs the gateway in-process with testdata/policyFile applied
// through the standalone compile path (WORKSPACE replaced by a new
// workspace), behind wrap when set.
func startGateway(t testing.TB, policyFile string, wrap func(http.Handler) http.Handler) *gw {
	t.Helper()
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "README.md"), "# project\n")
	writeFile(t, filepath.Join(ws, "config", ".env"), "TOKEN=secret\n")
	body, err := os.ReadFile(filepath.Join("testdata", policyFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policies.yaml"), strings.ReplaceAll(string(body), "WORKSPACE", ws))
	al := &audit.Memory{}
	callers, err := authn.ParseStaticTokens([]byte("tokens: [{identity: dev, token: " + devToken + "}]"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := gateway.New(gateway.Options{Workspace: ws, Audit: al, Logger: slog.New(slog.DiscardHandler),
		Callers: &authn.Request{Tokens: callers}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := standalone.Load(t.Context(), s, standalone.Options{Dir: dir}); err != nil {
		t.Fatalf("Loading %s: %v", policyFile, err)
	}
	h := s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &gw{url: srv.URL, ws: ws, audit: al, srv: s}
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// payload reads a recorded hook event with ${WORKSPACE} replaced by ws.
func payload(t *testing.T, name, ws string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "${WORKSPACE}", ws)
}

type outcome struct {
	code           int
	stdout, stderr string
}

func runHook(t *testing.T, stdin string, o claudehook.Options) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := claudehook.Run(t.Context(), strings.NewReader(stdin), &stdout, &stderr, o)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// devToken is the test gateway's caller "dev"'s bearer token.
const devToken = "claude-hook-test-token-0123456789"

func TestRecordedPayloadsAgainstARealGateway(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	cases := []struct {
		file     string
		wantCode int
		// wantTool is the tool name the gateway saw.
		wantTool   string
		wantStderr []string
	}{
		{file: "pre_bash_rm.json", wantCode: 2, wantTool: "shell", wantStderr: []string{
			"Tool execution denied by hook: AutonomyPolicy/default/claude-coding (rule shellAllowList): ", `"rm -rf /"`}},
		{file: "pre_bash_git_status.json", wantCode: 0, wantTool: "shell"},
		{file: "pre_read_env.json", wantCode: 2, wantTool: "read_file", wantStderr: []string{"rule forbiddenPathGlobs", ".env"}},
		{file: "pre_write_outside.json", wantCode: 2, wantTool: "write_file", wantStderr: []string{"rule workspaceOnly", "/etc/cron.d/backdoor"}},
		{file: "pre_read_allowed.json", wantCode: 0, wantTool: "read_file"},
		{file: "pre_edit.json", wantCode: 0, wantTool: "edit_file"},
		{file: "pre_grep.json", wantCode: 0, wantTool: "grep"},
		{file: "pre_mcp_denied.json", wantCode: 2, wantTool: "github_delete_repository", wantStderr: []string{"rule toolDeny", "github_delete_repository"}},
		{file: "pre_mcp_read_env.json", wantCode: 2, wantTool: "filesystem_read_text_file", wantStderr: []string{"rule forbiddenPathGlobs"}},
		{file: "pre_mcp_allowed.json", wantCode: 0, wantTool: "filesystem_read_text_file"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			before := len(g.audit.Records())
			got := runHook(t, payload(t, c.file, g.ws), claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken})
			if got.code != c.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", got.code, c.wantCode, got.stderr)
			}
			if c.wantCode == 0 && got.stderr != "" {
				t.Errorf("stderr of an allowed call: %q", got.stderr)
			}
			for _, w := range c.wantStderr {
				if !strings.Contains(got.stderr, w) {
					t.Errorf("stderr %q lacks %q", got.stderr, w)
				}
			}
			recs := g.audit.Records()
			if len(recs) != before+1 {
				t.Fatalf("the gateway recorded %d calls, want exactly one", len(recs)-before)
			}
			r := recs[len(recs)-1]
			var in claudehook.Input
			if err := json.Unmarshal([]byte(payload(t, c.file, g.ws)), &in); err != nil {
				t.Fatal(err)
			}
			if r.Tool != c.wantTool || r.SessionID != in.SessionID || r.ChannelID != claudehook.Channel ||
				r.SenderID != "dev" || r.CorrelationID != in.ToolUseID {
				t.Errorf("gateway saw tool %q session %q channel %q sender %q correlation %q; want %q %q %q dev %q",
					r.Tool, r.SessionID, r.ChannelID, r.SenderID, r.CorrelationID, c.wantTool, in.SessionID, claudehook.Channel, in.ToolUseID)
			}
			wantOutcome := "allowed"
			if c.wantCode == 2 {
				wantOutcome = "denied"
			}
			if string(r.Outcome) != wantOutcome {
				t.Errorf("gateway outcome %q, want %q", r.Outcome, wantOutcome)
			}
		})
	}
}

func TestGlobOutsideTheWorkspaceIsDenied(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	for _, pattern := range []string{"/etc/**", "../../../../../etc/*", "/**/id_rsa"} {
		in := `{"session_id":"s","cwd":"` + g.ws + `","hook_event_name":"PreToolUse","tool_name":"Glob","tool_input":{"pattern":"` + pattern + `"}}`
		got := runHook(t, in, claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken})
		if got.code != 2 || !strings.Contains(got.stderr, "rule workspaceOnly") {
			t.Errorf("Glob %q: exit %d stderr %q; want a workspaceOnly denial", pattern, got.code, got.stderr)
		}
	}
	in := `{"session_id":"s","cwd":"` + g.ws + `","hook_event_name":"PreToolUse","tool_name":"Glob","tool_input":{"pattern":"config/**/*.yaml"}}`
	if got := runHook(t, in, claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken}); got.code != 0 {
		t.Errorf("Glob inside the workspace: exit %d stderr %q", got.code, got.stderr)
	}
}

func TestGatewayMCPServerIsNotAskedTwice(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	in := payload(t, "pre_mcp_denied.json", g.ws) // mcp__github__delete_repository
	got := runHook(t, in, claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken, GatewayMCPServers: []string{"toolhooks", "github"}})
	if got.code != 0 || len(g.audit.Records()) != 0 {
		t.Fatalf("a tool of the gateway's own MCP server: exit %d stderr %q, %d gateway calls; want 0 and none",
			got.code, got.stderr, len(g.audit.Records()))
	}
	for _, servers := range [][]string{{"githu"}, {"github_"}, {"GitHub"}, {""}} {
		got := runHook(t, in, claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken, GatewayMCPServers: servers})
		if got.code != 2 {
			t.Errorf("servers %q: exit %d, want the gateway's denial", servers, got.code)
		}
	}
}

func TestBashCwdOutsideTheWorkspaceIsDenied(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	in := strings.Replace(payload(t, "pre_bash_git_status.json", g.ws), `"cwd":"`+g.ws+`"`, `"cwd":"/"`, 1)
	got := runHook(t, in, claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken})
	if got.code != 2 || !strings.Contains(got.stderr, "rule workspaceOnly") {
		t.Fatalf("git status run from / gave exit %d, stderr %q; want a workspaceOnly denial", got.code, got.stderr)
	}
}

func TestReadOnlyPolicyMapsClaudeToolsSafely(t *testing.T) {
	g := startGateway(t, "readonly.yaml", nil)
	cases := map[string]int{
		"pre_read_allowed.json":    0, // read_file is read-only
		"pre_grep.json":            0, // grep is read-only
		"pre_mcp_allowed.json":     2, // an upstream tool is unknown, so mutating
		"pre_edit.json":            2,
		"pre_bash_git_status.json": 2,
		"pre_todowrite.json":       2, // unmapped tools keep their name and are mutating
	}
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			got := runHook(t, payload(t, file, g.ws), claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken})
			if got.code != want {
				t.Fatalf("exit %d, want %d; stderr %q", got.code, want, got.stderr)
			}
			if want == 2 && !strings.Contains(got.stderr, "rule readOnly") {
				t.Errorf("stderr %q does not name the readOnly rule", got.stderr)
			}
		})
	}
}

func TestGatewayFailuresDenyByDefault(t *testing.T) {
	// A port nothing listens on: bind one, then close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"executor on fire"}`)
	}))
	t.Cleanup(broken.Close)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `<html>login</html>`)
	}))
	t.Cleanup(garbage.Close)
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(empty.Close)
	in := payload(t, "pre_read_allowed.json", t.TempDir())
	cases := []struct {
		name, url, onError string
		wantCode           int
		wantStderr         string
	}{
		{"unreachable", dead, "", 2, "unreachable"},
		{"unreachable, explicit deny", dead, "deny", 2, "denying Read (--on-error=deny)"},
		{"unreachable, allow", dead, "allow", 0, "WARNING"},
		{"500", broken.URL, "", 2, "executor on fire"},
		{"500, allow", broken.URL, "allow", 0, "ALLOWING Read without a policy decision"},
		{"not JSON", garbage.URL, "", 2, "not a decision"},
		{"a decision without allowed", empty.URL, "allow", 2, "no reason given"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := runHook(t, in, claudehook.Options{Gateway: c.url, Sender: "dev", Token: devToken, OnError: c.onError})
			if got.code != c.wantCode || !strings.Contains(got.stderr, c.wantStderr) {
				t.Fatalf("exit %d stderr %q; want exit %d and %q", got.code, got.stderr, c.wantCode, c.wantStderr)
			}
		})
	}
}

func TestMalformedInputDenies(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	cases := map[string]struct{ stdin, want string }{
		"empty":                 {"", "stdin is empty"},
		"not JSON":              {"Bash rm -rf /", "not a hook event JSON object"},
		"an array":              {`[{"tool_name":"Bash"}]`, "not a hook event JSON object"},
		"two objects":           {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read"} {}`, "unexpected data"},
		"no tool name":          {`{"session_id":"s","hook_event_name":"PreToolUse","tool_input":{}}`, "missing tool_name"},
		"no session":            {`{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/x"}}`, "missing session_id"},
		"tool_input a string":   {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"rm -rf /"}`, "not a JSON object"},
		"command not a string":  {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":["rm","-rf","/"]}}`, `"command" must be a string`},
		"no file_path":          {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"path":"/etc/passwd","content":"x"}}`, `needs the argument "file_path"`},
		"bad mcp name":          {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"mcp__github","tool_input":{}}`, "not mcp__<server>__<tool>"},
		"unknown event":         {`{"session_id":"s","hook_event_name":"UserPromptSubmit","tool_name":"Read"}`, `"UserPromptSubmit" is not supported`},
		"a key in another case": {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","TOOL_NAME":"Bash","tool_input":{"file_path":"x"}}`, `is not spelled "tool_name"`},
		"a key twice":           {`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_name":"Bash","tool_input":{"command":"id"}}`, "more than once"},
		"invalid UTF-8":         {"{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\xff\",\"tool_input\":{}}", "not valid UTF-8"},
		"a lone surrogate":      {`{"session_id":"s\udc00","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"x"}}`, "lone surrogate"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			// Even --on-error=allow does not let bad input through.
			got := runHook(t, c.stdin, claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken, OnError: claudehook.OnErrorAllow})
			if got.code != 2 || !strings.Contains(got.stderr, c.want) || !strings.Contains(got.stderr, "denying") {
				t.Fatalf("exit %d stderr %q; want exit 2 with %q", got.code, got.stderr, c.want)
			}
		})
	}
	if n := len(g.audit.Records()); n != 0 {
		t.Errorf("bad input reached the gateway %d times", n)
	}
}

// A clean result passes: exit 0, nothing on stdout, and the gateway's
// record of it is a result (no decision, so no budget is spent).
func TestPostToolUseOfACleanResultPasses(t *testing.T) {
	g := startGateway(t, "policies.yaml", nil)
	got := runHook(t, payload(t, "post_bash.json", g.ws), claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken})
	if got.code != 0 || got.stderr != "" || got.stdout != "" {
		t.Fatalf("PostToolUse: exit %d stdout %q stderr %q", got.code, got.stdout, got.stderr)
	}
	recs := g.audit.Records()
	if len(recs) != 1 || recs[0].Outcome != hooks.StatusSucceeded || recs[0].Tool != "shell" {
		t.Errorf("records %+v, want the one result", recs)
	}
}

// TestBearerTokenIsChecked: the gateway checks --token: the caller's token
// makes the call, none or a wrong one is refused (and the hook denies), and
// a --sender other than the token's identity is refused too.
func TestBearerTokenIsChecked(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	g := startGateway(t, "policies.yaml", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Authorization"))
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	})
	in := payload(t, "pre_read_allowed.json", g.ws)
	if got := runHook(t, in, claudehook.Options{Gateway: g.url, Token: devToken}); got.code != 0 {
		t.Fatalf("with the token: exit %d stderr %q", got.code, got.stderr)
	}
	if recs := g.audit.Records(); len(recs) != 1 || recs[0].SenderID != "dev" {
		t.Fatalf("audit %+v, want one call of sender dev (the token's identity)", recs)
	}
	for name, o := range map[string]claudehook.Options{
		"no token":       {Gateway: g.url, Sender: "dev"},
		"a wrong token":  {Gateway: g.url, Token: "not-the-token-0123456789"},
		"another sender": {Gateway: g.url, Token: devToken, Sender: "root"},
	} {
		got := runHook(t, in, o)
		if got.code != 2 || !strings.Contains(got.stderr, "40") {
			t.Errorf("%s: exit %d stderr %q; want a deny naming the 4xx", name, got.code, got.stderr)
		}
	}
	// Each refused call is audited as a refusal (hook request), never decided by the hooks.
	rules := map[string]int{}
	for _, r := range g.audit.Records()[1:] {
		if r.Denial == nil || r.Denial.Hook != hooks.RequestHookName {
			t.Errorf("a refused call reached the hooks: %+v", r)
			continue
		}
		rules[r.Denial.Rule]++
	}
	if rules[hooks.RuleUnauthenticated] != 2 || rules[hooks.RuleSenderMismatch] != 1 || len(rules) != 2 {
		t.Errorf("refused calls left audit records by rule %v, want 2 %s and 1 %s", rules, hooks.RuleUnauthenticated, hooks.RuleSenderMismatch)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first call, then the three refused ones in the map's (random) order.
	rest := slices.Clone(seen[min(1, len(seen)):])
	slices.Sort(rest)
	want := []string{"", "Bearer " + devToken, "Bearer not-the-token-0123456789"}
	if len(seen) != 4 || seen[0] != "Bearer "+devToken || !slices.Equal(rest, want) {
		t.Errorf("Authorization headers %q", seen)
	}
}

func TestBadOptionsDeny(t *testing.T) {
	in := payload(t, "pre_read_allowed.json", t.TempDir())
	for name, o := range map[string]claudehook.Options{
		"no gateway":   {},
		"not a URL":    {Gateway: "127.0.0.1:8080"},
		"bad on-error": {Gateway: "http://127.0.0.1:1", OnError: "maybe"},
		"a file URL":   {Gateway: "file:///etc/passwd"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := runHook(t, in, o); got.code != 2 || got.stderr == "" {
				t.Fatalf("exit %d stderr %q", got.code, got.stderr)
			}
		})
	}
}

func TestMapTool(t *testing.T) {
	cases := []struct {
		name, tool, input string
		wantTool          string
		wantArgs          string
	}{
		{"Bash", "Bash", `{"command":"ls","description":"d","timeout":5,"run_in_background":false}`, "shell", `{"command":"ls","cwd":"/w"}`},
		{"Read", "Read", `{"file_path":"/w/a","offset":3,"limit":4}`, "read_file", `{"path":"/w/a"}`},
		{"Write", "Write", `{"file_path":"/w/a","content":"x"}`, "write_file", `{"content":"x","path":"/w/a"}`},
		{"Edit", "Edit", `{"file_path":"/w/a","old_string":"o","new_string":"n","replace_all":true}`, "edit_file", `{"new_string":"n","old_string":"o","path":"/w/a"}`},
		{"MultiEdit", "MultiEdit", `{"file_path":"/w/a","edits":[{"old_string":"o","new_string":"n"}]}`, "edit_file", `{"edits":[{"new_string":"n","old_string":"o"}],"path":"/w/a"}`},
		{"NotebookEdit", "NotebookEdit", `{"notebook_path":"/w/n.ipynb","new_source":"x"}`, "edit_file", `{"new_string":"x","path":"/w/n.ipynb"}`},
		{"Glob without a path uses cwd", "Glob", `{"pattern":"**/*.go"}`, "glob", `{"path":"/w","pattern":"**/*.go"}`},
		{"Glob with a path", "Glob", `{"pattern":"*.go","path":"/etc"}`, "glob", `{"path":"/etc","pattern":"*.go"}`},
		{"Glob of an absolute pattern", "Glob", `{"pattern":"/etc/ssh/*_key"}`, "glob", `{"path":"/w","paths":["/etc/ssh"],"pattern":"/etc/ssh/*_key"}`},
		{"Glob of the root", "Glob", `{"pattern":"/**/id_rsa"}`, "glob", `{"path":"/w","paths":["/"],"pattern":"/**/id_rsa"}`},
		{"Glob climbing out", "Glob", `{"pattern":"../../etc/*"}`, "glob", `{"path":"/w","paths":["/w/../../etc"],"pattern":"../../etc/*"}`},
		{"Glob below the path", "Glob", `{"pattern":"src/**/*.go","path":"/w/a"}`, "glob", `{"path":"/w/a","paths":["/w/a/src"],"pattern":"src/**/*.go"}`},
		{"Grep", "Grep", `{"pattern":"x","glob":"*.go","output_mode":"content"}`, "grep", `{"glob":"*.go","path":"/w","pattern":"x"}`},
		{"LS", "LS", `{"path":"/w/src"}`, "list_dir", `{"path":"/w/src"}`},
		{"WebFetch", "WebFetch", `{"url":"https://example.com","prompt":"p"}`, "web_fetch", `{"url":"https://example.com"}`},
		{"WebSearch", "WebSearch", `{"query":"q"}`, "web_search", `{"query":"q"}`},
		{"mcp", "mcp__fs__read_file", `{"path":"/w/a","n":1.5}`, "fs_read_file", `{"n":1.5,"path":"/w/a"}`},
		{"mcp tool with underscores", "mcp__git_hub__create__issue", `{}`, "git_hub_create__issue", `{}`},
		{"unknown", "Task", `{"prompt":"p"}`, "Task", `{"prompt":"p"}`},
		{"null input", "TodoRead", `null`, "TodoRead", `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &claudehook.Input{ToolName: c.tool, ToolInput: json.RawMessage(c.input), Cwd: "/w"}
			call, err := claudehook.MapTool(in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(call.Args)
			if err != nil {
				t.Fatal(err)
			}
			if call.Tool != c.wantTool || string(b) != c.wantArgs {
				t.Errorf("got %s %s, want %s %s", call.Tool, b, c.wantTool, c.wantArgs)
			}
		})
	}
}

func TestDenialText(t *testing.T) {
	cases := []struct {
		d    wire.Denial
		want string
	}{
		{wire.Denial{Hook: "AutonomyPolicy/ns/p", Policy: &wire.PolicyRef{Kind: "AutonomyPolicy", Namespace: "ns", Name: "p"}, Rule: "r", Reason: "why"},
			"Tool execution denied by hook: AutonomyPolicy/ns/p (rule r): why"},
		{wire.Denial{Hook: "approvals", Policy: &wire.PolicyRef{Kind: "PluginHook", Namespace: "ns", Name: "p"}, Rule: "r", Reason: "why"},
			"Tool execution denied by hook: approvals (policy PluginHook ns/p, rule r): why"},
		{wire.Denial{Hook: "gateway", Rule: "NoPolicy", Reason: "none"}, "Tool execution denied by hook: gateway (rule NoPolicy): none"},
		{wire.Denial{Hook: "native"}, "Tool execution denied by hook: native"},
	}
	for _, c := range cases {
		if got := claudehook.DenialText(&c.d); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// BenchmarkRunPreToolUse measures one hook run (parse, map, HTTP decision
// from a real in-process gateway, answer), without the process start.
func BenchmarkRunPreToolUse(b *testing.B) {
	for _, file := range []string{"pre_read_allowed.json", "pre_bash_rm.json"} {
		b.Run(file, func(b *testing.B) {
			g := startGateway(b, "policies.yaml", nil)
			body, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				b.Fatal(err)
			}
			in := strings.ReplaceAll(string(body), "${WORKSPACE}", g.ws)
			o := claudehook.Options{Gateway: g.url, Sender: "dev", Token: devToken}
			b.ReportAllocs()
			for b.Loop() {
				claudehook.Run(b.Context(), strings.NewReader(in), io.Discard, io.Discard, o)
			}
		})
	}
}
