package plugins

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestHTTPPluginRequestsCarryTheHookSpansTraceparent(t *testing.T) {
	var (
		mu     sync.Mutex
		parent = map[string]string{} // traceparent -> tracestate of each request
	)
	var rs rpcServer
	inner := rs.handler(denyShellHandler)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parent[r.Header.Get("Traceparent")] = r.Header.Get("Tracestate")
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	m := newManager(t, Options{})
	ex, err := hooks.NewExecutor([]hooks.Entry{{Hook: build(t, m, spec("traced", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}}))}},
		[]hooks.Tool{okTool("shell")}, hooks.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	if res := ex.Evaluate(context.Background(), newCall("shell", `{"command":"ls"}`)); res.Status != hooks.StatusDenied {
		t.Fatalf("status %s", res.Status)
	}
	var hookSpan string
	for _, s := range rec.Ended() {
		if s.Name() == hooks.SpanHook {
			hookSpan = s.SpanContext().SpanID().String()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for tp := range parent {
		if hookSpan != "" && strings.Contains(tp, "-"+hookSpan+"-") {
			found = true
		}
	}
	if !found {
		t.Errorf("the plugin saw traceparents %v, none naming the hook span %s", parent, hookSpan)
	}
}

func TestHTTPPluginRequestsWithoutASpanHaveNoTraceparent(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	var rs rpcServer
	inner := rs.handler(denyShellHandler)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Values("Traceparent")...)
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	m := newManager(t, Options{})
	ex := executor(t, m, spec("untraced", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}}))
	ex.Evaluate(context.Background(), newCall("shell", `{}`))
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Errorf("an untraced call sent traceparent %v", seen)
	}
}
