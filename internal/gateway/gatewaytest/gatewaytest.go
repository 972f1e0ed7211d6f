// Package gatewaytest runs a gateway under test behind a real HTTP server on
// loopback, with a small workspace and callers authenticated by static
// tokens, for the tests of the gateway and of what configures it.
package gatewaytest

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// PushToken authenticates configuration pushes to an Env's gateway.
const PushToken = "0123456789abcdef-test-token"

// Callers' tokens: an Env's calls are made as "agent".
const (
	AgentToken = "agent-token-0123456789"
	OtherToken = "other-token-0123456789"
)

// BasePolicy is an AutonomyPolicy confining calls to the workspace WORKSPACE
// (replace it with Env.Workspace), forbidding **/.env and allowing a few
// shell commands.
const BasePolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: coding-agent
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env"]
  shell:
    allow: true
    allowedCommands: ["echo *", "ls", "sleep *"]
`

// BudgetPolicy is a ContractPolicy allowing three calls per session.
const BudgetPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata:
  name: budget
spec:
  maxToolCalls: 3
`

// Callers authenticates "agent" and "other" (group "team") by static tokens.
func Callers(t testing.TB) *authn.Request {
	t.Helper()
	st, err := authn.ParseStaticTokens([]byte("tokens:\n- {identity: agent, token: " + AgentToken + "}\n" +
		"- {identity: other, token: " + OtherToken + ", groups: [team]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &authn.Request{Tokens: st}
}

// DiscardLogger logs nothing.
func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Env is a gateway under test behind a real HTTP server on loopback.
type Env struct {
	T *testing.T
	// Workspace holds README.md, config/.env and src/main.go.
	Workspace string
	Server    *gateway.Server
	HTTP      *httptest.Server
	Audit     *audit.Memory
}

// New starts a gateway on a new workspace; mutate, when set, adjusts its
// options. Everything is stopped when the test ends.
func New(t *testing.T, mutate func(*gateway.Options)) *Env {
	t.Helper()
	ws := t.TempDir()
	for name, body := range map[string]string{
		"README.md":   "# project\n",
		"config/.env": "SECRET=1\n",
		"src/main.go": "package main\n",
	} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		WriteFile(t, p, body)
	}
	tok, err := gateway.NewStaticToken(PushToken)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Workspace: ws, Audit: &audit.Memory{}}
	opts := gateway.Options{Workspace: ws, Audit: e.Audit, Authenticator: tok, Callers: Callers(t), Logger: DiscardLogger()}
	if mutate != nil {
		mutate(&opts)
	}
	e.Server, err = gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Server.Close)
	e.HTTP = httptest.NewServer(e.Server.Handler())
	t.Cleanup(e.HTTP.Close)
	return e
}

// Do makes a request and returns the status and body.
func (e *Env) Do(method, path, contentType string, body []byte, header map[string]string) (int, []byte) {
	e.T.Helper()
	req, err := http.NewRequest(method, e.HTTP.URL+path, bytes.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.HTTP.Client().Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	return resp.StatusCode, b
}

// PostAs POSTs v as JSON with the bearer token tok ("" for none).
func (e *Env) PostAs(tok, path string, v any) (int, []byte) {
	e.T.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.T.Fatal(err)
	}
	var h map[string]string
	if tok != "" {
		h = map[string]string{"Authorization": "Bearer " + tok}
	}
	return e.Do(http.MethodPost, path, "application/json", b, h)
}

// Call makes a tool call as "agent" in session-1 that must be answered 200.
func (e *Env) Call(tool, args string) wire.ToolCallResponse {
	e.T.Helper()
	req := map[string]any{"sessionId": "session-1", "senderId": "agent", "tool": tool}
	if args != "" {
		req["arguments"] = json.RawMessage(args)
	}
	status, body := e.PostAs(AgentToken, "/v1/tool-calls", req)
	if status != http.StatusOK {
		e.T.Fatalf("tool call answered %d: %s", status, body)
	}
	var r wire.ToolCallResponse
	MustUnmarshal(e.T, body, &r)
	return r
}

// Decide asks /v1/decisions as "agent" in session-1.
func (e *Env) Decide(tool, args string) wire.DecisionResponse {
	e.T.Helper()
	req := map[string]any{"sessionId": "session-1", "tool": tool, "arguments": json.RawMessage(args)}
	status, body := e.PostAs(AgentToken, "/v1/decisions", req)
	if status != http.StatusOK {
		e.T.Fatalf("decision answered %d: %s", status, body)
	}
	var r wire.DecisionResponse
	MustUnmarshal(e.T, body, &r)
	return r
}

// Metrics returns the text of GET /metrics.
func (e *Env) Metrics() string {
	e.T.Helper()
	status, body := e.Do(http.MethodGet, "/metrics", "", nil, nil)
	if status != http.StatusOK {
		e.T.Fatalf("/metrics answered %d", status)
	}
	return string(body)
}

// SentinelCall asks the gateway to create a sentinel file in the workspace
// and reports whether the file exists afterwards.
func (e *Env) SentinelCall(name string) (wire.ToolCallResponse, bool) {
	e.T.Helper()
	r := e.Call("write_file", `{"path":"`+name+`","content":"ran"}`)
	_, err := os.Stat(filepath.Join(e.Workspace, name))
	return r, err == nil
}

// RequireNoPolicy checks that the gateway denies with NoPolicy, creates no
// file, is not ready and says why in /readyz.
func (e *Env) RequireNoPolicy(why string) {
	e.T.Helper()
	if e.Server.Ready() {
		e.T.Errorf("%s: the gateway is ready", why)
	}
	r, ran := e.SentinelCall("sentinel-" + strings.ReplaceAll(why, " ", "-"))
	if ran || r.Status != "denied" || r.Denial == nil || r.Denial.Rule != gateway.RuleNoPolicy {
		e.T.Errorf("%s: call %+v (tool ran: %v), want a NoPolicy denial", why, r, ran)
	}
	status, body := e.Do(http.MethodGet, "/readyz", "", nil, nil)
	var rr wire.ReadyResponse
	MustUnmarshal(e.T, body, &rr)
	if status != http.StatusServiceUnavailable || rr.Ready || rr.Reason == "" {
		e.T.Errorf("%s: /readyz answered %d %s", why, status, body)
	}
}

// WriteFile writes body to path.
func WriteFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// MustUnmarshal decodes the JSON b into v.
func MustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
}

// Eventually polls cond until it holds or 10 seconds pass.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
