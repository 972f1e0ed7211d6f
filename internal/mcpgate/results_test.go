package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/tools"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Built-in tools' failures are errors over MCP (isError), failed in the
// audit record, the metrics and POST /v1/tool-calls, and keep their text.
func TestBuiltinToolErrorsAreErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	big := strings.Repeat("a", tools.DefaultMaxReadBytes+1)
	if err := os.WriteFile(filepath.Join(e.ws, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, e.url, aliceToken)
	cases := []struct{ tool, args, want string }{
		{"read_file", `{"path":"missing.txt"}`, "Error: read_file: missing.txt does not exist"},
		{"read_file", `{"path":"dir"}`, "Error: read_file: dir is a directory (use list_dir)"},
		{"read_file", `{"path":"big.txt"}`, fmt.Sprintf("Error: read_file: big.txt is larger than the %d-byte limit", tools.DefaultMaxReadBytes)},
		{"read_file", `{"path":"README.md","limit":3}`, `Error: read_file does not take the argument(s) "limit"`},
		{"edit_file", `{"path":"README.md","old_string":"absent","new_string":"x"}`, "Error: edit_file: old_string does not occur in README.md"},
		{"write_file", `{"path":"dir","content":"x"}`, "Error: write_file: dir is a directory"},
	}
	for _, tc := range cases {
		res := call(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.HasPrefix(text(res), tc.want) || denialOf(t, res) != nil {
			t.Errorf("MCP %s %s: isError=%v text=%q, want %q", tc.tool, tc.args, res.IsError, text(res), tc.want)
		}
		if rec := lastRecord(t, e.audit); rec.Tool != tc.tool || rec.Outcome != hooks.StatusFailed || rec.ChannelID != "mcp" {
			t.Errorf("audit of MCP %s %s: %+v", tc.tool, tc.args, rec)
		}
		got := postToolCall(t, e, tc.tool, tc.args)
		if got.Status != string(hooks.StatusFailed) || !strings.HasPrefix(got.Result, tc.want) {
			t.Errorf("POST /v1/tool-calls %s %s: %+v", tc.tool, tc.args, got)
		}
		if rec := lastRecord(t, e.audit); rec.Tool != tc.tool || rec.Outcome != hooks.StatusFailed {
			t.Errorf("audit of POST %s %s: %+v", tc.tool, tc.args, rec)
		}
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "README.md")); err != nil || string(b) != "# project\n" {
		t.Errorf("README.md after the failed edits: %q %v", b, err)
	}
	m := e.metrics()
	for _, want := range []string{
		`toolhooks_tool_calls_total{caller_kind="static",outcome="failed",tool="read_file"} 8`,
		`toolhooks_tool_calls_total{caller_kind="static",outcome="failed",tool="edit_file"} 2`,
		`toolhooks_tool_calls_total{caller_kind="static",outcome="failed",tool="write_file"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `outcome="succeeded"`) {
		t.Errorf("a failed call was counted as succeeded:\n%s", m)
	}
}

// postToolCall makes a call through POST /v1/tool-calls as alice.
func postToolCall(t *testing.T, e *env, tool, args string) wire.ToolCallResponse {
	t.Helper()
	body := fmt.Sprintf(`{"tool":%q,"arguments":%s}`, tool, args)
	req, err := http.NewRequest(http.MethodPost, e.base+"/v1/tool-calls", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out wire.ToolCallResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/tool-calls: %d %v", resp.StatusCode, err)
	}
	return out
}

// A call of a tool the gateway does not have runs nothing and is audited
// and counted as unknown_tool; the MCP answer is the protocol's error.
func TestUnknownToolIsAuditedAndNotADenial(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{"path": "x"}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "no_such_tool"`) {
		t.Fatalf("unknown tool: %v", err)
	}
	rec := lastRecord(t, e.audit)
	if rec.Tool != "no_such_tool" || rec.Outcome != hooks.StatusUnknownTool || rec.SessionID != cs.ID() ||
		rec.SenderID != "alice" || rec.Denial != nil {
		t.Fatalf("audit of the unknown tool: %+v", rec)
	}
	if n := len(e.audit.Records()); n != 1 {
		t.Fatalf("%d audit records for one call", n)
	}
	if m := e.metrics(); !strings.Contains(m, `toolhooks_tool_calls_total{caller_kind="static",outcome="unknown_tool",tool="other"} 1`) {
		t.Errorf("the unknown tool call was not counted:\n%s", m)
	}
}

// Before any configuration the gateway denies every call, an unknown tool's
// too, over MCP as over POST /v1/tool-calls.
func TestUnknownToolBeforeAnyConfigurationIsDenied(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs := connect(t, e.url, aliceToken)
	res := call(t, cs, "no_such_tool", `{}`)
	if d := denialOf(t, res); !res.IsError || d == nil {
		t.Fatalf("unknown tool without a configuration: isError=%v text=%q", res.IsError, text(res))
	}
	if rec := lastRecord(t, e.audit); rec.Tool != "no_such_tool" || rec.Outcome != hooks.StatusDenied {
		t.Fatalf("audit: %+v", rec)
	}
}

