package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

const (
	callerTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan        = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// tracedEnv is a gateway with basePolicy in force whose spans go to the returned recorder.
func tracedEnv(t *testing.T) (*env, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newEnv(t, func(o *gateway.Options) { o.TracerProvider = tp })
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	return e, rec
}

// postTraced posts v to path as "agent" with the caller's traceparent.
func (e *env) postTraced(path string, v any) wire.ToolCallResponse {
	e.t.Helper()
	b, _ := json.Marshal(v)
	status, body := e.do(http.MethodPost, path, "application/json", b, map[string]string{
		"Authorization": "Bearer " + agentToken, "Traceparent": callerTraceparent, "Tracestate": "vendor=x",
	})
	if status != http.StatusOK {
		e.t.Fatalf("%s answered %d: %s", path, status, body)
	}
	var r wire.ToolCallResponse
	mustUnmarshal(e.t, body, &r)
	return r
}

func TestToolCallSpansAreChildrenOfTheCallersTraceparent(t *testing.T) {
	e, rec := tracedEnv(t)
	secret := "config/.env"
	r := e.postTraced("/v1/tool-calls", map[string]any{"sessionId": "s", "tool": "read_file",
		"arguments": json.RawMessage(`{"path":"` + secret + `"}`)})
	if r.Status != "denied" {
		t.Fatalf("status %s", r.Status)
	}
	var decision sdktrace.ReadOnlySpan
	hookSpans := 0
	for _, s := range rec.Ended() {
		switch s.Name() {
		case hooks.SpanDecision:
			decision = s
		case hooks.SpanHook:
			hookSpans++
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), ".env") {
				t.Errorf("span %s attribute %s carries the argument: %q", s.Name(), kv.Key, kv.Value.String())
			}
		}
	}
	if decision == nil || hookSpans == 0 {
		t.Fatalf("spans %v: want a decision span and hook spans", rec.Ended())
	}
	if decision.SpanContext().TraceID().String() != callerTrace || decision.Parent().SpanID().String() != callerSpan ||
		!decision.Parent().IsRemote() || decision.Parent().TraceState().Get("vendor") != "x" {
		t.Errorf("decision span %v has parent %v, want the caller's span %s", decision.SpanContext(), decision.Parent(), callerSpan)
	}
	got := map[string]string{}
	for _, kv := range decision.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	if got["toolhooks.outcome"] != "denied" || got["toolhooks.tool"] != "read_file" || got["toolhooks.policy.name"] != "coding-agent" ||
		got["toolhooks.rule"] == "" {
		t.Errorf("decision attributes %v", got)
	}
	recs := e.audit.Records()
	if len(recs) != 1 || recs[0].TraceID != callerTrace {
		t.Errorf("audit records %+v, want one with trace id %s", recs, callerTrace)
	}
}

func TestDecisionsAcceptATraceparent(t *testing.T) {
	e, rec := tracedEnv(t)
	e.postTraced("/v1/decisions", map[string]any{"sessionId": "s", "tool": "read_file",
		"arguments": json.RawMessage(`{"path":"README.md"}`)})
	var n int
	for _, s := range rec.Ended() {
		if s.Name() == hooks.SpanDecision {
			n++
			if s.Parent().SpanID().String() != callerSpan {
				t.Errorf("decision span's parent %v", s.Parent())
			}
		}
	}
	if n != 1 {
		t.Errorf("%d decision spans, want 1", n)
	}
}

func TestUntracedGatewayStillRecordsTheCallersTraceID(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	e.postTraced("/v1/tool-calls", map[string]any{"sessionId": "s", "tool": "read_file",
		"arguments": json.RawMessage(`{"path":"README.md"}`)})
	e.call("read_file", `{"path":"README.md"}`)
	recs := e.audit.Records()
	if len(recs) != 2 || recs[0].TraceID != callerTrace || recs[1].TraceID != "" {
		t.Errorf("audit records %+v: want the caller's trace id on the first only", recs)
	}
}
