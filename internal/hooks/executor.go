package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// Names of the pseudo-hooks the executor itself denies as. They appear in the
// caller's denial text and in Decision.Hook like a real hook's name.
const (
	// ArgumentsHookName denies calls whose arguments are not one JSON object.
	ArgumentsHookName = "arguments"
	// ContextHookName denies calls whose context ended before the before phase completed.
	ContextHookName = "context"
	// RequestHookName denies requests refused before they were read as a
	// call (Call.ArgsErr is a *Refusal).
	RequestHookName = "request"
)

// Rules the executor and the adapters in this package put into decisions.
const (
	// RuleInvalidArguments: the call's arguments are not one JSON object (Call.ArgsErr).
	RuleInvalidArguments = "InvalidArguments"
	// RuleTooLarge: the call's request was larger than the gateway reads
	// (Call.ArgsErr wraps ErrTooLarge).
	RuleTooLarge = "TooLarge"
	// RuleHookError: a before-callback returned an error.
	RuleHookError = "HookError"
	// RuleHookPanic: a before-callback panicked.
	RuleHookPanic = "HookPanic"
	// RuleCancelled: the call's context was cancelled or expired during the before phase.
	RuleCancelled = "Cancelled"
	// RuleDenied is filled in when a hook denies without naming a rule.
	RuleDenied = "Denied"
	// RuleAuditFailed: a ToolGate (the audit hook) could not record the
	// allowed call before its tool would run.
	RuleAuditFailed = "AuditFailed"
	// RuleUnauthenticated: the request's caller could not be authenticated (a *Refusal).
	RuleUnauthenticated = "Unauthenticated"
	// RuleForbidden: the authenticator refused the request's caller (a *Refusal).
	RuleForbidden = "Forbidden"
	// RuleMalformedRequest: the request is not one call the API serves (a
	// *Refusal): its body is not the API's JSON or names no tool, or (MCP)
	// the protocol refuses it (no or an unknown session, a batch, ...).
	RuleMalformedRequest = "MalformedRequest"
	// RuleSenderMismatch: the request names a sender other than its
	// authenticated caller (a *Refusal).
	RuleSenderMismatch = "SenderMismatch"
	// RuleForeignOrigin: the request came from a web origin the endpoint
	// does not accept (a *Refusal).
	RuleForeignOrigin = "ForeignOrigin"
)

// Refusal is the Call.ArgsErr of a request a gateway refused before it
// was read as a call (an unauthenticated caller, a body that is not one
// call): the before phase denies it (hook "request", its Rule) without
// running a hook, so that it is audited and counted like any call.
type Refusal struct {
	// Rule is the denial's rule, one of the Rule* constants of refusals.
	Rule string
	// Err says why.
	Err error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// ErrTooLarge is wrapped by the Call.ArgsErr of a call whose request the
// gateway refused for its size before reading it: the before phase denies
// it (hook "arguments", rule TooLarge), so that it is audited like any call.
var ErrTooLarge = errors.New("request too large")

// ToolGate is an optional interface for hooks that must complete work once
// the before phase has allowed a call and before its tool runs (or, for
// Evaluate, before the allowed decision is returned): the audit hook writes
// the decision record there. An error denies the call with RuleAuditFailed,
// whatever the entry's action and fail-open setting; res holds the allowed
// call's warnings.
type ToolGate interface {
	Hook
	BeforeTool(ctx context.Context, call *Call, res *Result) error
}

// FallibleAfterHook is an optional interface for hooks whose after-callback can
// fail. The executor calls TryAfter instead of After and logs a returned error
// with its logger; the error never reaches the caller.
type FallibleAfterHook interface {
	Hook
	TryAfter(ctx context.Context, call *Call, res *Result) error
}

// Executor runs tool calls through an ordered hook list. It is immutable once
// built and safe for concurrent use.
type Executor struct {
	entries  []entry
	guards   []*entry // the entries whose hook is a RuntimeGuard
	filters  []resultFilter
	gates    int // entries with a ToolGate
	tools    map[string]Tool
	approver Approver
	timeout  time.Duration
	log      *slog.Logger
	now      func() time.Time
	// tracer makes the decision, hook and tool spans; nil when tracing is
	// off (see WithTracerProvider). tracerSet records that the option was given.
	tracer    trace.Tracer
	tracerSet bool
	// gen tells this executor's path rules from any other's (see Guard.PolicyKey).
	gen uint64
}

// entry is an Entry prepared once so that the per-call path does no work that
// could be done at construction.
type entry struct {
	hook     Hook
	tryAfter FallibleAfterHook // nil when the hook does not implement it
	gate     ToolGate          // nil when the hook does not implement it
	name     string
	denial   string // DenialText + name
	policy   PolicyRef
	action   EnforcementAction
	failOpen bool
}

// executorGen numbers executors, so that a key of one's path rules is never
// reused by another (a pointer could be, once the first is collected).
var executorGen atomic.Uint64

// Option configures an Executor.
type Option func(*Executor)

// WithToolTimeout sets how long a tool may run (default DefaultToolTimeout).
// Zero or a negative duration means no timeout.
func WithToolTimeout(d time.Duration) Option {
	return func(e *Executor) { e.timeout = d }
}

// WithLogger sets the logger for failures the executor swallows: after-phase
// errors and panics, fail-open before-hook failures, hook panics and tool
// failures. Nil means slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(e *Executor) {
		if l != nil {
			e.log = l
		}
	}
}

