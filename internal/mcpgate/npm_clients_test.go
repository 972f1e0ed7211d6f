package mcpgate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// The tests in this file drive the gateway's /mcp endpoint with third-party
// MCP clients (the MCP Inspector's CLI, mcp-remote and the TypeScript SDK)
// in front of @modelcontextprotocol/server-everything, the reference test
// server, fronted as a stdio upstream ("ev") and as a streamable-HTTP
// upstream ("evh").

// npmClientTimeout bounds every client process a test runs.
const npmClientTimeout = 60 * time.Second

// readOnlyEverything puts server-everything's get-env (not declared
// read-only) out of reach: in ReadOnly mode a call of it is denied.
const readOnlyEverything = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: readonly-ev}
spec:
  mode: ReadOnly
  workspace: {root: WORKSPACE, only: true}
`

const readOnlyEverythingHook = "AutonomyPolicy/default/readonly-ev"

// everythingTools are the server-everything tools the gateway declares read-only.
const everythingTools = `  tools:
    echo: {readOnly: true}
    get-sum: {readOnly: true}
    trigger-long-running-operation: {readOnly: true}
`

// everythingEnv is a gateway fronting server-everything over stdio (tools
// ev_*) and, when httpURL is set, over streamable HTTP at httpURL (tools
// evh_*), with readOnlyEverything in force.
func everythingEnv(t *testing.T, dir, httpURL string) *env {
	t.Helper()
	y := `upstreams:
- name: ev
  stdio:
    command: node
    args: ["` + filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js") + `", "stdio"]
  connectTimeout: 60s
` + everythingTools
	if httpURL != "" {
		y += `- name: evh
  http: {url: "` + httpURL + `"}
  connectTimeout: 60s
` + everythingTools
	}
	cfg, err := mcpgate.ParseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{upstreams: cfg})
	e.apply(readOnlyEverything)
	return e
}

// wantListed checks a tools/list answer under readOnlyEverything: the
// allowed tools are listed as they are, ev_get-env marked denied.
func wantListed(t *testing.T, who string, tools []*mcp.Tool, allowed ...string) {
	t.Helper()
	listed := map[string]string{}
	for _, tool := range tools {
		listed[tool.Name] = tool.Description
	}
	for _, name := range allowed {
		if d, ok := listed[name]; !ok || strings.HasPrefix(d, mcpgate.DeniedMarker) {
			t.Errorf("%s: %s listed=%v description=%q, want listed unmarked", who, name, ok, d)
		}
	}
	if d, ok := listed["ev_get-env"]; !ok || !strings.HasPrefix(d, mcpgate.DeniedMarker) {
		t.Errorf("%s: ev_get-env in readonly mode listed=%v description=%q, want marked denied", who, ok, d)
	}
}

// upstreamRecorder is a reverse proxy in front of an HTTP upstream that
// records the JSON-RPC messages the gateway sends it.
type upstreamRecorder struct {
	mu   sync.Mutex
	msgs []string // "method" or "method name" for tools/call
}

func (r *upstreamRecorder) saw(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.msgs, msg)
}

