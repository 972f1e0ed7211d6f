package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// openRaw opens a session with a raw initialize and notifications/initialized.
func openRaw(t *testing.T, e *env, token string) string {
	t.Helper()
	sid := mustOpen(t, e, token)
	if a := rawPost(t, e, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", a.status, a.body)
	}
	return sid
}

func TestCancelledCallGetsNoResponseAndIsAuditedCancelled(t *testing.T) {
	up, calls := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(codingPolicy)
	sid := openRaw(t, e, aliceToken)
	before, cancelledBefore := calls.Load(), hangsCancelled.Load()

	answer := make(chan rawAnswer, 1)
	go func() {
		answer <- rawPost(t, e, aliceToken, sid, `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"up_hang","arguments":{}}}`)
	}()
	waitFor(t, 10*time.Second, "the upstream got the call", func() bool { return calls.Load() > before })
	if a := rawPost(t, e, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,"reason":"user"}}`); a.status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", a.status, a.body)
	}
	a := <-answer
	if a.status != http.StatusAccepted || a.body != "" {
		t.Fatalf("the cancelled call's POST: %d %q, want 202 and no response", a.status, a.body)
	}
	waitFor(t, 10*time.Second, "the upstream saw the cancellation", func() bool { return hangsCancelled.Load() > cancelledBefore })
	waitFor(t, 10*time.Second, "an audit record of the call", func() bool {
		recs := e.audit.Records()
		return len(recs) > 0 && recs[len(recs)-1].Tool == "up_hang"
	})
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusCancelled || rec.SenderID != "alice" {
		t.Fatalf("audit: outcome %s sender %s, want cancelled by alice", rec.Outcome, rec.SenderID)
	}
	if got := metric(t, e, `toolhooks_tool_calls_total{caller_kind="static",outcome="cancelled",tool="up_hang"}`); got != 1 {
		t.Fatalf("toolhooks_tool_calls_total{tool=up_hang,outcome=cancelled} = %v, want 1", got)
	}

	// A cancellation of a call already answered, or of another session's
	// call, changes nothing.
	if a := rawPost(t, e, aliceToken, sid, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up_echo","arguments":{"text":"x"}}}`); a.status != http.StatusOK || !strings.Contains(a.body, `"id":42`) {
		t.Fatalf("a call after the cancellation: %d %s", a.status, a.body)
	}
	other := openRaw(t, e, bobToken)
	go func() {
		answer <- rawPost(t, e, aliceToken, sid, `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"up_hang","arguments":{}}}`)
	}()
	waitFor(t, 10*time.Second, "the upstream got the second hang", func() bool { return calls.Load() > before+2 })
	rawPost(t, e, bobToken, other, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":43}}`)
	rawPost(t, e, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":43}}`)
	if a := <-answer; a.status != http.StatusAccepted || a.body != "" {
		t.Fatalf("the second cancelled call: %d %q", a.status, a.body)
	}
	waitFor(t, 10*time.Second, "the upstream saw the second cancellation", func() bool { return hangsCancelled.Load() > cancelledBefore+1 })
}

func TestCancelledCallWithAGoSDKClient(t *testing.T) {
	up, calls := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(codingPolicy)
	cs := connect(t, e.url, aliceToken)
	before, cancelledBefore := calls.Load(), hangsCancelled.Load()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up_hang", Arguments: map[string]any{}})
		done <- err
	}()
	waitFor(t, 10*time.Second, "the upstream got the call", func() bool { return calls.Load() > before })
	cancel() // the client sends notifications/cancelled
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	waitFor(t, 10*time.Second, "the upstream saw the cancellation", func() bool { return hangsCancelled.Load() > cancelledBefore })
	waitFor(t, 10*time.Second, "the call audited cancelled", func() bool {
		recs := e.audit.Records()
		return len(recs) > 0 && recs[len(recs)-1].Tool == "up_hang" && recs[len(recs)-1].Outcome == hooks.StatusCancelled
	})
	// The session goes on.
	if res := call(t, cs, "up_echo", `{"text":"on"}`); res.IsError || text(res) != "echo: on" {
		t.Fatalf("after the cancellation: %q", text(res))
	}
}