// NewExecutor builds an Executor from the ordered hook list and the tools it
// may run. It copies both; it rejects entries without a hook or name or with
// an unknown action, and tools that are nil, unnamed or registered twice.
func NewExecutor(entries []Entry, tools []Tool, opts ...Option) (*Executor, error) {
	e := &Executor{
		entries: make([]entry, 0, len(entries)),
		tools:   make(map[string]Tool, len(tools)),
		timeout: DefaultToolTimeout,
		log:     slog.Default(),
		now:     time.Now,
		gen:     executorGen.Add(1),
	}
	for _, opt := range opts {
		opt(e)
	}
	if !e.tracerSet {
		e.tracer = tracerOf(otel.GetTracerProvider())
	}
	for i, en := range entries {
		if err := en.validate(); err != nil {
			return nil, fmt.Errorf("hook entry %d: %w", i, err)
		}
		name := en.Hook.Name()
		action := en.Action
		if action == "" {
			action = ActionDeny
		}
		tryAfter, _ := en.Hook.(FallibleAfterHook)
		gate, _ := en.Hook.(ToolGate)
		if gate != nil {
			e.gates++
		}
		e.entries = append(e.entries, entry{
			hook:     en.Hook,
			tryAfter: tryAfter,
			gate:     gate,
			name:     name,
			denial:   DenialText + name,
			policy:   en.Policy,
			action:   action,
			failOpen: en.FailOpen,
		})
	}
	e.guards = guardEntries(e.entries)
	for i := range e.entries {
		if f, ok := e.entries[i].hook.(ResultFilter); ok {
			e.filters = append(e.filters, resultFilter{&e.entries[i], f})
		}
	}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool %d is nil", i)
		}
		name := t.Name()
		if name == "" {
			return nil, fmt.Errorf("tool %d has an empty name", i)
		}
		if _, dup := e.tools[name]; dup {
			return nil, fmt.Errorf("tool %q is registered twice", name)
		}
		e.tools[name] = t
	}
	return e, nil
}

// validate checks that an Entry can be run.
func (en Entry) validate() error {
	if en.Hook == nil {
		return errors.New("hook is nil")
	}
	if en.Hook.Name() == "" {
		return errors.New("hook has an empty name")
	}
	switch en.Action {
	case "", ActionDeny, ActionWarn:
		return nil
	default:
		return fmt.Errorf("hook %q: unknown enforcement action %q", en.Hook.Name(), en.Action)
	}
}

