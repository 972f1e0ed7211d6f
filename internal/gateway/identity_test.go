package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// TestCallersMustAuthenticate: every call API refuses a caller without a
// valid token (401, counted, the tool never runs), and a body senderId
// naming anyone but the verified caller is answered 400; each refusal is
// audited as a denied call.
func TestCallersMustAuthenticate(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: open}
spec: {}
`))
	write := map[string]any{"sessionId": "s", "tool": "write_file", "arguments": map[string]string{"path": "sentinel.txt", "content": "x"}}
	for _, path := range []string{"/v1/tool-calls", "/v1/decisions"} {
		for name, tok := range map[string]string{"missing token": "", "unknown token": "forged-token-0123456789", "push token": testToken} {
			status, body := e.postAs(tok, path, write)
			if status != http.StatusUnauthorized || !strings.Contains(string(body), "unauthenticated") {
				t.Errorf("%s %s: answered %d %s, want 401", path, name, status, body)
			}
		}
		for name, req := range map[string]map[string]any{
			"another sender":        {"senderId": "other", "tool": "write_file", "arguments": map[string]string{"path": "sentinel.txt", "content": "x"}},
			"anonymous as a sender": {"senderId": authn.AnonymousUser, "tool": "read_file"},
		} {
			status, body := e.post(path, req)
			if status != http.StatusBadRequest || !strings.Contains(string(body), "is not the authenticated caller") {
				t.Errorf("%s %s: answered %d %s, want 400", path, name, status, body)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.ws, "sentinel.txt")); err == nil {
		t.Fatal("an unauthenticated or spoofed call wrote the sentinel file")
	}
	// Each refusal left one record: denied, by rule Unauthenticated with no
	// sender, or SenderMismatch with the verified caller.
	rules := map[string]int{}
	for _, r := range e.audit.Records() {
		if r.Outcome != hooks.StatusDenied || r.Denial == nil || r.Denial.Hook != hooks.RequestHookName ||
			(r.Denial.Rule == hooks.RuleUnauthenticated) != (r.SenderID == "") {
			t.Errorf("a refused call's record %+v", r)
			continue
		}
		rules[r.Denial.Rule]++
	}
	if want := map[string]int{hooks.RuleUnauthenticated: 6, hooks.RuleSenderMismatch: 4}; !maps.Equal(rules, want) {
		t.Fatalf("refused calls left records by rule %v, want %v", rules, want)
	}
	if m := e.metrics(); !strings.Contains(m, "toolhooks_caller_authentication_failures_total 6") {
		t.Errorf("failures not counted:\n%s", grepLines(m, "toolhooks_caller_authentication_failures"))
	}

	// The verified caller is the sender, whether the body names it or not.
	refusals := len(e.audit.Records())
	for _, req := range []map[string]any{{"tool": "read_file", "arguments": map[string]string{"path": "README.md"}},
		{"senderId": "other", "tool": "read_file", "arguments": map[string]string{"path": "README.md"}}} {
		if status, body := e.postAs(otherToken, "/v1/tool-calls", req); status != http.StatusOK {
			t.Fatalf("answered %d %s", status, body)
		}
	}
	recs := e.audit.Records()[refusals:]
	if len(recs) != 2 || recs[0].SenderID != "other" || recs[1].SenderID != "other" {
		t.Fatalf("audit records %+v, want two calls of sender other", recs)
	}
}

func TestAnonymousCallersOnlyWhenAllowed(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.Callers = &authn.Request{AllowAnonymous: true} })
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: open}
spec: {}
`))
	if status, body := e.postAs("", "/v1/decisions", map[string]any{"tool": "read_file"}); status != http.StatusOK {
		t.Fatalf("anonymous: %d %s", status, body)
	}
	if got := e.audit.Records(); len(got) != 1 || got[0].SenderID != authn.AnonymousUser {
		t.Fatalf("records %+v, want one of %s", got, authn.AnonymousUser)
	}
	// A token is never downgraded to anonymous, and anonymous callers cannot name a sender.
	if status, _ := e.postAs(agentToken, "/v1/decisions", map[string]any{"tool": "read_file"}); status != http.StatusUnauthorized {
		t.Errorf("a token with no token authenticator: %d, want 401", status)
	}
	if status, _ := e.postAs("", "/v1/decisions", map[string]any{"tool": "read_file", "senderId": "agent"}); status != http.StatusBadRequest {
		t.Errorf("anonymous posing as agent: %d, want 400", status)
	}
	status, body := e.do(http.MethodGet, "/readyz", "", nil, nil)
	var r wire.ReadyResponse
	if err := json.Unmarshal(body, &r); err != nil || status != http.StatusOK || !r.AnonymousCallers {
		t.Fatalf("/readyz %d %s: anonymous callers not reported", status, body)
	}

	// Without an authenticator every call is refused.
	none := newEnv(t, func(o *gateway.Options) { o.Callers = nil })
	if status, _ := none.postAs(agentToken, "/v1/decisions", map[string]any{"tool": "read_file"}); status != http.StatusUnauthorized {
		t.Errorf("no authenticator: %d, want 401", status)
	}
	if status, _ := none.postAs("", "/v1/decisions", map[string]any{"tool": "read_file"}); status != http.StatusUnauthorized {
		t.Errorf("no authenticator, no token: %d, want 401", status)
	}
}

