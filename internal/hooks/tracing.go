package hooks

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation name of the executor's spans.
const TracerName = "github.com/toolhooks/toolhooks/internal/hooks"

// Names of the executor's spans. A decision span covers one Execute or
// Evaluate (before phase, approval, tool, result filters, after phase); its
// children are one hook span per before-callback and, for Execute, the tool
// span.
const (
	SpanDecision = "toolhooks.decision"
	SpanHook     = "toolhooks.hook"
	SpanTool     = "toolhooks.tool"
)

// Attribute keys of the executor's spans. No span carries argument values,
// result contents or a denial's reason (which may quote arguments).
const (
	AttrTool      = attribute.Key("toolhooks.tool")
	AttrOutcome   = attribute.Key("toolhooks.outcome")
	AttrHook      = attribute.Key("toolhooks.hook")
	AttrVerdict   = attribute.Key("toolhooks.verdict")
	AttrRule      = attribute.Key("toolhooks.rule")
	AttrAction    = attribute.Key("toolhooks.enforcement_action")
	AttrPolicy    = attribute.Key("toolhooks.policy.kind")
	AttrPolicyNS  = attribute.Key("toolhooks.policy.namespace")
	AttrPolicyNm  = attribute.Key("toolhooks.policy.name")
	AttrOperation = attribute.Key("toolhooks.operation")
)

// Verdicts of a hook span (AttrVerdict).
const (
	VerdictAllow = "allow"
	VerdictDeny  = "deny"
	VerdictAsk   = "ask"
	VerdictError = "error"
	VerdictPanic = "panic"
)

// untouchedGlobal is the global TracerProvider before anything installed
// one: it records nothing, so an executor built while it is in place does
// not trace.
var untouchedGlobal = otel.GetTracerProvider()

// WithTracerProvider sets the provider of the executor's spans. Without
// this option the executor uses the global provider (otel.GetTracerProvider)
// as it is when NewExecutor runs. Nil, a noop provider or a global provider
// nobody installed switch tracing off: the executor then makes no span at
// all and the decision path pays one nil check per hook.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(e *Executor) {
		e.tracerSet = true
		e.tracer = tracerOf(tp)
	}
}

// tracerOf is the tracer of tp, or nil when tp cannot record.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil || tp == untouchedGlobal {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(TracerName)
}

// startDecision starts the decision span of call; op is "execute" or "evaluate".
func (e *Executor) startDecision(ctx context.Context, call *Call, op string) (context.Context, trace.Span) {
	return e.tracer.Start(ctx, SpanDecision, trace.WithAttributes(
		AttrTool.String(call.Tool),
		AttrOperation.String(op),
	))
}

// endDecision records res's outcome and, for a denial or a withheld
// result, the deciding hook, policy and rule on span and ends it.
func endDecision(span trace.Span, res *Result) {
	span.SetAttributes(AttrOutcome.String(string(res.Status)))
	d := res.Denial
	if d == nil {
		d = res.Withheld
	}
	if d != nil {
		setDecision(span, d)
	}
	if res.Status == StatusFailed || res.Status == StatusTimedOut {
		span.SetStatus(codes.Error, string(res.Status))
	}
	span.End()
}

// setDecision puts d's hook, policy, rule and action on span (never its reason).
func setDecision(span trace.Span, d *Decision) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, AttrHook.String(d.Hook), AttrRule.String(d.Rule))
	if d.Action != "" {
		attrs = append(attrs, AttrAction.String(string(d.Action)))
	}
	if d.Policy.Kind != "" {
		attrs = append(attrs, AttrPolicy.String(d.Policy.Kind))
	}
	if d.Policy.Namespace != "" {
		attrs = append(attrs, AttrPolicyNS.String(d.Policy.Namespace))
	}
	if d.Policy.Name != "" {
		attrs = append(attrs, AttrPolicyNm.String(d.Policy.Name))
	}
	span.SetAttributes(attrs...)
}

// startHook starts the span of en's before-callback.
func (e *Executor) startHook(ctx context.Context, en *entry) (context.Context, trace.Span) {
	return e.tracer.Start(ctx, SpanHook, trace.WithAttributes(AttrHook.String(en.name)))
}

// endHook records a before-callback's verdict (and for a denial or an ask
// its rule and policy) on span and ends it.
func endHook(span trace.Span, en *entry, v Verdict, err error) {
	switch {
	case err != nil:
		span.SetAttributes(AttrVerdict.String(VerdictError))
		span.SetStatus(codes.Error, "hook failed")
	case v.Ask:
		span.SetAttributes(AttrVerdict.String(VerdictAsk))
		d := en.decision(v.Rule, "")
		setDecision(span, &d)
	case !v.Allowed:
		span.SetAttributes(AttrVerdict.String(VerdictDeny))
		d := en.decision(v.Rule, "")
		setDecision(span, &d)
	default:
		span.SetAttributes(AttrVerdict.String(VerdictAllow))
	}
	span.End()
}

// endTool records the tool run's status on span and ends it.
func endTool(span trace.Span, res *Result) {
	span.SetAttributes(AttrOutcome.String(string(res.Status)))
	if res.Failed {
		span.SetStatus(codes.Error, string(res.Status))
	}
	span.End()
}