// Execute runs one tool call:
//
//  1. A tool that is not registered under exactly call.Tool yields
//     UnknownToolText and StatusUnknownTool; no before-callback runs.
//  2. The before phase (see Decide) runs; a denial yields exactly
//     DenialText+hook name in Output and the Decision in Denial. An allowed
//     call then passes the ToolGates (the audit hook's decision record); a
//     gate's error denies it (RuleAuditFailed) and the tool does not run.
//  3. The tool runs with the executor's timeout: TimedOutText on timeout,
//     CancelledText (StatusCancelled) when the caller's context is cancelled
//     before the tool returns a result, FailedText on an error or panic
//     (Failed is true for all three), except that a *ToolError fails the call
//     (StatusFailed) with the error's own Text. Output that merely starts
//     with "Error:" is a success. Duration covers the tool only.
//     The tool's context carries a Guard (GuardFromContext) of the hooks
//     that implement RuntimeGuard; a tool that returns the *RuntimeDenial of
//     a check yields a denial like the before phase's (Status denied, the
//     hook's denial text, the Decision in Denial).
//  4. The result filters (ResultFilter) run on the output of a tool that
//     succeeded or failed: they redact it, or withhold it (StatusWithheld,
//     WithheldText+hook name, the Decision in Withheld); a filter's error
//     or panic withholds it too.
//  5. The after phase runs every hook's after-callback in order, for every
//     outcome including unknown tools and denials, so that the audit hook
//     records each call exactly once. After-callbacks get a copy of the
//     result and a context that is not cancelled with ctx; their errors and
//     panics are logged and never change what Execute returns.
//
// call must have been built by NewCall (or have Args set consistently).
func (e *Executor) Execute(ctx context.Context, call *Call) Result {
	var res Result
	if e.tracer != nil {
		var span trace.Span
		ctx, span = e.startDecision(ctx, call, "execute")
		defer endDecision(span, &res)
	}
	tool, ok := e.tools[call.Tool]
	if !ok {
		res.Status = StatusUnknownTool
		res.Output = UnknownToolText
	} else if e.before(ctx, call, &res) && e.approve(ctx, call, &res, true) && e.gate(ctx, call, &res) {
		e.runTool(ctx, tool, call, &res)
		e.filterResult(ctx, call, &res)
	}
	e.after(ctx, call, res)
	return res
}

// Evaluate runs the before phase for a tool the caller will run itself (the
// /v1/decisions API), the ToolGates when it allows (a gate's error denies),
// and then the after phase, so the decision is audited before it is
// returned. The result's Status is StatusAllowed (Output empty) or StatusDenied.
// Evaluate does not look the tool up: the caller owns its tool set, so an
// unregistered tool is evaluated by the hooks like any other (policies treat
// tools they do not know as mutating).
//
// A call a hook asked about is answered at once: StatusAllowed when an
// approval was granted for it (and is now used), a denial when it was
// denied or expired, and StatusAsk with the request in Approval when nobody
// has decided yet.
func (e *Executor) Evaluate(ctx context.Context, call *Call) Result {
	var res Result
	if e.tracer != nil {
		var span trace.Span
		ctx, span = e.startDecision(ctx, call, "evaluate")
		defer endDecision(span, &res)
	}
	if e.before(ctx, call, &res) && e.approve(ctx, call, &res, false) {
		res.Status = StatusAllowed
		e.gate(ctx, call, &res)
	}
	e.after(ctx, call, res)
	return res
}