// TestSessionsBelongToTheirCaller: a caller reusing another caller's session
// id neither spends nor sees that caller's budget; each identity has its own
// session under the same id.
func TestSessionsBelongToTheirCaller(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget}
spec: {maxToolCalls: 2}
`))
	status := func(tok string) string { t.Helper(); return e.readAs(tok, "shared") }
	// The other caller spends its whole budget on session "shared" first.
	for range 2 {
		if got := status(otherToken); got != "succeeded" {
			t.Fatalf("other's call: %s", got)
		}
	}
	if got := status(otherToken); got != "denied:maxToolCalls" {
		t.Fatalf("other's third call: %s, want its budget spent", got)
	}
	// agent's session "shared" is its own: two calls, then its own budget ends.
	for range 2 {
		if got := status(agentToken); got != "succeeded" {
			t.Fatalf("agent reusing the session id: %s, want its own budget", got)
		}
	}
	if got := status(agentToken); got != "denied:maxToolCalls" {
		t.Fatalf("agent's third call: %s", got)
	}
}

// TestOneCallerCannotFillTheBudgetTable: with a per-caller share of the
// session table, a caller at its share is denied new sessions while another
// caller still starts them.
func TestOneCallerCannotFillTheBudgetTable(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Budgets = contract.BudgetConfig{MaxSessions: 10, MaxSessionsPerSender: 2}
	})
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget}
spec: {maxToolCalls: 5}
`))
	status := func(tok, session string) string {
		t.Helper()
		r := e.readResponse(tok, session)
		if r.Denial != nil {
			return r.Status + ":" + r.Denial.Rule + ":" + r.Denial.Reason
		}
		return r.Status
	}
	for _, s := range []string{"a", "b"} {
		if got := status(otherToken, s); got != "succeeded" {
			t.Fatalf("session %s within the share: %s", s, got)
		}
	}
	if got := status(otherToken, "c"); !strings.HasPrefix(got, "denied:maxToolCalls:") || !strings.Contains(got, "sessions") {
		t.Errorf("a third session of the same caller: %s, want a denial about its sessions", got)
	}
	if got := status(otherToken, "a"); got != "succeeded" {
		t.Errorf("a live session of the caller at its share: %s", got)
	}
	if got := status(agentToken, "c"); got != "succeeded" {
		t.Errorf("another caller's new session: %s", got)
	}
}

// TestAPerCallerBudgetHoldsAcross50RotatedSessions: a ContractPolicy's
// maxToolCallsPerSender counts the verified caller's calls whatever session
// ids it sends; another caller keeps its own count.
func TestAPerCallerBudgetHoldsAcross50RotatedSessions(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: per-caller}
spec:
  maxToolCalls: 100
  maxToolCallsPerSender: {calls: 5, window: 1h}