// A request over the size limit is refused unread (413) and audited as a
// denied call of its caller and session.
func TestOversizedRequestIsAudited(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	content := strings.Repeat("a", int(gateway.DefaultMaxBodyBytes))
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big.txt","content":%q}}}`, content)
	req, err := http.NewRequest(http.MethodPost, e.url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "big.txt")); !os.IsNotExist(err) {
		t.Fatalf("the oversized call wrote its file: %v", err)
	}
	rec := lastRecord(t, e.audit)
	if rec.Outcome != hooks.StatusDenied || rec.Denial == nil || rec.Denial.Rule != hooks.RuleTooLarge ||
		rec.SenderID != "alice" || rec.SessionID != cs.ID() || rec.ChannelID != "mcp" {
		t.Fatalf("audit of the oversized request: %+v", rec)
	}
	if m := e.metrics(); !strings.Contains(m, `toolhooks_denials_total{caller_kind="static",hook="arguments",tool="other"} 1`) {
		t.Errorf("the oversized request was not counted:\n%s", m)
	}
}

// An upstream's error texts reach the caller without the upstream's session
// id: here the upstream forgets the session (404, which go-sdk reports
// naming the session id).
func TestUpstreamErrorsDoNotExposeTheUpstreamSession(t *testing.T) {
	srv, _ := newUpstreamServer()
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var forget atomic.Bool
	var seen sync.Map // the session ids the upstream handed out
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			seen.Store(id, true)
			if forget.Load() {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	if res := call(t, cs, "up_echo", `{"text":"hi"}`); res.IsError {
		t.Fatalf("up_echo: %q", text(res))
	}
	forget.Store(true)
	res := call(t, cs, "up_echo", `{"text":"hi"}`)
	if !res.IsError || !strings.HasPrefix(text(res), hooks.FailedText) || !strings.Contains(text(res), "[redacted]") {
		t.Fatalf("the upstream forgot the session: isError=%v text=%q", res.IsError, text(res))
	}
	n := 0
	seen.Range(func(k, _ any) bool {
		n++
		if strings.Contains(text(res), k.(string)) {
			t.Errorf("the error text %q holds the upstream session id %q", text(res), k)
		}
		return true
	})
	if n == 0 {
		t.Fatal("the upstream saw no session id")
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusFailed {
		t.Fatalf("audit: %+v", rec)
	}
}

// An upstream URL's credentials never reach the caller in an error text.
func TestUpstreamErrorsDoNotExposeTheUpstreamURL(t *testing.T) {
	up, _ := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig("http://user:pa55word@" + strings.TrimPrefix(up.URL, "http://") + "/?token=s3cret-token")})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	up.CloseClientConnections()
	up.Close()
	for range 2 { // the call that finds the upstream down, and the reconnect
		res := call(t, cs, "up_echo", `{"text":"hi"}`)
		if !res.IsError || !strings.HasPrefix(text(res), hooks.FailedText) {
			t.Fatalf("upstream down: isError=%v text=%q", res.IsError, text(res))
		}
		for _, secret := range []string{"s3cret-token", "pa55word", "user:"} {
			if strings.Contains(text(res), secret) {
				t.Errorf("the error text %q holds %q", text(res), secret)
			}
		}
	}
}

// One limit: a file as large as the gateway's file limit, written through
// MCP, is read back through MCP; one byte more is refused by write_file
// (failed), and a request over the body limit derived from it is refused
// unread.
func TestFileAndBodyLimitsAgree(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, envOptions{maxFileBytes: limit})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	// Text that JSON escapes to more than its size: quotes, backslashes, newlines.
	line := `say "hi" \ there` + "\n"
	content := strings.Repeat(line, limit/len(line))
	content += strings.Repeat("x", limit-len(content))
	args, err := json.Marshal(map[string]string{"path": "big.txt", "content": content})
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, "write_file", string(args)); res.IsError {
		t.Fatalf("writing %d bytes: %q", len(content), text(res))
	}
	if res := call(t, cs, "read_file", `{"path":"big.txt"}`); res.IsError || text(res) != content {
		t.Fatalf("reading back %d bytes: isError=%v, %d bytes", len(content), res.IsError, len(text(res)))
	}
	args, err = json.Marshal(map[string]string{"path": "big.txt", "content": content + "y"})
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "write_file", string(args))
	if want := fmt.Sprintf("Error: write_file: content is larger than the %d-byte limit", limit); !res.IsError || text(res) != want {
		t.Fatalf("writing one byte more: isError=%v text=%q", res.IsError, text(res))
	}
	// A body over BodyBytesFor(limit) never reaches the SDK.
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file",
		Arguments: map[string]any{"path": "huge.txt", "content": strings.Repeat("z", int(gateway.BodyBytesFor(limit)))}})
	if err == nil {
		t.Fatal("a request over the body limit was answered")
	}
	if _, err := os.Stat(filepath.Join(e.ws, "huge.txt")); !os.IsNotExist(err) {
		t.Fatalf("the oversized call wrote its file: %v", err)
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusDenied || rec.Denial == nil || rec.Denial.Rule != hooks.RuleTooLarge {
		t.Fatalf("audit of the oversized call: %+v", rec)
	}
}