// approve settles a call that the before phase allowed: a call no hook asked
// about proceeds; one a hook asked about proceeds only when the approver
// grants it. wait says whether to wait for a decision (Execute) or answer
// StatusAsk at once (Evaluate). Every failure to get a grant denies.
func (e *Executor) approve(ctx context.Context, call *Call, res *Result, wait bool) bool {
	if res.Ask == nil {
		return true
	}
	ask := *res.Ask
	refuse := func(rule, reason string) bool {
		deny(res, DenialText+ask.Hook,
			Decision{Hook: ask.Hook, Policy: ask.Policy, Rule: rule, Reason: reason, Action: ActionDeny, Layer: LayerStatic})
		return false
	}
	if e.approver == nil {
		return refuse(RuleApprovalUnavailable, ask.Reason+"; it needs a person's approval, and this gateway cannot request approvals")
	}
	expiry := res.askExpiry
	if expiry <= 0 {
		expiry = DefaultApprovalExpiry
	}
	expiry = min(expiry, MaxApprovalExpiry)
	a, err := requestApproval(ctx, e.approver, ApprovalRequest{Call: call, Ask: ask, Expiry: expiry, Wait: wait})
	if err != nil {
		e.log.ErrorContext(ctx, "Call denied: its approval could not be requested", "hook", ask.Hook,
			"tool", call.Tool, "correlationId", call.CorrelationID, "error", err)
		return refuse(RuleApprovalUnavailable, ask.Reason+"; it needs a person's approval, which could not be requested: "+err.Error())
	}
	res.Approval = &a
	switch a.State {
	case ApprovalApproved:
		return true
	case ApprovalDenied:
		reason := "ToolCallApproval " + a.Name + " was denied by " + a.DecidedBy
		if a.Reason != "" {
			reason += ": " + a.Reason
		}
		return refuse(RuleApprovalDenied, reason)
	case ApprovalExpired:
		return refuse(RuleApprovalExpired, "ToolCallApproval "+a.Name+" expired before anyone decided it")
	case ApprovalPending:
		if !wait {
			res.Status = StatusAsk
			return false
		}
		return refuse(RuleApprovalPending, ask.Reason+"; it waits for a person's approval in ToolCallApproval "+a.Name+
			": retry the same call once it is decided")
	default:
		return refuse(RuleApprovalUnavailable, fmt.Sprintf("ToolCallApproval %s is in an unknown state %q", a.Name, a.State))
	}
}

// requestApproval calls the approver, turning a panic into an error.
func requestApproval(ctx context.Context, a Approver, req ApprovalRequest) (out Approval, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("approver panicked: %v", r)
		}
	}()
	return a.RequestApproval(ctx, req)
}

// gate runs the ToolGates of an allowed call and reports whether it may
// proceed; a gate's error or panic denies it.
func (e *Executor) gate(ctx context.Context, call *Call, res *Result) bool {
	if e.gates == 0 {
		return true
	}
	status := res.Status
	res.Status = StatusAllowed
	for i := range e.entries {
		en := &e.entries[i]
		if en.gate == nil {
			continue
		}
		if err := callGate(ctx, en.gate, call, res); err != nil {
			e.log.ErrorContext(ctx, "Call denied: it could not be recorded before its tool runs", "hook", en.name,
				"tool", call.Tool, "correlationId", call.CorrelationID, "error", err)
			deny(res, en.denial, Decision{Hook: en.name, Policy: en.policy, Rule: RuleAuditFailed,
				Reason: "The call could not be recorded before its tool runs: " + err.Error(), Action: ActionDeny, Layer: LayerStatic})
			return false
		}
	}
	res.Status = status
	return true
}

// callGate runs one ToolGate, turning a panic into an error.
func callGate(ctx context.Context, g ToolGate, call *Call, res *Result) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hook %s panicked: %v", g.Name(), r)
		}
	}()
	return g.BeforeTool(ctx, call, res)
}

// Decide runs only the before phase and no after-callbacks, so nothing is
// audited: it is for offline evaluation (CLI, policy validation) and
// benchmarks. Gateways use Execute or Evaluate.
//
// The before phase denies calls whose ArgsErr is set (hook "arguments", or
// "request" for a *Refusal), then
// runs the entries' before-callbacks in order. The first denial from an entry
// whose action is Deny stops the phase; a denial from a Warn entry is
// appended to Warnings and the phase continues. A before-callback that
// returns an error or panics denies (rules HookError, HookPanic) unless its
// entry is fail-open, in which case the failure is logged and the hook
// allows. A context that is done before or during the phase denies (hook
// "context", rule Cancelled). Allowed calls get StatusAllowed, or StatusAsk
// when a hook asked for approval (Decide does not request it).
func (e *Executor) Decide(ctx context.Context, call *Call) Result {
	var res Result
	if e.before(ctx, call, &res) {
		res.Status = StatusAllowed
		if res.Ask != nil {
			res.Status = StatusAsk
		}
	}
	return res
}

