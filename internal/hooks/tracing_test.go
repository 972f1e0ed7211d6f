package hooks_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// recorder returns a TracerProvider sampling every span into the returned recorder.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// remoteParent is a context carrying a caller's sampled span context.
func remoteParent() (context.Context, oteltrace.SpanContext) {
	tid, _ := oteltrace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := oteltrace.SpanIDFromHex("00f067aa0ba902b7")
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: oteltrace.FlagsSampled, Remote: true})
	return oteltrace.ContextWithRemoteSpanContext(context.Background(), sc), sc
}

// spansByName indexes ended spans by name.
func spansByName(rec *tracetest.SpanRecorder) map[string][]sdktrace.ReadOnlySpan {
	m := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		m[s.Name()] = append(m[s.Name()], s)
	}
	return m
}

// attrs returns a span's attributes as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

const secretArg = "/home/alice/secret-value"

func TestDeniedDecisionSpan(t *testing.T) {
	tp, rec := recorder(t)
	ctx, parent := remoteParent()
	exec := mustExecutor(t, []hooks.Entry{
		{Hook: hooks.HookFuncs{HookName: "first", BeforeFunc: allows}},
		{Hook: hooks.HookFuncs{HookName: "strict", BeforeFunc: denies("workspaceOnly", "path "+secretArg+" is outside")}, Policy: strict},
	}, nil, hooks.WithTracerProvider(tp))
	res := exec.Evaluate(ctx, hooks.NewCall("read_file", `{"path":"`+secretArg+`"}`))
	if res.Status != hooks.StatusDenied {
		t.Fatalf("status %s", res.Status)
	}
	spans := spansByName(rec)
	if len(spans[hooks.SpanDecision]) != 1 || len(spans[hooks.SpanHook]) != 2 || len(spans[hooks.SpanTool]) != 0 {
		t.Fatalf("spans %v, want one decision and two hooks", spans)
	}
	d := spans[hooks.SpanDecision][0]
	if d.Parent().SpanID() != parent.SpanID() || d.SpanContext().TraceID() != parent.TraceID() {
		t.Errorf("decision span's parent %v, want the caller's %v", d.Parent(), parent)
	}
	want := map[string]string{
		"toolhooks.tool": "read_file", "toolhooks.outcome": "denied", "toolhooks.hook": "strict",
		"toolhooks.rule": "workspaceOnly", "toolhooks.policy.kind": "AutonomyPolicy",
		"toolhooks.policy.namespace": "team-a", "toolhooks.policy.name": "strict",
	}
	got := attrs(d)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("decision attribute %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	verdicts := map[string]string{}
	for _, h := range spans[hooks.SpanHook] {
		if h.Parent().SpanID() != d.SpanContext().SpanID() {
			t.Errorf("hook span %v is not a child of the decision span", attrs(h))
		}
		if h.EndTime().Before(h.StartTime()) {
			t.Errorf("hook span %v has no duration", attrs(h))
		}
		a := attrs(h)
		verdicts[a["toolhooks.hook"]] = a["toolhooks.verdict"]
	}
	if verdicts["first"] != "allow" || verdicts["strict"] != "deny" {
		t.Errorf("hook verdicts %v", verdicts)
	}
	for _, s := range rec.Ended() {
		for k, v := range attrs(s) {
			if strings.Contains(v, "secret-value") {
				t.Errorf("span %s attribute %s carries an argument value: %q", s.Name(), k, v)
			}
		}
	}
}

func TestExecutedCallHasAToolSpanItsToolSees(t *testing.T) {
	tp, rec := recorder(t)
	var toolSpan oteltrace.SpanContext
	tool := hooks.ToolFunc{ToolName: "echo", Func: func(ctx context.Context, _ map[string]any) (string, error) {
		toolSpan = oteltrace.SpanContextFromContext(ctx)
		return "ok", nil
	}}
	exec := mustExecutor(t, []hooks.Entry{{Hook: hooks.HookFuncs{HookName: "first", BeforeFunc: allows}}},
		[]hooks.Tool{tool}, hooks.WithTracerProvider(tp))
	if res := exec.Execute(context.Background(), hooks.NewCall("echo", `{}`)); res.Status != hooks.StatusSucceeded {
		t.Fatalf("status %s", res.Status)
	}
	spans := spansByName(rec)
	if len(spans[hooks.SpanDecision]) != 1 || len(spans[hooks.SpanTool]) != 1 {
		t.Fatalf("spans %v", spans)
	}
	d, tl := spans[hooks.SpanDecision][0], spans[hooks.SpanTool][0]
	if d.Parent().IsValid() {
		t.Errorf("a call without a caller's span got a parent %v", d.Parent())
	}
	if tl.Parent().SpanID() != d.SpanContext().SpanID() || toolSpan.SpanID() != tl.SpanContext().SpanID() {
		t.Errorf("tool span %v (the tool saw %v) is not the decision's child", tl.SpanContext(), toolSpan)
	}
	if got := attrs(d)["toolhooks.outcome"]; got != "succeeded" {
		t.Errorf("outcome %q", got)
	}
}

func TestPanickingHookEndsItsSpan(t *testing.T) {
	tp, rec := recorder(t)
	exec := mustExecutor(t, []hooks.Entry{{Hook: hooks.HookFuncs{HookName: "boom", BeforeFunc: panics("x")}}},
		nil, hooks.WithTracerProvider(tp), hooks.WithLogger(discardLogger()))
	exec.Evaluate(context.Background(), hooks.NewCall("echo", `{}`))
	spans := spansByName(rec)
	if len(spans[hooks.SpanHook]) != 1 || attrs(spans[hooks.SpanHook][0])["toolhooks.verdict"] != "panic" {
		t.Fatalf("hook spans %v", spans[hooks.SpanHook])
	}
	if got := attrs(spans[hooks.SpanDecision][0]); got["toolhooks.rule"] != hooks.RuleHookPanic {
		t.Errorf("decision %v", got)
	}
}

func TestNoTracerMakesNoSpans(t *testing.T) {
	ctx, parent := remoteParent()
	var seen oteltrace.SpanContext
	tool := hooks.ToolFunc{ToolName: "echo", Func: func(ctx context.Context, _ map[string]any) (string, error) {
		seen = oteltrace.SpanContextFromContext(ctx)
		return "ok", nil
	}}
	for _, opts := range [][]hooks.Option{nil, {hooks.WithTracerProvider(nil)}} {
		exec := mustExecutor(t, nil, []hooks.Tool{tool}, opts...)
		exec.Execute(ctx, hooks.NewCall("echo", `{}`))
		if !seen.Equal(parent) {
			t.Errorf("the tool saw span %v, want the caller's %v untouched", seen, parent)
		}
	}
}
