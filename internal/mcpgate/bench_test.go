package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// benchSessions is how many MCP sessions call concurrently.
const benchSessions = 64

// BenchmarkToolsCall measures a tools/call of an in-process streamable-HTTP
// upstream made directly ("direct") and through the gateway's /mcp with the
// coding-agent AutonomyPolicy, the JSON audit sink and a
// ContractPolicy budget ("gated"), from 64 concurrent MCP sessions. It reports
// the per-call latency percentiles (p50-us, p99-us); the overhead is gated
// minus direct. hooks-us/call is the gateway's mean time in the hook chain
// (before and after phases, without the upstream call). inflight=1 makes one call at a time, rotating over the
// sessions (latency without queueing); inflight=64 has every session call at
// once (on a small machine, latency is then mostly queueing for the CPU, and
// ns/op is the CPU cost per call). Allocations cover the whole process
// (client, gateway and upstream), and the three share one scheduler and
// garbage collector, which distorts the overhead: hack/benchmcp
// (make bench-mcp) measures it with each in its own process.
func BenchmarkToolsCall(b *testing.B) {
	up, _ := httpUpstream(b)
	reg := gateway.NewRegistry()
	gwURL := benchGateway(b, up.URL, reg)
	args := json.RawMessage(`{"text":"hello","path":"README.md"}`)
	for _, inflight := range []int{1, benchSessions} {
		b.Run(fmt.Sprintf("inflight=%d/direct", inflight), func(b *testing.B) { benchCalls(b, up.URL, "", "echo", args, inflight) })
		b.Run(fmt.Sprintf("inflight=%d/gated", inflight), func(b *testing.B) {
			sum0, n0 := hookTime(b, reg)
			benchCalls(b, gwURL, aliceToken, "up_echo", args, inflight)
			sum1, n1 := hookTime(b, reg)
			b.ReportMetric((sum1-sum0)/float64(n1-n0)*1e6, "hooks-us/call")
		})
	}
}

// hookTime reads the gateway's time in the hook chain for MCP calls
// (toolhooks_decision_duration_seconds{api="mcp"}): total seconds and count.
func hookTime(b *testing.B, reg *prometheus.Registry) (float64, uint64) {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolhooks_decision_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "api" && l.GetValue() == "mcp" {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0, 0
}

// benchGateway starts a gateway fronting upstreamURL and returns its MCP URL.
func benchGateway(b *testing.B, upstreamURL string, reg *prometheus.Registry) string {
	b.Helper()
	ws := b.TempDir()
	ups, err := mcpgate.Connect(context.Background(), upstreamConfig(upstreamURL), discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ups.Close)
	builtins, err := tools.Builtins(ws, tools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	toks, err := authn.ParseStaticTokens([]byte(tokensYAML))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := gateway.New(gateway.Options{Workspace: ws, Audit: audit.NewJSONSink(io.Discard), Logger: discard(),
		Tools: append(builtins, ups.Tools()...), ToolTraits: ups.Traits(), Registry: reg, Callers: &authn.Request{Tokens: toks}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	cfg := compileYAML(b, ws, codingPolicy+`---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget}
spec:
  maxToolCalls: 10000000
`)
	if _, err := srv.Apply(context.Background(), cfg, "bench"); err != nil {
		b.Fatal(err)
	}
	h, err := mcpgate.NewHandler(mcpgate.Options{Gateway: srv, Upstreams: ups, Logger: discard()})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(mcpgate.Mount(srv.Handler(), h))
	b.Cleanup(hs.Close)
	return hs.URL + mcpgate.Path
}

// benchCalls makes b.N calls of tool over benchSessions sessions, inflight at a time.
func benchCalls(b *testing.B, url, token, tool string, args json.RawMessage, inflight int) {
	transport := &http.Transport{MaxIdleConnsPerHost: 2 * benchSessions}
	b.Cleanup(transport.CloseIdleConnections)
	sessions := make([]*mcp.ClientSession, benchSessions)
	for i := range sessions {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
			HTTPClient: &http.Client{Transport: bearerTransport{token: token, next: transport}}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		sessions[i] = cs
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	lat := make([][]time.Duration, inflight)
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	errs := make(chan error, inflight)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range inflight {
		wg.Go(func() {
			next := i
			for range work {
				cs := sessions[next]
				next = (next + inflight) % benchSessions
				start := time.Now()
				res, err := cs.CallTool(context.Background(), params)
				lat[i] = append(lat[i], time.Since(start))
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %s", text(res))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-us")
	b.ReportMetric(pct(0.99), "p99-us")
}