// before runs the before phase into res and reports whether the call may
// proceed. On denial it sets Status, Output and Denial. The allowed path
// allocates only the call's pathguard.Memo context unless a Warn entry
// denies.
func (e *Executor) before(ctx context.Context, call *Call, res *Result) bool {
	if call.ArgsErr != nil {
		d := Decision{
			Hook:   ArgumentsHookName,
			Rule:   RuleInvalidArguments,
			Reason: "The arguments must be one JSON object: " + call.ArgsErr.Error(),
			Action: ActionDeny,
			Layer:  LayerStatic,
		}
		if ref, ok := errors.AsType[*Refusal](call.ArgsErr); ok {
			d.Hook, d.Rule, d.Reason = RequestHookName, ref.Rule, "The request was refused: "+ref.Error()
		} else if errors.Is(call.ArgsErr, ErrTooLarge) {
			d.Rule, d.Reason = RuleTooLarge, "The call was refused unread: "+call.ArgsErr.Error()
		}
		deny(res, DenialText+d.Hook, d)
		return false
	}
	// One memo of path lookups per decision, shared by the hooks that
	// resolve paths (Autonomy and ContractScope resolve the same
	// arguments); it dies with this before phase, see pathguard.Memo.
	ctx = pathguard.WithMemo(ctx)
	for next := 0; ; {
		var allowed, done bool
		if next, allowed, done = e.beforeFrom(ctx, call, res, next); done {
			return allowed
		}
	}
}

// beforeFrom runs the before-callbacks from entry start on. It recovers a
// panic once for the whole run rather than once per hook, which keeps the
// per-hook cost down: when entry i panics and the phase goes on (fail-open or
// warn), it returns done=false and next=i+1 to be called again from there.
func (e *Executor) beforeFrom(ctx context.Context, call *Call, res *Result, start int) (next int, allowed, done bool) {
	i := start
	var span trace.Span // the hook span in progress, if tracing
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		en := &e.entries[i]
		if span != nil {
			span.SetAttributes(AttrVerdict.String(VerdictPanic))
			span.SetStatus(codes.Error, "hook panicked")
			span.End()
		}
		e.log.ErrorContext(ctx, "Before hook panicked", "hook", en.name, "tool", call.Tool,
			"correlationId", call.CorrelationID, "failOpen", en.failOpen, "panic", r, "stack", string(debug.Stack()))
		next, allowed, done = i+1, false, false
		if en.failOpen {
			return
		}
		if e.refuse(res, en, en.decision(RuleHookPanic, fmt.Sprintf("Hook %s panicked: %v", en.name, r))) {
			done = true
		}
	}()
	for ; i < len(e.entries); i++ {
		en := &e.entries[i]
		if ctx.Err() != nil {
			deny(res, DenialText+ContextHookName, cancelled(ctx, en.name))
			return 0, false, true
		}
		hctx := ctx
		if e.tracer != nil {
			hctx, span = e.startHook(ctx, en)
		}
		v, err := en.hook.Before(hctx, call)
		if span != nil {
			endHook(span, en, v, err)
			span = nil
		}
		switch {
		case err != nil:
			if en.failOpen {
				e.log.WarnContext(ctx, "Before hook failed; allowing because it is fail-open", "hook", en.name,
					"tool", call.Tool, "correlationId", call.CorrelationID, "error", err)
				continue
			}
			if e.refuse(res, en, en.decision(RuleHookError, fmt.Sprintf("Hook %s failed: %v", en.name, err))) {
				return 0, false, true
			}
		case v.Ask:
			e.ask(res, en, v)
		case !v.Allowed:
			if e.refuse(res, en, en.decision(v.Rule, v.Reason)) {
				return 0, false, true
			}
		}
	}
	if ctx.Err() != nil {
		deny(res, DenialText+ContextHookName, cancelled(ctx, ""))
		return 0, false, true
	}
	return 0, true, true
}