func TestProgressIsForwardedBothWays(t *testing.T) {
	up, _ := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(codingPolicy)
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-client", Version: "v1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: aliceToken}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	// The notifications travel on the session's standalone stream (GET),
	// which the client opens after connecting: until it is open they are
	// dropped, so the call is repeated until one call's three arrive.
	params := &mcp.CallToolParams{Name: "up_progress", Arguments: map[string]any{}}
	params.SetProgressToken("client-token-7")
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i+2 < len(got); i++ {
			if got[i].Progress == 1 && got[i+1].Progress == 2 && got[i+2].Progress == 3 {
				return true
			}
		}
		return false
	}
	waitFor(t, 10*time.Second, "one call's three progress notifications", func() bool {
		if complete() {
			return true
		}
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError || text(res) != "progress token true" {
			t.Fatalf("up_progress: %v %+v", err, res)
		}
		return complete()
	})
	mu.Lock()
	for i, p := range got {
		if p.ProgressToken != "client-token-7" || p.Total != 3 || p.Message != fmt.Sprintf("step %v", p.Progress) {
			t.Errorf("progress %d: %+v, want the client's token, of 3", i, p)
		}
	}
	mu.Unlock()

	// Without a token, the upstream gets none.
	if res := call(t, cs, "up_progress", `{}`); text(res) != "progress token false" {
		t.Fatalf("without a token: %q", text(res))
	}
}