`))
	status := func(tok string, i int) string { t.Helper(); return e.readAs(tok, fmt.Sprint("rotated-", i)) }
	succeeded := 0
	for i := range 50 {
		switch got := status(otherToken, i); got {
		case "succeeded":
			succeeded++
		case "denied:maxToolCallsPerSender":
		default:
			t.Fatalf("call %d: %s", i, got)
		}
	}
	if succeeded != 5 {
		t.Errorf("%d of 50 calls on 50 session ids ran, want 5", succeeded)
	}
	if got := status(agentToken, 0); got != "succeeded" {
		t.Errorf("another caller: %s", got)
	}
}

// kindStub verifies "sa-token" as a ServiceAccount and "oidc-token" as an
// OIDC user, as the TokenReview and OIDC authenticators do.
type kindStub struct{}

func (kindStub) AuthenticateToken(_ context.Context, tok string) (*hooks.Identity, time.Time, error) {
	switch tok {
	case "sa-token":
		return &hooks.Identity{Username: "system:serviceaccount:team:secret-sa-name", Kind: hooks.IdentityServiceAccount}, time.Time{}, nil
	case "oidc-token":
		return &hooks.Identity{Username: "oidc:secret-oidc-user", Kind: hooks.IdentityOIDC}, time.Time{}, nil
	}
	return nil, time.Time{}, fmt.Errorf("%w: %w", authn.ErrUnauthenticated, authn.ErrUnrecognized)
}

// TestMetricsCountCallersByKindNeverByName: calls and denials carry the
// caller's kind (how it was verified) as a label; no username, uid or group
// appears anywhere in /metrics.
func TestMetricsCountCallersByKindNeverByName(t *testing.T) {
	static, err := authn.ParseStaticTokens([]byte("tokens:\n- {identity: secret-static-user, token: static-token-0123456789, groups: [secret-group]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *gateway.Options) {
		o.Callers = &authn.Request{Tokens: authn.Union{static, kindStub{}}, AllowAnonymous: true}
	})
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	read := func(tok, path string) {
		t.Helper()
		req := map[string]any{"tool": "read_file", "arguments": map[string]string{"path": path}}
		if status, body := e.postAs(tok, "/v1/tool-calls", req); status != http.StatusOK {
			t.Fatalf("%q: %d %s", tok, status, body)
		}
	}
	read("sa-token", "config/.env")
	read("sa-token", "config/.env")
	read("sa-token", "README.md")
	read("oidc-token", "config/.env")
	read("static-token-0123456789", "README.md")
	read("", "config/.env")
	m := e.metrics()
	for _, want := range []string{
		`toolhooks_tool_calls_total{caller_kind="serviceaccount",outcome="denied",tool="read_file"} 2`,
		`toolhooks_tool_calls_total{caller_kind="serviceaccount",outcome="succeeded",tool="read_file"} 1`,
		`toolhooks_tool_calls_total{caller_kind="static",outcome="succeeded",tool="read_file"} 1`,
		`toolhooks_denials_total{caller_kind="serviceaccount",hook="AutonomyPolicy/default/coding-agent",tool="read_file"} 2`,
		`toolhooks_denials_total{caller_kind="oidc",hook="AutonomyPolicy/default/coding-agent",tool="read_file"} 1`,
		`toolhooks_denials_total{caller_kind="anonymous",hook="AutonomyPolicy/default/coding-agent",tool="read_file"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s\n%s", want, grepLines(m, "toolhooks_tool_calls_total"), grepLines(m, "toolhooks_denials_total"))
		}
	}
	for _, leak := range []string{"secret-", "system:serviceaccount", "oidc:", authn.AnonymousUser, authn.UnauthenticatedGroup} {
		if strings.Contains(m, leak) {
			t.Errorf("/metrics names a caller (%q)", leak)
		}
	}
}
