package mcpgate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// traceparentTransport sends a caller's traceparent with every request.
type traceparentTransport struct{ next http.RoundTripper }

func (t traceparentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	return t.next.RoundTrip(r)
}

func TestMCPToolCallIsTracedUnderTheCallersTraceparentAndUpstream(t *testing.T) {
	srv, _ := newUpstreamServer()
	var (
		mu   sync.Mutex
		seen []string // traceparents the upstream received
	)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Traceparent"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL + "/"), tracerProvider: tp})
	e.apply(codingPolicy)

	client := mcp.NewClient(&mcp.Implementation{Name: "traced-client", Version: "v1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{token: aliceToken, next: traceparentTransport{http.DefaultTransport}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if res := call(t, cs, "up_echo", `{"text":"secret-text"}`); res.IsError || text(res) != "echo: secret-text" {
		t.Fatalf("up_echo: %q", text(res))
	}

	var decision, tool sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case hooks.SpanDecision:
			decision = s
		case hooks.SpanTool:
			tool = s
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "secret-text") {
				t.Errorf("span %s attribute %s carries an argument value", s.Name(), kv.Key)
			}
		}
	}
	if decision == nil || tool == nil {
		t.Fatalf("spans %v: want a decision and a tool span", rec.Ended())
	}
	if decision.Parent().TraceID().String() != callerTrace || decision.Parent().SpanID().String() != callerSpan {
		t.Errorf("decision span's parent %v, want the caller's %s", decision.Parent(), callerSpan)
	}
	want := "00-" + callerTrace + "-" + tool.SpanContext().SpanID().String() + "-01"
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, tp := range seen {
		found = found || tp == want
	}
	if !found {
		t.Errorf("the upstream saw traceparents %q, want %s (the tool span)", seen, want)
	}
	if rec := lastRecord(t, e.audit); rec.TraceID != callerTrace {
		t.Errorf("audit record's trace id %q, want %s", rec.TraceID, callerTrace)
	}
}
