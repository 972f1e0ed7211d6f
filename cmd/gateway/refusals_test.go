package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// TestEveryRefusalIsAuditedAndOneBodyLimitHoldsForEveryAPI runs the gateway
// binary with --mcp and a small --max-file-bytes. A body of exactly the
// documented limit (twice --max-file-bytes plus 64 KiB) is served on
// POST /v1/tool-calls and on /mcp alike, and one byte more is refused with
// 413 on both. Every request either API refuses (over the limit, without a
// valid token, from a foreign origin, malformed, naming another sender or
// an unknown session) leaves exactly one audit record: a denied call with
// the refusal's rule.
func TestEveryRefusalIsAuditedAndOneBodyLimitHoldsForEveryAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws, policies := filepath.Join(tmp, "ws"), filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const token = "agent-token-0123456789abcdef"
	for p, body := range map[string]string{
		filepath.Join(tmp, "tokens.yaml"):     "tokens:\n- {identity: agent, token: " + token + "}\n",
		filepath.Join(policies, "agent.yaml"): "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: AutonomyPolicy\nmetadata: {name: agent}\nspec:\n  workspace: {root: " + ws + ", only: true}\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const maxFileBytes = 1024
	limit := int(gateway.BodyBytesFor(maxFileBytes))
	g := startGateway(t, bin, "--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--policy-debounce", "10ms",
		"--mcp", "--auth-tokens-file", filepath.Join(tmp, "tokens.yaml"), "--max-file-bytes", fmt.Sprint(maxFileBytes))

	auth := map[string]string{"Authorization": "Bearer " + token}
	mcpHeaders := func(session string, more map[string]string) map[string]string {
		h := map[string]string{"Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token}
		if session != "" {
			h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = session, "2025-06-18"
		}
		maps.Copy(h, more)
		return h
	}
	post := func(path string, header map[string]string, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	pad := func(body string, n int) string { return body + strings.Repeat(" ", n-len(body)) }

	// An MCP session.
	status, header, body := post(mcpgate.Path, mcpHeaders("", nil), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+
		`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := header.Get("Mcp-Session-Id")
	if status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := post(mcpgate.Path, mcpHeaders(session, nil), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", status, body)
	}

	// The same limit on both APIs: at the limit served, one byte over refused.
	call := `{"sessionId":"s","tool":"write_file","arguments":{"path":"api.txt","content":"api"}}`
	if status, _, body := post("/v1/tool-calls", auth, pad(call, limit)); status != http.StatusOK || !strings.Contains(body, `"status":"succeeded"`) {
		t.Errorf("/v1/tool-calls with a body of %d bytes, the limit: %d %s", limit, status, body)
	}
	mcpCall := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"mcp.txt","content":"mcp"}}}`
	if status, _, body := post(mcpgate.Path, mcpHeaders(session, nil), pad(mcpCall, limit)); status != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Errorf("/mcp with a body of %d bytes, the limit: %d %s", limit, status, body)
	}
	for _, f := range []string{"api.txt", "mcp.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("the call at the limit did not write %s: %v", f, err)
		}
	}

	// Refusals, each with its status and the rule of its audit record.
	type refusal struct {
		name, path string
		header     map[string]string
		body       string
		status     int
		rule       string
	}
	const malformed = hooks.RuleMalformedRequest
	refusals := []refusal{
		{"/v1/tool-calls one byte over the limit", "/v1/tool-calls", auth, pad(call, limit+1), 413, hooks.RuleTooLarge},
		{"/v1/decisions one byte over the limit", "/v1/decisions", auth, pad(call, limit+1), 413, hooks.RuleTooLarge},
		{"/v1/results one byte over the limit", "/v1/results", auth, pad(`{"tool":"read_file","result":"x"}`, limit+1), 413, hooks.RuleTooLarge},
		{"/v1/tool-calls without a token", "/v1/tool-calls", nil, call, 401, hooks.RuleUnauthenticated},
		{"/v1/results with a forged token", "/v1/results", map[string]string{"Authorization": "Bearer forged-token-0123456789"},
			`{"tool":"read_file","result":"x"}`, 401, hooks.RuleUnauthenticated},
		{"/v1/tool-calls malformed", "/v1/tool-calls", auth, `{"tool":`, 400, malformed},
		{"/v1/decisions as a form", "/v1/decisions", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "text/plain"}, call, 415, malformed},
		{"/v1/tool-calls for another sender", "/v1/tool-calls", auth, `{"senderId":"root","tool":"read_file"}`, 400, hooks.RuleSenderMismatch},
		{"/mcp one byte over the limit", mcpgate.Path, mcpHeaders(session, nil), pad(mcpCall, limit+1), 413, hooks.RuleTooLarge},
		{"/mcp without a token", mcpgate.Path, mcpHeaders(session, map[string]string{"Authorization": ""}), mcpCall, 401, hooks.RuleUnauthenticated},
		{"/mcp from a foreign origin", mcpgate.Path, mcpHeaders(session, map[string]string{"Origin": "https://evil.example"}), mcpCall, 403, hooks.RuleForeignOrigin},
		{"/mcp with a key twice", mcpgate.Path, mcpHeaders(session, nil), `{"jsonrpc":"2.0","id":3,"method":"tools/call","method":"ping","params":{}}`, 400, malformed},
		{"/mcp not JSON", mcpgate.Path, mcpHeaders(session, nil), `tools/call write_file`, 400, malformed},
		{"/mcp in an unknown session", mcpgate.Path, mcpHeaders("no-such-session", nil), mcpCall, 404, malformed},
	}
	for _, r := range refusals {
		if status, _, body := post(r.path, r.header, r.body); status != r.status {
			t.Errorf("%s: %d %s, want %d", r.name, status, body, r.status)
		}
	}

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(); err != nil {
		t.Errorf("the gateway exited with %v", err)
	}
	// Count the denied calls' records by API (channel mcp or not) and rule.
	got := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(g.stdout.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	succeeded := 0
	for sc.Scan() {
		var rec struct {
			Msg       string `json:"msg"`
			ChannelID string `json:"channelId"`
			Outcome   string `json:"outcome"`
			Denial    struct {
				Rule string `json:"rule"`
			} `json:"denial"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Msg != "Tool call" {
			continue
		}
		switch rec.Outcome {
		case "denied":
			got[fmt.Sprintf("%v %s", rec.ChannelID == mcpgate.ChannelID, rec.Denial.Rule)]++
		case "succeeded":
			succeeded++
		}
	}
	want := map[string]int{}
	for _, r := range refusals {
		want[fmt.Sprintf("%v %s", r.path == mcpgate.Path, r.rule)]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("denied calls' audit records by (mcp, rule): %v, want %v (one per refused request)\n%s", got, want, g.stdout.String())
	}
	if succeeded != 2 {
		t.Errorf("%d calls succeeded, want the two at the limit", succeeded)
	}
}
