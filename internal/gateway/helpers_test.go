package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/wire"
)

const testToken = "0123456789abcdef-test-token"

// Callers' tokens: the env's calls are made as "agent".
const (
	agentToken = "agent-token-0123456789"
	otherToken = "other-token-0123456789"
)

// testCallers authenticates "agent" and "other" (group "team") by static tokens.
func testCallers(t testing.TB) *authn.Request {
	t.Helper()
	st, err := authn.ParseStaticTokens([]byte("tokens:\n- {identity: agent, token: " + agentToken + "}\n" +
		"- {identity: other, token: " + otherToken + ", groups: [team]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &authn.Request{Tokens: st}
}

// env is a gateway under test behind a real HTTP server on loopback.
type env struct {
	t     *testing.T
	ws    string
	srv   *gateway.Server
	http  *httptest.Server
	audit *audit.Memory
}

func newEnv(t *testing.T, mutate func(*gateway.Options)) *env {
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
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := gateway.NewStaticToken(testToken)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ws: ws, audit: &audit.Memory{}}
	opts := gateway.Options{Workspace: ws, Audit: e.audit, Authenticator: tok, Callers: testCallers(t), Logger: discardLogger()}
	if mutate != nil {
		mutate(&opts)
	}
	e.srv, err = gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.srv.Close)
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(e.http.Close)
	return e
}

// do makes a request and returns the status and body.
func (e *env) do(method, path, contentType string, body []byte, header map[string]string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// post POSTs v as JSON, as the caller "agent".
func (e *env) post(path string, v any) (int, []byte) {
	e.t.Helper()
	return e.postAs(agentToken, path, v)
}

// postAs POSTs v as JSON with the bearer token tok ("" for none).
// readAs makes a read_file call of README.md in session as the caller of
// tok and returns its outcome: the status, then ":rule" for a denial.
func (e *env) readAs(tok, session string) string {
	e.t.Helper()
	r := e.readResponse(tok, session)
	if r.Denial != nil {
		return r.Status + ":" + r.Denial.Rule
	}
	return r.Status
}

// readResponse is readAs's whole answer.
func (e *env) readResponse(tok, session string) wire.ToolCallResponse {
	e.t.Helper()
	code, body := e.postAs(tok, "/v1/tool-calls", map[string]any{"sessionId": session, "tool": "read_file",
		"arguments": map[string]string{"path": "README.md"}})
	if code != http.StatusOK {
		e.t.Fatalf("answered %d %s", code, body)
	}
	var r wire.ToolCallResponse
	mustUnmarshal(e.t, body, &r)
	return r
}

func (e *env) postAs(tok, path string, v any) (int, []byte) {
	e.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	var h map[string]string
	if tok != "" {
		h = map[string]string{"Authorization": "Bearer " + tok}
	}
	return e.do(http.MethodPost, path, "application/json", b, h)
}

// call makes a tool call that must be answered 200.
func (e *env) call(tool, args string) wire.ToolCallResponse {
	e.t.Helper()
	req := map[string]any{"sessionId": "session-1", "senderId": "agent", "tool": tool}
	if args != "" {
		req["arguments"] = json.RawMessage(args)
	}
	status, body := e.post("/v1/tool-calls", req)
	if status != http.StatusOK {
		e.t.Fatalf("tool call answered %d: %s", status, body)
	}
	var r wire.ToolCallResponse
	mustUnmarshal(e.t, body, &r)
	return r
}

// decide asks /v1/decisions.
func (e *env) decide(tool, args string) wire.DecisionResponse {
	e.t.Helper()
	status, body := e.post("/v1/decisions", map[string]any{"sessionId": "session-1", "tool": tool, "arguments": json.RawMessage(args)})
	if status != http.StatusOK {
		e.t.Fatalf("decision answered %d: %s", status, body)
	}
	var r wire.DecisionResponse
	mustUnmarshal(e.t, body, &r)
	return r
}

// push PUTs cfg with the test token.
func (e *env) push(cfg *gatewayconfig.Config) (int, []byte) {
	e.t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(http.MethodPut, "/v1/config", "application/json", b, map[string]string{"Authorization": "Bearer " + testToken})
}

// mustPush pushes cfg and requires a 200.
func (e *env) mustPush(cfg *gatewayconfig.Config) gateway.ApplyResult {
	e.t.Helper()
	status, body := e.push(cfg)
	if status != http.StatusOK {
		e.t.Fatalf("push answered %d: %s", status, body)
	}
	var r gateway.ApplyResult
	mustUnmarshal(e.t, body, &r)
	return r
}

func (e *env) metrics() string {
	e.t.Helper()
	status, body := e.do(http.MethodGet, "/metrics", "", nil, nil)
	if status != http.StatusOK {
		e.t.Fatalf("/metrics answered %d", status)
	}
	return string(body)
}

// compileYAML compiles policy YAML for namespace default, failing on any outcome error.
func compileYAML(t testing.TB, ws, docs string) *gatewayconfig.Config {
	t.Helper()
	p, err := policyfile.Parse([]byte(strings.ReplaceAll(docs, "WORKSPACE", ws)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, p)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Fatalf("%s: %v", compile.HookName(o.Policy), o.Err)
		}
	}
	return cfg
}

const basePolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
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

const budgetPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata:
  name: budget
spec:
  maxToolCalls: 3
`

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
}

// eventually polls cond until it holds or 10 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nonBlank marks hooks.Result fields used only to silence unused imports in some builds.
var _ = hooks.DenialText
