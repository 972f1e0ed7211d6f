package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gateway/gatewaytest"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/wire"
)

const testToken = gatewaytest.PushToken

// Callers' tokens: the env's calls are made as "agent".
const (
	agentToken = gatewaytest.AgentToken
	otherToken = gatewaytest.OtherToken
)

var (
	discardLogger = gatewaytest.DiscardLogger
	mustUnmarshal = gatewaytest.MustUnmarshal
)

// env is a gateway under test behind a real HTTP server on loopback (see
// gatewaytest.Env), with short names for its parts.
type env struct {
	*gatewaytest.Env
	t     *testing.T
	ws    string
	srv   *gateway.Server
	http  *httptest.Server
	audit *audit.Memory
}

func newEnv(t *testing.T, mutate func(*gateway.Options)) *env {
	t.Helper()
	h := gatewaytest.New(t, mutate)
	return &env{Env: h, t: t, ws: h.Workspace, srv: h.Server, http: h.HTTP, audit: h.Audit}
}

func (e *env) do(method, path, contentType string, body []byte, header map[string]string) (int, []byte) {
	e.t.Helper()
	return e.Do(method, path, contentType, body, header)
}

func (e *env) call(tool, args string) wire.ToolCallResponse {
	e.t.Helper()
	return e.Call(tool, args)
}

func (e *env) decide(tool, args string) wire.DecisionResponse {
	e.t.Helper()
	return e.Decide(tool, args)
}

func (e *env) metrics() string {
	e.t.Helper()
	return e.Metrics()
}

func (e *env) sentinelCall(name string) (wire.ToolCallResponse, bool) {
	e.t.Helper()
	return e.SentinelCall(name)
}

func (e *env) requireNoPolicy(why string) {
	e.t.Helper()
	e.RequireNoPolicy(why)
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
	return e.PostAs(tok, path, v)
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

const (
	basePolicy   = gatewaytest.BasePolicy
	budgetPolicy = gatewaytest.BudgetPolicy
)
