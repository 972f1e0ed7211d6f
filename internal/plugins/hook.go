package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// errTimedOut is the cause of a plugin call's context when the plugin's own
// timeout (not the caller's) ended it.
var errTimedOut = errors.New("the plugin did not reply in time")

// pluginHook is the hook of one PluginHook entry in one configuration. Its
// plugin (process or HTTP client, breaker, after queue) may be shared with
// the hooks of other configurations.
type pluginHook struct {
	p       *plugin
	name    string
	before  bool
	after   bool
	timeout time.Duration
	// spec is the hook's compiled plugin spec (its tools filter).
	spec Spec
}

// Name returns the PluginHook's hook name.
func (h *pluginHook) Name() string { return h.name }

// Before sends hook_before to the plugin and returns its verdict. A call the
// plugin is not subscribed to (no tool:before, or a tool outside the tool
// filter) is allowed without calling it. A plugin that denies yields rule
// pluginDenied with its reason. Any failure is returned as an *Error naming
// its kind, and the entry's failure policy (FailOpen) decides; when the
// circuit breaker is open the plugin is not called (kind circuitOpen).
func (h *pluginHook) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !h.before || !h.spec.MatchesTool(call.Tool) {
		return hooks.Allow, nil
	}
	p := h.p
	probe, ok := p.br.allow()
	if !ok {
		return hooks.Verdict{}, h.failed(fail(KindCircuitOpen,
			"plugin %s failed repeatedly; it is not called until its circuit breaker's cool-down ends", h.name))
	}
	cctx, cancel := context.WithTimeoutCause(ctx, h.timeout, errTimedOut)
	defer cancel()
	raw, err := p.tr.call(cctx, methodBefore, newParams(eventBefore, call))
	var v hooks.Verdict
	if err == nil {
		v, err = parseVerdict(h.name, raw)
	}
	if err == nil {
		p.br.success(probe)
		return v, nil
	}
	if errors.Is(err, errTimedOut) {
		err = fail(KindTimeout, "plugin %s did not reply within %s", h.name, h.timeout)
	} else if ctx.Err() != nil { // the caller gave up: says nothing about the plugin
		p.br.release(probe)
		return hooks.Verdict{}, fmt.Errorf("plugin %s: call abandoned: %w", h.name, err)
	}
	e, ok := errors.AsType[*Error](err)
	if !ok {
		e = &Error{Kind: KindUnavailable, Err: err}
	}
	if p.br.failure(probe) {
		p.log.Warn("Plugin circuit breaker opened", "hook", h.name, "kind", string(e.Kind), "error", e.Err)
	}
	return hooks.Verdict{}, h.failed(e)
}

// failed counts a before-call failure and returns it.
func (h *pluginHook) failed(e *Error) error {
	h.p.m.failed(h.name, e.Kind)
	return e
}

// After queues hook_after for a call whose tool ran (succeeded, failed,
// timed out, cancelled, or its result withheld: the plugin gets the withheld
// text), if the plugin subscribed to tool:after and the tool passes the
// filter. It never blocks: when the plugin's queue is full the event is
// dropped and counted.
func (h *pluginHook) After(_ context.Context, call *hooks.Call, res *hooks.Result) {
	if !h.after || !h.spec.MatchesTool(call.Tool) {
		return
	}
	switch res.Status {
	case hooks.StatusSucceeded, hooks.StatusFailed, hooks.StatusTimedOut, hooks.StatusCancelled, hooks.StatusWithheld:
	default: // denied, unknown or not run here: plugins are told only of tool runs
		return
	}
	pr := newParams(eventAfter, call)
	out, failed := res.Output, res.Failed
	ms := float64(res.Duration.Microseconds()) / 1000
	pr.Result, pr.DurationMs, pr.Failed = &out, &ms, &failed
	select {
	case h.p.after <- afterEvent{params: pr, timeout: h.timeout}:
	default:
		h.p.m.afterDropped.WithLabelValues(h.name).Inc()
		if h.p.logLimit.Allow() {
			h.p.log.Warn("Plugin after-phase queue is full; event dropped", "hook", h.name, "tool", call.Tool,
				"correlationId", call.CorrelationID)
		}
	}
}

// newParams returns the plugin protocol's hook context for call.
func newParams(event string, call *hooks.Call) *params {
	return &params{
		EventName:     event,
		ToolName:      call.Tool,
		Arguments:     call.ArgsText(),
		SessionID:     call.SessionID,
		ChannelID:     call.ChannelID,
		SenderID:      call.SenderID,
		CorrelationID: call.CorrelationID,
	}
}