// ask records en's ask verdict: the first one of a Deny entry decides
// whether the call needs approval once every hook has allowed it; a Warn
// entry's is only recorded as a warning (it would have asked).
func (e *Executor) ask(res *Result, en *entry, v Verdict) {
	d := en.decision(v.Rule, v.Reason)
	if en.action == ActionWarn {
		res.Warnings = append(res.Warnings, d)
		return
	}
	if res.Ask == nil {
		res.Ask = &d
		res.askExpiry = v.Expiry
	}
}

// refuse applies en's denial d: a Warn entry's is appended to the warnings
// and the phase goes on; any other's denies the call. It reports whether the
// call was denied.
func (e *Executor) refuse(res *Result, en *entry, d Decision) bool {
	if en.action == ActionWarn {
		res.Warnings = append(res.Warnings, d)
		return false
	}
	deny(res, en.denial, d)
	return true
}

// decision completes a denying verdict of en into a Decision of the before
// phase (LayerStatic), filling in a rule and a reason if the hook gave none.
func (en *entry) decision(rule, reason string) Decision {
	if rule == "" {
		rule = RuleDenied
	}
	if reason == "" {
		reason = "Hook " + en.name + " denied the call"
	}
	return Decision{Hook: en.name, Policy: en.policy, Rule: rule, Reason: reason, Action: en.action, Layer: LayerStatic}
}

// deny records d as the deciding denial in res.
func deny(res *Result, output string, d Decision) {
	d.Allowed = false
	res.Status = StatusDenied
	res.Output = output
	res.Denial = &d
}

// cancelled is the denial for a call whose context ended; next names the hook
// that could not be consulted, if any.
func cancelled(ctx context.Context, next string) Decision {
	reason := "The call's context ended before the before phase completed: " + context.Cause(ctx).Error()
	if next != "" {
		reason = "The call's context ended before hook " + next + " could decide: " + context.Cause(ctx).Error()
	}
	return Decision{Hook: ContextHookName, Rule: RuleCancelled, Reason: reason, Action: ActionDeny, Layer: LayerStatic}
}

// recovered is a recovered panic with the stack where it happened.
type recovered struct {
	value any
	stack string
}

// toolOutcome is what a tool run produced.
type toolOutcome struct {
	out string
	err error
}

// toolPanic is the error of a tool that panicked.
type toolPanic struct {
	recovered
}

func (p *toolPanic) Error() string { return fmt.Sprintf("tool panicked: %v", p.value) }

