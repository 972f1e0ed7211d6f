package otlp_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolhooks/toolhooks/internal/gateway/gatewaytest"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/tracing/otlp"
)

// collector is an OTLP/HTTP endpoint keeping the spans posted to /v1/traces.
type collector struct {
	mu       sync.Mutex
	services []string
	spans    []*tracepb.Span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				c.services = append(c.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func TestGatewayExportsItsDecisionSpansOverOTLP(t *testing.T) {
	var col collector
	cs := httptest.NewServer(&col)
	defer cs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", cs.URL)
	t.Setenv("OTEL_SERVICE_NAME", "gateway-under-test")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	prev := otel.GetTracerProvider()
	tr, err := otlp.Start(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer otel.SetTracerProvider(prev)
	if !tr.Enabled || tr.Endpoint != cs.URL+"/v1/traces" {
		t.Fatalf("tracing %+v: want it on, exporting to the collector", tr)
	}

	// A real gateway (no policy in force: it denies and audits every call),
	// built after Start, so its executors use the installed provider.
	gw := gatewaytest.New(t, nil)
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	body, _ := json.Marshal(map[string]any{"sessionId": "s", "tool": "read_file", "arguments": map[string]any{"path": "README.md"}})
	status, _ := gw.Do(http.MethodPost, "/v1/tool-calls", "application/json", body, map[string]string{
		"Authorization": "Bearer " + gatewaytest.AgentToken, "Traceparent": "00-" + traceID + "-" + parentID + "-01",
	})
	if status != http.StatusOK {
		t.Fatalf("tool call answered %d", status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	var decision *tracepb.Span
	for _, s := range col.spans {
		if s.GetName() == hooks.SpanDecision {
			decision = s
		}
	}
	if decision == nil {
		t.Fatalf("the collector got %d spans, none named %s", len(col.spans), hooks.SpanDecision)
	}
	if got := hex.EncodeToString(decision.GetTraceId()); got != traceID {
		t.Errorf("exported trace id %s, want the caller's %s", got, traceID)
	}
	if got := hex.EncodeToString(decision.GetParentSpanId()); got != parentID {
		t.Errorf("exported parent span id %s, want the caller's %s", got, parentID)
	}
	if len(col.services) == 0 || col.services[0] != "gateway-under-test" {
		t.Errorf("service names %q, want OTEL_SERVICE_NAME's", col.services)
	}
	if recs := gw.Audit.Records(); len(recs) != 1 || recs[0].TraceID != traceID {
		t.Errorf("audit records %+v, want one with trace id %s", recs, traceID)
	}
}

func TestStartWithNothingSetLeavesTracingOff(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	prev := otel.GetTracerProvider()
	tr, err := otlp.Start(context.Background(), nil)
	if err != nil || tr.Enabled || tr.Reason == "" {
		t.Fatalf("tracing %+v, error %v: want it off with a reason", tr, err)
	}
	if otel.GetTracerProvider() != prev {
		t.Error("Start installed a provider with tracing off")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
