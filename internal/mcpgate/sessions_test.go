package mcpgate_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// rawAnswer is the answer to a raw MCP request.
type rawAnswer struct {
	status  int
	session string // the Mcp-Session-Id header
	body    string
}

// rawPost posts one JSON-RPC message to the MCP endpoint with token ("" for
// none) and session ("" for none).
func rawPost(t testing.TB, e *env, token, session, msg string) rawAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // Error, not Fatal: rawPost runs in goroutines too
		return rawAnswer{}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return rawAnswer{status: resp.StatusCode, session: resp.Header.Get("Mcp-Session-Id"), body: string(body)}
}

const rawInitialize = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"v1"}}}`

// initialize opens a session with a raw initialize.
func initialize(t testing.TB, e *env, token string) rawAnswer {
	t.Helper()
	return rawPost(t, e, token, "", rawInitialize)
}

// mustOpen opens a session with a raw initialize, failing unless it opens.
func mustOpen(t testing.TB, e *env, token string) string {
	t.Helper()
	a := initialize(t, e, token)
	if a.status != http.StatusOK || a.session == "" {
		t.Fatalf("initialize: %d %q %s", a.status, a.session, a.body)
	}
	return a.session
}

// deleteSession ends a session with DELETE, failing unless it answers 204.
func deleteSession(t testing.TB, e *env, token, session string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, e.url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
}

// refusal decodes a refused request's answer, checking its status and that
// its JSON-RPC error names the cap, its value and the idle timeout.
func refusal(t testing.TB, a rawAnswer, status int, cap string, limit int, idle string) {
	t.Helper()
	if a.status != status || a.session != "" {
		t.Fatalf("answer %d (session %q) %s, want %d without a session", a.status, a.session, a.body, status)
	}
	var msg struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int64                    `json:"code"`
			Message string                   `json:"message"`
			Data    mcpgate.SessionLimitData `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &msg); err != nil {
		t.Fatalf("refusal body %s: %v", a.body, err)
	}
	where := map[string]string{mcpgate.CapCaller: "the cap per caller", mcpgate.CapTotal: "the cap in total"}[cap]
	if string(msg.ID) != "7" || msg.Error.Code != mcpgate.CodeSessionLimit || msg.Error.Data.Cap != cap ||
		msg.Error.Data.Limit != limit || !strings.Contains(msg.Error.Message, where) ||
		!strings.Contains(msg.Error.Message, fmt.Sprintf("has %d open sessions", limit)) || !strings.Contains(msg.Error.Message, idle) {
		t.Fatalf("refusal %s: want cap %s %d and %q", a.body, cap, limit, idle)
	}
}

// metric reads a sample of the gateway's /metrics ("name" or `name{labels}`).
func metric(t testing.TB, e *env, series string) float64 {
	t.Helper()
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics:\n%s", series, body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSessionsPerCallerCap(t *testing.T) {
	e := newEnv(t, envOptions{maxSessions: 10, maxSessionsPerCaller: 3, sessionIdle: time.Hour})
	e.apply(codingPolicy)
	alice := []*mcp.ClientSession{connect(t, e.url, aliceToken), connect(t, e.url, aliceToken)}
	mustOpen(t, e, aliceToken)
	refusal(t, initialize(t, e, aliceToken), http.StatusTooManyRequests, mcpgate.CapCaller, 3,
		"sessions idle for 1h0m0s are closed")
	if _, err := connectErr(e.url, aliceToken); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("alice's fourth session with the SDK client: %v", err)
	}
	// Her open sessions still work, and bob still opens sessions.
	if res := call(t, alice[0], "list_dir", `{}`); res.IsError {
		t.Fatalf("alice's call: %s", text(res))
	}
	bob := connect(t, e.url, bobToken)
	if res := call(t, bob, "list_dir", `{}`); res.IsError {
		t.Fatalf("bob's call: %s", text(res))
	}
	if got := metric(t, e, "toolhooks_mcp_sessions"); got != 4 {
		t.Errorf("toolhooks_mcp_sessions = %v, want 4", got)
	}
	// The raw initialize, and the SDK client's server/discover probe and initialize.
	if got := metric(t, e, `toolhooks_mcp_sessions_refused_total{cap="caller"}`); got != 3 {
		t.Errorf("refused by the caller cap = %v, want 3", got)
	}
	if got := metric(t, e, `toolhooks_mcp_sessions_refused_total{cap="total"}`); got != 0 {
		t.Errorf("refused by the total cap = %v, want 0", got)
	}
}