// runTool runs tool with the executor's timeout and records the outcome in res.
// With a timeout the tool runs in its own goroutine so that a tool ignoring
// its context cannot hold the call past the timeout; such a goroutine is
// abandoned and ends when the tool returns.
func (e *Executor) runTool(ctx context.Context, tool Tool, call *Call, res *Result) {
	tctx := ctx
	if e.timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	guard := e.newGuard(call)
	tctx = WithGuard(tctx, guard)
	if e.tracer != nil {
		var span trace.Span
		tctx, span = e.tracer.Start(tctx, SpanTool, trace.WithAttributes(AttrTool.String(call.Tool)))
		defer endTool(span, res)
	}
	start := e.now()
	var o toolOutcome
	if e.timeout > 0 {
		done := make(chan toolOutcome, 1)
		go func() { done <- invokeTool(tctx, tool, call.Args) }()
		select {
		case o = <-done:
		case <-tctx.Done():
			select {
			case o = <-done: // finished at the deadline: keep its outcome
			default:
				o.err = context.Cause(tctx)
			}
		}
	} else {
		o = invokeTool(tctx, tool, call.Args)
	}
	res.Duration = e.now().Sub(start)
	for _, w := range guard.Warnings() {
		if !hasWarning(res.Warnings, w) { // the before phase already warned of it
			res.Warnings = append(res.Warnings, w)
		}
	}

	te, explained := errors.AsType[*ToolError](o.err)
	switch rd, denied := errors.AsType[*RuntimeDenial](o.err); {
	case denied:
		// A runtime check refused what the tool was about to do.
		deny(res, rd.denial, rd.Decision)
		return
	case o.err == nil:
		res.Status = StatusSucceeded
		res.Output = o.out
		return
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up (an MCP notifications/cancelled, a client that
		// went away): not the tool's own timeout, and not its failure.
		res.Status = StatusCancelled
		res.Output = CancelledText
		e.log.InfoContext(ctx, "Tool call cancelled by the caller", "tool", call.Tool, "correlationId", call.CorrelationID)
	case explained:
		// The tool told the caller why the call failed.
		res.Status = StatusFailed
		res.Output = te.Text
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		res.Status = StatusTimedOut
		res.Output = TimedOutText
		e.log.WarnContext(ctx, "Tool timed out", "tool", call.Tool, "correlationId", call.CorrelationID,
			"timeout", e.timeout, "error", o.err)
	default:
		res.Status = StatusFailed
		res.Output = FailedText
		if p, ok := errors.AsType[*toolPanic](o.err); ok {
			e.log.ErrorContext(ctx, "Tool panicked", "tool", call.Tool, "correlationId", call.CorrelationID,
				"panic", p.value, "stack", p.stack)
		} else {
			e.log.WarnContext(ctx, "Tool failed", "tool", call.Tool, "correlationId", call.CorrelationID,
				"error", o.err)
		}
	}
	res.Failed = true
}

// invokeTool runs the tool, turning a panic into a *toolPanic error.
func invokeTool(ctx context.Context, tool Tool, args map[string]any) (o toolOutcome) {
	defer func() {
		if r := recover(); r != nil {
			o = toolOutcome{err: &toolPanic{recovered{value: r, stack: string(debug.Stack())}}}
		}
	}()
	out, err := tool.Execute(ctx, args)
	return toolOutcome{out: out, err: err}
}

// after runs every entry's after-callback in order on a copy of res, so that
// no callback can change what the caller receives, with a context that is not
// cancelled with ctx, so that a call abandoned by its caller is still audited.
func (e *Executor) after(ctx context.Context, call *Call, res Result) {
	if len(e.entries) == 0 {
		return
	}
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	snapshot := &res
	for i := range e.entries {
		e.callAfter(ctx, &e.entries[i], call, snapshot)
	}
}

// callAfter runs one after-callback, logging its error or panic.
func (e *Executor) callAfter(ctx context.Context, en *entry, call *Call, res *Result) {
	defer func() {
		if r := recover(); r != nil {
			e.log.ErrorContext(ctx, "After hook panicked", "hook", en.name, "tool", call.Tool,
				"correlationId", call.CorrelationID, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if en.tryAfter == nil {
		en.hook.After(ctx, call, res)
		return
	}
	if err := en.tryAfter.TryAfter(ctx, call, res); err != nil {
		e.log.WarnContext(ctx, "After hook failed", "hook", en.name, "tool", call.Tool,
			"correlationId", call.CorrelationID, "error", err)
	}
}

// ToolFunc is a Tool built from a function, for native tools and tests.
type ToolFunc struct {
	// ToolName is returned by Name and is what calls must name exactly.
	ToolName string
	// Func runs the tool.
	Func func(ctx context.Context, args map[string]any) (string, error)
}

// Name returns ToolName.
func (t ToolFunc) Name() string { return t.ToolName }

// Execute calls Func.
func (t ToolFunc) Execute(ctx context.Context, args map[string]any) (string, error) {
	return t.Func(ctx, args)
}
