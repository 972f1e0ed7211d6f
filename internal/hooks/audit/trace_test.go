package audit_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// traceCtx carries a remote span context with a fixed trace id.
func traceCtx(t *testing.T) (context.Context, string) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc), tid.String()
}

func TestAuditLogRecordsTheTraceIDOfTheCallsContext(t *testing.T) {
	ctx, want := traceCtx(t)
	var mem audit.Memory
	exec := newTraceExecutor(t, &mem)
	if res := exec.Execute(ctx, hooks.NewCall("echo", `{}`)); res.Status != hooks.StatusSucceeded {
		t.Fatalf("status %s", res.Status)
	}
	if got := mem.Started(); len(got) != 1 || got[0].TraceID != want {
		t.Errorf("decision records %+v, want one with trace id %s", got, want)
	}
	if got := mem.Records(); len(got) != 1 || got[0].TraceID != want {
		t.Errorf("records %+v, want one with trace id %s", got, want)
	}

	exec.Execute(context.Background(), hooks.NewCall("echo", `{}`))
	if got := mem.Records(); len(got) != 2 || got[1].TraceID != "" {
		t.Errorf("an untraced call's record has trace id %q", got[len(got)-1].TraceID)
	}
}

func TestSinksWriteTheTraceIDOnlyWhenSet(t *testing.T) {
	r := audit.Record{
		Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CallID: "c-1", Tool: "read_file",
		CorrelationID: "corr", Outcome: hooks.StatusSucceeded,
	}
	var without bytes.Buffer
	if err := audit.NewJSONSink(&without).Emit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(without.String(), "traceId") {
		t.Errorf("a record without a trace id writes one: %s", without.String())
	}

	r.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var fast, slow bytes.Buffer
	if err := audit.NewJSONSink(&fast).Emit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := audit.NewSlogSink(slog.NewJSONHandler(&slow, nil)).Emit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if fast.String() != slow.String() {
		t.Errorf("JSONSink and SlogSink differ:\n%s%s", fast.String(), slow.String())
	}
	if want := `"correlationId":"corr","traceId":"4bf92f3577b34da6a3ce929d0e0e4736","streaming"`; !strings.Contains(fast.String(), want) {
		t.Errorf("record %s lacks %s", fast.String(), want)
	}
	if got, want := strings.Replace(fast.String(), `,"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"`, "", 1), without.String(); got != want {
		t.Errorf("the trace id is not the only difference:\n%s%s", got, want)
	}
}

// newTraceExecutor runs the AuditLog hook over mem with one tool, echo.
func newTraceExecutor(t *testing.T, mem *audit.Memory) *hooks.Executor {
	t.Helper()
	echo := hooks.ToolFunc{ToolName: "echo", Func: func(context.Context, map[string]any) (string, error) { return "ok", nil }}
	exec, err := hooks.NewExecutor([]hooks.Entry{{Hook: audit.New(mem)}}, []hooks.Tool{echo})
	if err != nil {
		t.Fatal(err)
	}
	return exec
}