func TestSessionsTotalCap(t *testing.T) {
	e := newEnv(t, envOptions{maxSessions: 3, maxSessionsPerCaller: 2})
	mustOpen(t, e, aliceToken)
	mustOpen(t, e, aliceToken)
	bob := mustOpen(t, e, bobToken)
	refusal(t, initialize(t, e, bobToken), http.StatusServiceUnavailable, mcpgate.CapTotal, 3, "idle sessions are never closed")
	refusal(t, initialize(t, e, aliceToken), http.StatusTooManyRequests, mcpgate.CapCaller, 2, "end one with DELETE")
	if got := metric(t, e, `toolhooks_mcp_sessions_refused_total{cap="total"}`); got != 1 {
		t.Errorf("refused by the total cap = %v, want 1", got)
	}
	deleteSession(t, e, bobToken, bob)
	mustOpen(t, e, bobToken)
}

func TestDeleteFreesTheSlot(t *testing.T) {
	e := newEnv(t, envOptions{maxSessionsPerCaller: 2, sessionIdle: 5 * time.Minute})
	e.apply(codingPolicy)
	first := mustOpen(t, e, aliceToken)
	cs := connect(t, e.url, aliceToken)
	refusal(t, initialize(t, e, aliceToken), http.StatusTooManyRequests, mcpgate.CapCaller, 2, "5m0s")

	// Bob cannot end alice's session.
	req, _ := http.NewRequest(http.MethodDelete, e.url, nil)
	req.Header.Set("Authorization", "Bearer "+bobToken)
	req.Header.Set("Mcp-Session-Id", first)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("bob's DELETE of alice's session: %d", resp.StatusCode)
	}
	refusal(t, initialize(t, e, aliceToken), http.StatusTooManyRequests, mcpgate.CapCaller, 2, "5m0s")

	// Once DELETE has answered, the slot is free.
	deleteSession(t, e, aliceToken, first)
	if a := rawPost(t, e, aliceToken, first, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); a.status != http.StatusNotFound {
		t.Fatalf("the deleted session answered %d %s", a.status, a.body)
	}
	third := mustOpen(t, e, aliceToken)
	refusal(t, initialize(t, e, aliceToken), http.StatusTooManyRequests, mcpgate.CapCaller, 2, "5m0s")

	// The SDK client's Close sends DELETE too.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	cs = connect(t, e.url, aliceToken)
	if res := call(t, cs, "list_dir", `{}`); res.IsError {
		t.Fatalf("call in the new session: %s", text(res))
	}
	deleteSession(t, e, aliceToken, third)
	if got := metric(t, e, "toolhooks_mcp_sessions"); got != 1 {
		t.Errorf("toolhooks_mcp_sessions = %v, want 1", got)
	}
}