func (r *upstreamRecorder) record(body []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method == "" {
		return
	}
	msg := m.Method
	if m.Params.Name != "" {
		msg += " " + m.Params.Name
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
}

// everythingHTTP runs server-everything's streamable-HTTP server and returns
// the URL of its /mcp endpoint behind a recording proxy.
func everythingHTTP(t *testing.T, dir string) (string, *upstreamRecorder) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close() // server-everything listens on a port it is given, not on a socket
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting server-everything: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitFor(t, 30*time.Second, "server-everything listening on "+addr, func() bool {
		select {
		case <-exited:
			t.Fatalf("server-everything exited: %s", stderr.String())
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	target, _ := url.Parse("http://" + addr)
	rec := &upstreamRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // server-sent events pass through as they come
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rec.record(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", rec
}

// waitFor polls cond until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and a test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// completedRecord returns the record of the finished call of tool, if any.
func completedRecord(m *audit.Memory, tool string) (audit.Record, bool) {
	for _, r := range m.Records() {
		if r.Tool == tool && r.Phase == audit.PhaseCompleted {
			return r, true
		}
	}
	return audit.Record{}, false
}

// wantDenialText checks a denied call's result as a model sees it: isError,
// the first text line kept for compatibility, then the policy, rule and
// reason of the structured denial in _meta; and, for a tool without an
// output schema, the structured content also serialised as text.
func wantDenialText(t *testing.T, who string, res *mcp.CallToolResult, hook, rule string) {
	t.Helper()
	raw, _ := json.Marshal(res.Meta["toolhooks.dev/denial"])
	var d wire.Denial
	if err := json.Unmarshal(raw, &d); err != nil || d.Hook != hook || d.Rule != rule || d.Reason == "" || d.Policy == nil {
		t.Fatalf("%s: denial in _meta %s (%v), want hook %s rule %s", who, raw, err, hook, rule)
	}
	if !res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: isError=%v content=%d, want a denial", who, res.IsError, len(res.Content))
	}
	first, _ := res.Content[0].(*mcp.TextContent)
	want := hooks.DenialText + hook + "\nPolicy: " + d.Policy.Namespace + "/" + d.Policy.Name + "\nRule: " + rule + "\nReason: " + d.Reason
	if first == nil || first.Text != want {
		t.Errorf("%s: the model sees %q, want the reason in the text:\n%s", who, text(res), want)
	}
	if res.StructuredContent == nil {
		return
	}
	sc, _ := json.Marshal(res.StructuredContent)
	for _, c := range res.Content[1:] {
		if tc, ok := c.(*mcp.TextContent); ok && json.Valid([]byte(tc.Text)) {
			var a, b any
			_ = json.Unmarshal(sc, &a)
			_ = json.Unmarshal([]byte(tc.Text), &b)
			if reflect.DeepEqual(a, b) {
				return
			}
		}
	}
	t.Errorf("%s: structuredContent %s is not also in the text content %q", who, sc, text(res))
}

// inspector runs the MCP Inspector's CLI against the gateway's url with
// args; it returns stdout, stdout and stderr together, and the exit error.
func inspector(t *testing.T, dir, endpoint string, args ...string) (stdout, all string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), npmClientTimeout)
	defer cancel()
	home := t.TempDir() // the Inspector keeps a server catalog in the home directory
	full := append([]string{filepath.Join(dir, "node_modules/.bin/mcp-inspector"), "--cli", endpoint, "--transport", "http"}, args...)
	cmd := exec.CommandContext(ctx, "node", full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"))
	var out, both syncBuffer
	cmd.Stdout = io.MultiWriter(&out, &both)
	cmd.Stderr = &both
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the Inspector did not finish within %s: %s", npmClientTimeout, both.String())
	}
	return out.String(), both.String(), err
}

// clip shortens a client's output for a failure message.
func clip(s string) string {
	const max = 2000
	if len(s) > max {
		return s[:max] + "\n[...]"
	}
	return s
}

// inspectorToolError is the Inspector's exit code for a tool result with isError.
const inspectorToolError = 5

// inspectorCall runs tools/call through the Inspector and decodes the result
// it prints; the Inspector exits with inspectorToolError exactly when the
// result has isError.
func inspectorCall(t *testing.T, dir, endpoint, tool string, toolArgs ...string) *mcp.CallToolResult {
	t.Helper()
	args := []string{"--header", "Authorization: Bearer " + aliceToken, "--method", "tools/call", "--tool-name", tool}
	if len(toolArgs) > 0 {
		args = append(append(args, "--tool-arg"), toolArgs...)
	}
	out, all, err := inspector(t, dir, endpoint, args...)
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != inspectorToolError) {
		t.Fatalf("the Inspector failed calling %s: %v\n%s", tool, err, all)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal([]byte(jsonPart(out)), &res); err != nil {
		t.Fatalf("the Inspector's output for %s: %v\n%s", tool, err, out)
	}
	if toolError := err != nil; toolError != res.IsError {
		t.Errorf("calling %s: the Inspector reported a tool error=%v (%v) for isError=%v", tool, toolError, err, res.IsError)
	}
	return &res
}

// jsonPart is the JSON document a CLI printed after its progress lines.
func jsonPart(out string) string {
	if i := strings.Index(out, "{"); i >= 0 {
		return out[i:]
	}
	return out
}

// TestInspectorCLI drives the gateway with the MCP Inspector's CLI, as a
// user checking a server does, in front of server-everything over stdio.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	e := everythingEnv(t, dir, "")

	t.Run("lists the tools", func(t *testing.T) {
		t.Parallel()
		out, all, err := inspector(t, dir, e.url, "--header", "Authorization: Bearer "+aliceToken, "--method", "tools/list")
		if err != nil {
			t.Fatalf("the Inspector failed: %v\n%s", err, clip(all))
		}
		var got mcp.ListToolsResult
		if err := json.Unmarshal([]byte(jsonPart(out)), &got); err != nil {
			t.Fatalf("the Inspector's output: %v\n%s", err, out)
		}
		wantListed(t, "the Inspector", got.Tools, "ev_get-sum", "read_file")
	})

	t.Run("an allowed call", func(t *testing.T) {
		t.Parallel()
		res := inspectorCall(t, dir, e.url, "ev_get-sum", "a=2", "b=3")
		if res.IsError || text(res) != "The sum of 2 and 3 is 5." {
			t.Errorf("isError=%v text=%q", res.IsError, text(res))
		}
	})

	t.Run("a denied call shows its reason in the text", func(t *testing.T) {
		t.Parallel()
		res := inspectorCall(t, dir, e.url, "ev_get-env")
		wantDenialText(t, "the Inspector", res, readOnlyEverythingHook, autonomy.RuleReadOnly)
	})

	t.Run("a tool error is an error", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(e.ws, "missing.txt")
		res := inspectorCall(t, dir, e.url, "read_file", "path="+missing)
		if !res.IsError || !strings.HasPrefix(text(res), "Error:") {
			t.Errorf("reading a missing file: isError=%v text=%q, want isError and the error text", res.IsError, text(res))
		}
		rec, ok := completedRecord(e.audit, "read_file")
		if !ok || rec.Outcome != hooks.StatusFailed {
			t.Errorf("audit record %+v (found %v), want outcome %s", rec, ok, hooks.StatusFailed)
		}
	})

	t.Run("an invalid token is reported as an invalid token", func(t *testing.T) {
		t.Parallel()
		// Without a terminal the Inspector refuses to start interactive
		// OAuth on any 401 unless told to use only stored credentials;
		// --stored-auth-only makes it report what the gateway said.
		_, all, err := inspector(t, dir, e.url, "--header", "Authorization: Bearer not-a-valid-token", "--stored-auth-only", "--method", "tools/list")
		if err == nil {
			t.Fatalf("the Inspector succeeded with an invalid token:\n%s", clip(all))
		}
		low := strings.ToLower(all)
		if !strings.Contains(low, "invalid_token") && !strings.Contains(low, "invalid token") {
			t.Errorf("the Inspector's message does not say the token is invalid:\n%s", all)
		}
		for _, oauth := range []string{"registration", "authorization server", "/authorize", "interactive oauth"} {
			if strings.Contains(low, oauth) {
				t.Errorf("the Inspector went into interactive OAuth (%q):\n%s", oauth, all)
			}
		}
	})

	t.Run("a foreign origin is refused", func(t *testing.T) {
		t.Parallel()
		_, all, err := inspector(t, dir, e.url, "--header", "Authorization: Bearer "+aliceToken, "--header", "Origin: https://evil.example", "--method", "tools/list")
		if err == nil || !strings.Contains(all, `"status":403`) {
			t.Errorf("the Inspector with a foreign Origin: err=%v, want refused with 403:\n%s", err, clip(all))
		}
	})
}

