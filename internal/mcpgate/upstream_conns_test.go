package mcpgate_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPUpstreamReusesConnections makes sequential calls, then rounds of
// 64 concurrent calls to an HTTP upstream (go-sdk, which answers each call
// with an SSE stream): the gateway reuses its connections to the upstream
// instead of dialling new ones, neither aborting the rest of a response
// stream when the call has its result (which closed the connection) nor
// keeping only 2 idle connections (http.DefaultTransport's limit).
func TestHTTPUpstreamReusesConnections(t *testing.T) {
	srv, calls := newUpstreamServer()
	var dialled atomic.Int64
	up := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL)})
	e.apply(codingPolicy)

	const sequential, concurrent, rounds = 200, 64, 5
	sessions := make([]*mcp.ClientSession, concurrent)
	for i := range sessions {
		sessions[i] = connect(t, e.url, aliceToken)
	}
	before := dialled.Load()
	for range sequential {
		if res := call(t, sessions[0], "up_echo", `{"text":"hi"}`); res.IsError {
			t.Fatalf("up_echo: %s", text(res))
		}
	}
	// One connection carries the calls; the upstream session's standalone
	// SSE stream and its setup, which may still be under way when the first
	// calls start, can take a few more. 200 calls on one each would be 200.
	if n := dialled.Load() - before; n > 4 {
		t.Errorf("the gateway opened %d connections to the upstream for %d sequential calls; want at most 4", n, sequential)
	}
	for range rounds {
		var wg sync.WaitGroup
		for _, cs := range sessions {
			wg.Go(func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up_echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil {
					t.Errorf("up_echo: %v", err)
				} else if res.IsError || text(res) != "echo: hi" {
					t.Errorf("up_echo: %q (isError %v)", text(res), res.IsError)
				}
			})
		}
		wg.Wait()
	}
	if got := calls.Load(); got != sequential+concurrent*rounds {
		t.Fatalf("the upstream got %d calls, want %d", got, sequential+concurrent*rounds)
	}
	// At most one connection per call in flight, plus the session's own
	// (initialisation, the standalone SSE stream); rounds after the first
	// reuse them.
	if n := dialled.Load(); n > concurrent+4 {
		t.Errorf("the gateway opened %d connections to the upstream for %d rounds of %d concurrent calls; want at most %d",
			n, rounds, concurrent, concurrent+4)
	}
}