// listChanges opens a go-sdk session for token counting its
// notifications/tools/list_changed, after listing the tools once.
func listChanges(t *testing.T, e *env, token string) (*mcp.ClientSession, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	client := mcp.NewClient(&mcp.Implementation{Name: "list-client", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { mu.Lock(); n++; mu.Unlock() },
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	listTools(t, cs)
	return cs, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// bobNoReads denies read_file to bob alone.
const bobNoReads = `---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: bob-no-reads}
spec:
  subjects:
    callers: [{kind: User, name: bob}]
  tools: {deny: [read_file]}
`

func TestToolListChangedAfterAPolicyChange(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	alice, aliceChanges := listChanges(t, e, aliceToken)
	_, bobChanges := listChanges(t, e, bobToken)
	sent := func() float64 { return metric(t, e, "toolhooks_mcp_tools_list_changed_total") }
	// The SDK notifies sessions in the order they opened: when bob is told,
	// a notification of alice's in the same round has been counted.
	check := func(step string, wantAlice, wantBob int) {
		t.Helper()
		waitFor(t, 10*time.Second, step+": bob told", func() bool { return bobChanges() == wantBob })
		if got := sent(); got != float64(wantAlice+wantBob) || aliceChanges() != wantAlice {
			t.Fatalf("%s: %v sent, alice told %d times, bob %d; want alice %d, bob %d", step, got, aliceChanges(), bobChanges(), wantAlice, wantBob)
		}
	}

	// Read-only for everyone marks the mutating tools: both are told.
	e.apply(readOnlyPolicy)
	waitFor(t, 10*time.Second, "alice told", func() bool { return aliceChanges() == 1 })
	check("read-only for all", 1, 1)
	if listed := listTools(t, alice); !strings.HasPrefix(listed["write_file"].Description, "[denied by policy]") {
		t.Fatalf("write_file after the push: %q", listed["write_file"].Description)
	}
	// A policy binding bob changes his list only.
	e.apply(readOnlyPolicy + bobNoReads)
	check("read_file denied to bob", 1, 2)
	// A push that changes no list (another forbidden glob) tells no one;
	// the next, which changes bob's back, tells him alone.
	e.apply(strings.Replace(readOnlyPolicy, "tools: {deny: [\"shell\"]}", "tools: {deny: [\"shell\"]}\n  forbiddenPathGlobs: [\"**/secret\"]", 1) + bobNoReads)
	e.apply(readOnlyPolicy)
	check("bob's read_file back", 1, 3)
}

func TestToolListChangedWhenAnUpstreamDropsATool(t *testing.T) {
	up, calls := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(codingPolicy)
	cs, changes := listChanges(t, e, aliceToken)
	if res := call(t, cs, "up_drop_echo", `{}`); res.IsError {
		t.Fatal(text(res))
	}
	waitFor(t, 10*time.Second, "the client told of the upstream's change", func() bool { return changes() == 1 })
	if _, ok := listTools(t, cs)["up_echo"]; ok {
		t.Fatal("up_echo still listed after the upstream dropped it")
	}
	before := calls.Load()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up_echo", Arguments: map[string]any{"text": "x"}})
	if err == nil && !res.IsError {
		t.Fatalf("a call of the dropped tool succeeded: %q", text(res))
	}
	if calls.Load() != before {
		t.Fatal("the call of the dropped tool reached the upstream")
	}
}

func TestProtocolEdges(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	sid := openRaw(t, e, aliceToken)
	type rpc struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	for _, tt := range []struct {
		name, session, msg string
		status             int
		code               int64  // 0: no error
		id                 string // the answer's id; "" for no answer
	}{
		{"unknown method", sid, `{"jsonrpc":"2.0","id":1,"method":"tools/frobnicate"}`, http.StatusOK, -32601, "1"},
		{"unknown notification", sid, `{"jsonrpc":"2.0","method":"notifications/frobnicated"}`, http.StatusAccepted, 0, ""},
		{"no session id", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusBadRequest, -32600, "2"},
		{"no session id, notification", "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusBadRequest, -32600, "null"},
		{"fractional id", sid, `{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, http.StatusBadRequest, -32600, "null"},
		{"exponent id", sid, `{"jsonrpc":"2.0","id":1e3,"method":"tools/list"}`, http.StatusBadRequest, -32600, "null"},
		{"id beyond 2^53-1", sid, `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}`, http.StatusBadRequest, -32600, "null"},
		{"id of 2^53-1", sid, `{"jsonrpc":"2.0","id":9007199254740991,"method":"tools/list"}`, http.StatusOK, 0, "9007199254740991"},
		{"null id", sid, `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, http.StatusBadRequest, -32600, "null"},
		{"bool id", sid, `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, http.StatusBadRequest, -32600, "null"},
		{"batch", sid, `[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`, http.StatusBadRequest, -32600, "null"},
		{"not JSON", sid, `{"jsonrpc":`, http.StatusBadRequest, -32700, "null"},
		{"string id", sid, `{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}`, http.StatusOK, 0, `"a-1"`},
		{"integer id", sid, `{"jsonrpc":"2.0","id":-5,"method":"tools/list"}`, http.StatusOK, 0, "-5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := rawPost(t, e, aliceToken, tt.session, tt.msg)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.body)
			}
			if tt.id == "" {
				if a.body != "" {
					t.Fatalf("answered %s, want nothing", a.body)
				}
				return
			}
			var r rpc
			if err := json.Unmarshal([]byte(a.body), &r); err != nil {
				t.Fatalf("not a JSON-RPC answer: %q", a.body)
			}
			if string(r.ID) != tt.id && (tt.id != "null" || r.ID != nil) {
				t.Errorf("id %s, want %s", r.ID, tt.id)
			}
			switch {
			case tt.code == 0 && (r.Error != nil || r.Result == nil):
				t.Errorf("want a result: %s", a.body)
			case tt.code != 0 && (r.Error == nil || r.Error.Code != tt.code):
				t.Errorf("want error %d: %s", tt.code, a.body)
			}
		})
	}
	// The batch was not run, with or without a version header.
	if a := rawPost(t, e, aliceToken, "", `[`+rawInitialize+`]`); a.status != http.StatusBadRequest || a.session != "" {
		t.Fatalf("a batched initialize without a version header: %d, session %q", a.status, a.session)
	}
}

func TestUnsupportedVersionAndDiscoverAgree(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	post := func(version, msg string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Mcp-Protocol-Version", version)
		req.Header.Set("Mcp-Method", "server/discover")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, refusal := post("1999-01-01", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if status != http.StatusBadRequest {
		t.Fatalf("unsupported version: %d %s", status, refusal)
	}
	_, discover := post("2026-07-28", `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`)
	var d struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
		Error struct {
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(discover), &d); err != nil {
		t.Fatalf("server/discover: %s", discover)
	}
	versions := append(d.Result.SupportedVersions, d.Error.Data.Supported...)
	if len(versions) == 0 {
		t.Fatalf("server/discover lists no versions: %s", discover)
	}
	if want := "supported versions: " + strings.Join(versions, ",") + ")"; !strings.Contains(refusal, want) {
		t.Fatalf("the 400 says %q; server/discover lists %v (%s)", refusal, versions, discover)
	}
}