// initializeBody is a JSON-RPC initialize request.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// postMCP sends body to the gateway's endpoint with the given headers.
func postMCP(t *testing.T, endpoint, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestOAuthAwareClientsSeeTheRightChallenge checks, on the wire, what
// OAuth-aware clients such as the Inspector and mcp-remote read from a 401:
// the bearer challenge, its error for a bad token, and the protected
// resource metadata it points to.
func TestOAuthAwareClientsSeeTheRightChallenge(t *testing.T) {
	e := newEnv(t, envOptions{})
	meta := e.base + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name, auth string
		invalid    bool
	}{
		{"no token", "", false},
		{"an invalid token", "Bearer not-a-valid-token", true},
		{"a basic header", "Basic YWxpY2U6c2VjcmV0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			resp, body := postMCP(t, e.url, initializeBody, h)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", resp.StatusCode, body)
			}
			c := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(c, "Bearer ") || !strings.Contains(c, `resource_metadata="`+meta+`"`) {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge with resource_metadata=%q", c, meta)
			}
			if got := strings.Contains(c, `error="invalid_token"`); got != tc.invalid {
				t.Errorf("WWW-Authenticate %q: error=\"invalid_token\" present=%v, want %v", c, got, tc.invalid)
			}
		})
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(e.base + p)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource string `json:"resource"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || doc.Resource == "" {
			t.Errorf("GET %s: status %d, decode %v, resource %q: want the protected resource metadata", p, resp.StatusCode, err, doc.Resource)
		}
		if p == "/.well-known/oauth-protected-resource/mcp" && doc.Resource != e.url {
			t.Errorf("GET %s: resource %q, want %q", p, doc.Resource, e.url)
		}
	}
}

// TestForeignOriginRefused sends what a web page on another site would: the
// gateway answers 403 with a JSON-RPC error, and still serves its own origin.
func TestForeignOriginRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	auth := "Bearer " + aliceToken
	resp, body := postMCP(t, e.url, initializeBody, map[string]string{"Authorization": auth, "Origin": "https://evil.example"})
	var rpc struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusForbidden || json.Unmarshal([]byte(body), &rpc) != nil || rpc.Error == nil {
		t.Errorf("foreign Origin: status %d body %q, want 403 with a JSON-RPC error", resp.StatusCode, body)
	}
	if resp, body := postMCP(t, e.url, initializeBody, map[string]string{"Authorization": auth, "Origin": e.base}); resp.StatusCode != http.StatusOK {
		t.Errorf("the gateway's own Origin: status %d body %q, want 200", resp.StatusCode, body)
	}
}

// connectMCPRemote starts mcp-remote in front of endpoint with token and
// connects the Go SDK's client to its stdio; stderr collects its output.
// BROWSER=true: were mcp-remote to open an authorization page, it would run
// true instead of a browser.
func connectMCPRemote(ctx context.Context, t *testing.T, dir, endpoint, token string) (*mcp.ClientSession, *syncBuffer, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "node_modules/mcp-remote/dist/proxy.js"), endpoint,
		"--header", "Authorization: Bearer "+token, "--transport", "http-only")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_REMOTE_CONFIG_DIR="+t.TempDir(), "BROWSER=true")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	return cs, stderr, err
}

// TestMCPRemote drives the gateway through mcp-remote, the stdio-to-HTTP
// proxy desktop hosts use for remote servers, with the Go SDK's client on
// its stdio side.
func TestMCPRemote(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	e := everythingEnv(t, dir, "")
	ctx, cancel := context.WithTimeout(context.Background(), npmClientTimeout)
	defer cancel()
	cs, stderr, err := connectMCPRemote(ctx, t, dir, e.url, aliceToken)
	if err != nil {
		t.Fatalf("connecting through mcp-remote: %v\n%s", err, stderr.String())
	}
	defer func() { _ = cs.Close() }()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list through mcp-remote: %v\n%s", err, stderr.String())
	}
	wantListed(t, "mcp-remote", tools.Tools, "ev_echo")

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev_echo", Arguments: map[string]any{"message": "through mcp-remote"}})
	if err != nil || res.IsError || text(res) != "Echo: through mcp-remote" {
		t.Errorf("allowed call: err=%v result=%+v text=%q\n%s", err, res, text(res), stderr.String())
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev_get-env", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("denied call: %v\n%s", err, stderr.String())
	}
	wantDenialText(t, "mcp-remote", res, readOnlyEverythingHook, autonomy.RuleReadOnly)
	if rec, ok := completedRecord(e.audit, "ev_get-env"); !ok || rec.Outcome != hooks.StatusDenied || rec.SenderID != "alice" {
		t.Errorf("audit record %+v (found %v), want alice's call denied", rec, ok)
	}
}

// TestMCPRemoteWithAnInvalidToken: mcp-remote, which answers a 401 by
// starting OAuth, ends with a message that says the token was refused (the
// gateway's registration answer) rather than a bare registration failure,
// and nothing of the caller's runs.
func TestMCPRemoteWithAnInvalidToken(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	e := everythingEnv(t, dir, "")
	ctx, cancel := context.WithTimeout(context.Background(), npmClientTimeout)
	defer cancel()
	cs, stderr, err := connectMCPRemote(ctx, t, dir, e.url, "not-a-token")
	if err == nil {
		_ = cs.Close()
		t.Fatalf("mcp-remote connected with an invalid token\n%s", stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "invalid token") || !strings.Contains(out, "registers no OAuth clients") {
		t.Errorf("mcp-remote's output does not say the token was refused as an invalid token:\n%s", clip(out))
	}
	if got := refusals(e.audit); len(got) != 1 || got[hooks.RuleUnauthenticated] == 0 {
		t.Errorf("audit records of a caller whose token was refused: %v, want only refusals by rule %s", got, hooks.RuleUnauthenticated)
	}
}

// tsSession is a running session.mjs: an interactive TypeScript-SDK client.
type tsSession struct {
	t      *testing.T
	stdin  io.WriteCloser
	events chan map[string]any
	stderr *syncBuffer
}

// startTSSession starts session.mjs against endpoint and waits until it is connected.
func startTSSession(t *testing.T, dir, endpoint string) *tsSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), npmClientTimeout)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "session.mjs"), endpoint, aliceToken)
	cmd.Dir = dir
	s := &tsSession{t: t, events: make(chan map[string]any, 100), stderr: &syncBuffer{}}
	cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the TypeScript session: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				s.events <- ev
			}
		}
	}()
	t.Cleanup(func() {
		_ = s.stdin.Close()
		cancel()
		<-done
		_ = cmd.Wait()
	})
	s.next("ready")
	return s
}

// send writes one command to the session.
func (s *tsSession) send(cmd map[string]any) {
	s.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := s.stdin.Write(append(b, '\n')); err != nil {
		s.t.Fatalf("writing to the TypeScript session: %v\n%s", err, s.stderr.String())
	}
}

// next returns the next event whose op is one of ops, recording the others
// in skipped; it fails when none comes within the client timeout.
func (s *tsSession) next(ops ...string) map[string]any {
	s.t.Helper()
	ev, err := s.nextWithin(npmClientTimeout, ops...)
	if err != nil {
		s.t.Fatalf("%v\n%s", err, s.stderr.String())
	}
	return ev
}

func (s *tsSession) nextWithin(d time.Duration, ops ...string) (map[string]any, error) {
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return nil, fmt.Errorf("the TypeScript session exited while waiting for %v", ops)
			}
			for _, op := range ops {
				if ev["op"] == op {
					return ev, nil
				}
			}
			if ev["op"] == "clientError" {
				return nil, fmt.Errorf("the TypeScript SDK reported %q while waiting for %v", ev["message"], ops)
			}
		case <-deadline:
			return nil, fmt.Errorf("no %v event within %s", ops, d)
		}
	}
}

// resultOf decodes a "result" event's tool result.
func resultOf(t *testing.T, ev map[string]any) *mcp.CallToolResult {
	t.Helper()
	b, _ := json.Marshal(ev["result"])
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("result %s: %v", b, err)
	}
	return &res
}

// TestTypeScriptSDKProgress: the client's progressToken reaches
// server-everything's long-running tool through the gateway, over stdio and
// over HTTP, and its progress notifications come back to the client.
func TestTypeScriptSDKProgress(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	httpURL, _ := everythingHTTP(t, dir)
	e := everythingEnv(t, dir, httpURL)
	s := startTSSession(t, dir, e.url)
	for _, tool := range []string{"ev_trigger-long-running-operation", "evh_trigger-long-running-operation"} {
		s.send(map[string]any{"op": "call", "id": tool, "name": tool, "progress": true,
			"arguments": map[string]any{"duration": 1, "steps": 4}})
		var progress []string
		for {
			ev := s.next("progress", "result", "error")
			if ev["id"] != tool {
				t.Fatalf("event %v, want one of call %s", ev, tool)
			}
			if ev["op"] == "error" {
				t.Fatalf("%s: %v", tool, ev["message"])
			}
			if ev["op"] == "result" {
				if res := resultOf(t, ev); res.IsError || !strings.HasPrefix(text(res), "Long running operation completed") {
					t.Errorf("%s: isError=%v text=%q", tool, res.IsError, text(res))
				}
				break
			}
			progress = append(progress, fmt.Sprintf("%v/%v", ev["progress"], ev["total"]))
		}
		if got, want := strings.Join(progress, " "), "1/4 2/4 3/4 4/4"; got != want {
			t.Errorf("%s: progress notifications %q, want %q", tool, got, want)
		}
	}
}

// TestTypeScriptSDKCancellation: a client aborts a slow call of
// server-everything (HTTP upstream) in flight; the SDK sends
// notifications/cancelled. The gateway cancels the upstream call, answers
// nothing for the cancelled request and audits the call as cancelled.
func TestTypeScriptSDKCancellation(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	httpURL, upstream := everythingHTTP(t, dir)
	e := everythingEnv(t, dir, httpURL)
	s := startTSSession(t, dir, e.url)
	const tool = "evh_trigger-long-running-operation"
	s.send(map[string]any{"op": "call", "id": "slow", "name": tool, "arguments": map[string]any{"duration": 30, "steps": 30}})
	waitFor(t, npmClientTimeout, "the call to reach server-everything", func() bool {
		return upstream.saw("tools/call trigger-long-running-operation")
	})
	s.send(map[string]any{"op": "cancel", "id": "slow"})
	if ev := s.next("error", "result"); ev["op"] != "error" || !strings.Contains(fmt.Sprint(ev["message"]), "cancelled by the test") {
		t.Fatalf("the aborted call ended with %v, want the client's abort", ev)
	}
	waitFor(t, npmClientTimeout, "the cancellation to reach server-everything", func() bool {
		return upstream.saw("notifications/cancelled")
	})
	var rec audit.Record
	waitFor(t, npmClientTimeout, "the call's audit record", func() bool {
		var ok bool
		rec, ok = completedRecord(e.audit, tool)
		return ok
	})
	// The gateway wrote the record before it would answer; a round trip on
	// the same session lets a response to the cancelled request arrive
	// before the session is checked for one.
	s.send(map[string]any{"op": "ping"})
	if _, err := s.nextWithin(npmClientTimeout, "pong"); err != nil {
		t.Errorf("after the cancellation: %v", err)
	}
	if want := hooks.StatusCancelled; rec.Outcome != want {
		t.Errorf("audit outcome %q, want %q", rec.Outcome, want)
	}
}

// TestTypeScriptSDKListChanged: a policy change that alters what tools/list
// answers reaches an open session as notifications/tools/list_changed, and
// the next tools/list shows the change.
func TestTypeScriptSDKListChanged(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	e := everythingEnv(t, dir, "")
	s := startTSSession(t, dir, e.url)
	marked := func() bool {
		s.send(map[string]any{"op": "list"})
		ev := s.next("list")
		tools, _ := ev["tools"].([]any)
		for _, x := range tools {
			if m, _ := x.(map[string]any); m["name"] == "ev_get-env" {
				return strings.HasPrefix(fmt.Sprint(m["description"]), mcpgate.DeniedMarker)
			}
		}
		t.Fatalf("ev_get-env is not listed: %v", tools)
		return false
	}
	if !marked() {
		t.Fatal("ev_get-env is not marked denied under the read-only policy")
	}
	e.apply(strings.Replace(readOnlyEverything, "mode: ReadOnly", "mode: Full", 1))
	if _, err := s.nextWithin(10*time.Second, "listChanged"); err != nil {
		t.Errorf("after the policy edit: %v", err)
	}
	if marked() {
		t.Error("ev_get-env is still marked denied after the policy allows it")
	}
}

// TestTypeScriptSDKNoProgressAfterTheAnswer: a stdio upstream reports
// progress every few milliseconds and goes on for a while after the
// gateway's tool timeout cancelled its call. The TypeScript client gets the
// timed-out answer and then nothing more for that request: no progress
// event and no "unknown token" error from the SDK. A second call with
// progress proves the stream delivered everything sent before it: the
// upstream's notifications arrive on one pipe in order and the gateway
// forwards them on the session's one stream, so a late notification of the
// first call, forwarded at all, reaches the client before the second call's.
func TestTypeScriptSDKNoProgressAfterTheAnswer(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &mcpgate.Config{Upstreams: []mcpgate.UpstreamConfig{{
		Name: "proc", Stdio: &mcpgate.StdioConfig{Command: exe, Env: map[string]string{upstreamEnvVar: "1"}},
	}}}
	e := newEnv(t, envOptions{upstreams: cfg, toolTimeout: time.Second})
	e.apply(codingPolicy)
	s := startTSSession(t, dir, e.url)
	// next reads events up to one of ops, failing on any SDK error and on
	// progress for a call that has its answer.
	answered := map[any]bool{}
	progress := map[any]int{}
	next := func(ops ...string) map[string]any {
		t.Helper()
		for {
			ev := s.next(append(ops, "clientError", "progress")...)
			switch ev["op"] {
			case "clientError":
				t.Fatalf("the TypeScript SDK reported %q", ev["message"])
			case "progress":
				if answered[ev["id"]] {
					t.Fatalf("progress %v for call %v after its answer", ev["progress"], ev["id"])
				}
				progress[ev["id"]]++
				if !slices.Contains(ops, "progress") {
					continue
				}
			case "result", "error":
				answered[ev["id"]] = true
			}
			return ev
		}
	}
	done := filepath.Join(t.TempDir(), "done")
	s.send(map[string]any{"op": "call", "id": "slow", "name": "proc_progress_on", "progress": true, "arguments": map[string]any{"done": done}})
	ev := next("result", "error")
	if res := resultOf(t, ev); ev["id"] != "slow" || !res.IsError || text(res) != hooks.TimedOutText {
		t.Fatalf("the slow call answered %v, want %q", ev, hooks.TimedOutText)
	}
	if progress["slow"] == 0 {
		t.Error("no progress reached the client before the timeout")
	}
	if rec, ok := completedRecord(e.audit, "proc_progress_on"); !ok || rec.Outcome != hooks.StatusTimedOut {
		t.Errorf("audit record %+v, want outcome %s", rec, hooks.StatusTimedOut)
	}
	// The upstream goes on reporting for 300ms after the cancellation
	// reached it; the second call starts once it has stopped.
	waitFor(t, npmClientTimeout, "the upstream to stop reporting the cancelled call's progress", func() bool {
		_, err := os.Stat(done)
		return err == nil
	})
	s.send(map[string]any{"op": "call", "id": "fast", "name": "proc_progress", "progress": true})
	ev = next("result", "error")
	if res := resultOf(t, ev); ev["id"] != "fast" || res.IsError || progress["fast"] != 3 {
		t.Fatalf("the second call answered %v after %d progress notifications, want 3", ev, progress["fast"])
	}
	s.send(map[string]any{"op": "ping"})
	next("pong")
}