func TestIdleTimeoutFreesTheSlot(t *testing.T) {
	e := newEnv(t, envOptions{maxSessionsPerCaller: 1, sessionIdle: 200 * time.Millisecond})
	old := mustOpen(t, e, aliceToken)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := initialize(t, e, aliceToken)
		if a.status == http.StatusOK {
			break
		}
		refusal(t, a, http.StatusTooManyRequests, mcpgate.CapCaller, 1, "sessions idle for 200ms are closed")
		if time.Now().After(deadline) {
			t.Fatal("the idle session's slot was not freed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := rawPost(t, e, aliceToken, old, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); a.status != http.StatusNotFound {
		t.Fatalf("the idle session answered %d %s", a.status, a.body)
	}
}

// Requests without a session id other than initialize open a session in the
// SDK that it closes when they are answered: they hold a slot only meanwhile.
func TestRequestsThatOpenNoSessionFreeTheirSlot(t *testing.T) {
	e := newEnv(t, envOptions{maxSessionsPerCaller: 1})
	for i := range 5 {
		a := rawPost(t, e, aliceToken, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if a.status == http.StatusTooManyRequests || a.session != "" {
			t.Fatalf("tools/list without a session, #%d: %d %q %s", i, a.status, a.session, a.body)
		}
		// An initialize the SDK rejects (no params) opens no session either.
		if a := rawPost(t, e, aliceToken, "", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`); a.status == http.StatusTooManyRequests {
			t.Fatalf("initialize without params, #%d: %d %s", i, a.status, a.body)
		}
	}
	mustOpen(t, e, aliceToken)
	refusal(t, initialize(t, e, aliceToken), http.StatusTooManyRequests, mcpgate.CapCaller, 1, "never closed")
	if got := metric(t, e, "toolhooks_mcp_sessions"); got != 1 {
		t.Errorf("toolhooks_mcp_sessions = %v, want 1", got)
	}
}

func TestConcurrentInitializesStayUnderTheCap(t *testing.T) {
	e := newEnv(t, envOptions{maxSessions: 100, maxSessionsPerCaller: 5, sessionIdle: 5 * time.Minute})
	const n = 50
	answers := make([]rawAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = initialize(t, e, aliceToken)
		})
	}
	close(start)
	wg.Wait()
	opened := map[string]bool{}
	for _, a := range answers {
		switch a.status {
		case http.StatusOK:
			opened[a.session] = true
		case http.StatusTooManyRequests:
			refusal(t, a, http.StatusTooManyRequests, mcpgate.CapCaller, 5, "sessions idle for 5m0s are closed")
		default:
			t.Fatalf("initialize: %d %s", a.status, a.body)
		}
	}
	if len(opened) != 5 {
		t.Fatalf("%d sessions opened, want 5", len(opened))
	}
	if got := metric(t, e, "toolhooks_mcp_sessions"); got != 5 {
		t.Errorf("toolhooks_mcp_sessions = %v, want 5", got)
	}
	if got := metric(t, e, `toolhooks_mcp_sessions_refused_total{cap="caller"}`); got != n-5 {
		t.Errorf("refused = %v, want %d", got, n-5)
	}
	for s := range opened {
		deleteSession(t, e, aliceToken, s)
	}
	if got := metric(t, e, "toolhooks_mcp_sessions"); got != 0 {
		t.Errorf("toolhooks_mcp_sessions after the DELETEs = %v, want 0", got)
	}
	mustOpen(t, e, aliceToken)
}

func TestAnonymousCallersShareACap(t *testing.T) {
	e := newEnv(t, envOptions{anonymous: true, maxSessionsPerCaller: 1})
	mustOpen(t, e, "")
	refusal(t, initialize(t, e, ""), http.StatusTooManyRequests, mcpgate.CapCaller, 1, "never closed")
	mustOpen(t, e, aliceToken)
}

func TestSessionLimitOptions(t *testing.T) {
	toks, err := authn.ParseStaticTokens([]byte(tokensYAML))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{Workspace: t.TempDir(), Logger: discard(), Callers: &authn.Request{Tokens: toks}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	for _, o := range []mcpgate.Options{
		{MaxSessions: 10, MaxSessionsPerCaller: 11},
		{MaxSessions: -1},
		{MaxSessionsPerCaller: -1},
		{SessionIdleTimeout: -time.Second},
	} {
		o.Gateway = gw
		if _, err := mcpgate.NewHandler(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	// Without a per-caller cap, the default one is cut down to the total.
	if _, err := mcpgate.NewHandler(mcpgate.Options{Gateway: gw, MaxSessions: 50}); err != nil {
		t.Fatal(err)
	}
}
