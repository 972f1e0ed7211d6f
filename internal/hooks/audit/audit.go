// Package audit provides the AuditLog hook: it emits exactly one structured
// record per tool call, including denied calls, with the call's outcome,
// lengths and timing but never its argument or result contents.
//
// # No tool runs unaudited
//
// A call that is allowed is recorded twice, with the same CallID: a
// decision record (Phase PhaseStarted, message MessageStarted, outcome
// allowed) is written after the hooks allowed the call and before its tool
// runs, and the call's record (Phase PhaseCompleted, message Message, with
// its outcome) after. When the decision record cannot be written, the call is
// denied (the executor's ToolGate, rule hooks.RuleAuditFailed) and its tool
// never runs. A denied call writes only its record. So a reader counting
// records with message Message sees exactly one per call; a decision record
// without its completion names a call whose tool may have run but whose
// outcome was lost (the gateway died, or the completion could not be
// written).
package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Name is the AuditLog hook's name.
const Name = "AuditLog"

// Message is the message of every call's record (PhaseCompleted).
const Message = "Tool call"

// MessageStarted is the message of a decision record (PhaseStarted).
const MessageStarted = "Tool call started"

// Phase says which of a call's records a Record is.
type Phase uint8

// Phases of a record.
const (
	// PhaseCompleted is the call's one record, written once it is over.
	PhaseCompleted Phase = iota
	// PhaseStarted is an allowed call's decision record, written before its tool runs.
	PhaseStarted
)

// message is the record message of phase p.
func (p Phase) message() string {
	if p == PhaseStarted {
		return MessageStarted
	}
	return Message
}

// Record is one call's audit record. It holds no argument or result contents.
type Record struct {
	// Phase is PhaseCompleted for the call's record and PhaseStarted for the
	// decision record written before its tool runs.
	Phase Phase
	// CallID is unique per call within the process; a call's decision record
	// and its record carry the same one.
	CallID string
	// Time is when the record was made.
	Time time.Time
	// Tool is the tool name as the caller sent it.
	Tool string
	// SessionID, ChannelID, SenderID and CorrelationID identify the call.
	SessionID     string
	ChannelID     string
	SenderID      string
	CorrelationID string
	// SenderUID and SenderGroups are the verified caller's uid and groups,
	// when the authenticator knows them.
	SenderUID    string
	SenderGroups []string
	// Streaming is true when the agent's turn was streamed.
	Streaming bool
	// Outcome is allowed, denied, succeeded, failed, timed_out, cancelled or unknown_tool.
	Outcome hooks.Status
	// Denial is the deciding denial (hook, policy, rule, reason) when Outcome is denied.
	Denial *hooks.Decision
	// Warnings are the would-be denials of hooks in warn (dry-run) mode.
	Warnings []hooks.Decision
	// Ask is the decision of the hook that asked a person to approve the call.
	Ask *hooks.Decision
	// Approval is the request for approval and its outcome: its name, and
	// who approved or denied the call and why.
	Approval *hooks.Approval
	// Withheld is the decision of the result filter that withheld the
	// tool's result (outcome withheld).
	Withheld *hooks.Decision
	// Filtering is what the result filters found in the tool's result: the
	// rules that matched, how often and how many bytes; never the values.
	Filtering []hooks.ResultFiltering
	// Duration is how long the tool ran (zero when it did not run).
	Duration time.Duration
	// ArgumentLength is the length in bytes of the arguments text.
	ArgumentLength int
	// ResultLength is the length in bytes of the text returned to the caller.
	ResultLength int
	// TraceID is the W3C trace id (32 hex digits) of the call's span
	// context, empty when the call was neither traced nor sent with a
	// traceparent; sinks write it as traceId only when it is set.
	TraceID string
	// Arguments are the call's masked canonical arguments, in the call's
	// record (PhaseCompleted) when the decision log is on; nil otherwise.
	Arguments *Arguments
}

// Arguments is what the decision log keeps of one call's arguments.
type Arguments struct {
	// JSON is the canonical text of the masked arguments (one object); empty
	// when Omitted says why they were left out.
	JSON string
	// Masked are the JSON Pointers of the values masked or shortened, sorted.
	Masked []string
	// Omitted says why the arguments were left out ("" when they were not).
	Omitted string
}

// Sink receives audit records. It must be safe for concurrent use.
type Sink interface {
	Emit(ctx context.Context, r Record) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, r Record) error

// Emit calls f.
func (f SinkFunc) Emit(ctx context.Context, r Record) error { return f(ctx, r) }

// Memory is a Sink keeping every record in memory, for tests and for
// programs embedding the executor that inspect their own calls. The zero
// Memory is ready; it is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	recs    []Record
	started []Record
}

// Emit appends r.
func (m *Memory) Emit(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Phase == PhaseStarted {
		m.started = append(m.started, r)
	} else {
		m.recs = append(m.recs, r)
	}
	return nil
}

// Records returns a copy of the calls' records (PhaseCompleted, one per
// call) so far, oldest first.
func (m *Memory) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.recs...)
}

// Started returns a copy of the decision records (PhaseStarted, one per
// allowed call, written before its tool ran) so far, oldest first.
func (m *Memory) Started() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.started...)
}

// SlogSink writes each record as one log/slog record at level Info with
// message Message (MessageStarted for a decision record) and lowerCamel keys
// (JSONSink writes the same JSON without log/slog): callId, tool, sessionId, channelId, senderId,
// correlationId, traceId (when set), streaming, outcome, denial, warnings, durationMs,
// argumentLength, resultLength. The record's time is the slog time.
type SlogSink struct {
	h slog.Handler
}

// NewSlogSink returns a sink writing to handler h.
func NewSlogSink(h slog.Handler) *SlogSink { return &SlogSink{h: h} }

// Emit writes r, returning the handler's error.
func (s *SlogSink) Emit(ctx context.Context, r Record) error {
	if !s.h.Enabled(ctx, slog.LevelInfo) {
		return nil
	}
	rec := slog.NewRecord(r.Time, slog.LevelInfo, r.Phase.message(), 0)
	rec.AddAttrs(
		slog.String("callId", r.CallID),
		slog.String("tool", r.Tool),
		slog.String("sessionId", r.SessionID),
		slog.String("channelId", r.ChannelID),
		slog.String("senderId", r.SenderID),
		slog.String("correlationId", r.CorrelationID),
	)
	if r.TraceID != "" {
		rec.AddAttrs(slog.String("traceId", r.TraceID))
	}
	if r.SenderUID != "" {
		rec.AddAttrs(slog.String("senderUid", r.SenderUID))
	}
	if len(r.SenderGroups) > 0 {
		rec.AddAttrs(slog.Any("senderGroups", r.SenderGroups))
	}
	rec.AddAttrs(
		slog.Bool("streaming", r.Streaming),
		slog.String("outcome", string(r.Outcome)),
	)
	if r.Denial != nil {
		rec.AddAttrs(slog.Any("denial", r.Denial))
	}
	if len(r.Warnings) > 0 {
		rec.AddAttrs(slog.Any("warnings", r.Warnings))
	}
	if r.Ask != nil {
		rec.AddAttrs(slog.Any("ask", r.Ask))
	}
	if r.Approval != nil {
		rec.AddAttrs(slog.Any("approval", r.Approval))
	}
	if r.Withheld != nil {
		rec.AddAttrs(slog.Any("withheld", r.Withheld))
	}
	if len(r.Filtering) > 0 {
		rec.AddAttrs(slog.Any("filtering", r.Filtering))
	}
	rec.AddAttrs(
		slog.Float64("durationMs", float64(r.Duration)/float64(time.Millisecond)),
		slog.Int("argumentLength", r.ArgumentLength),
		slog.Int("resultLength", r.ResultLength),
	)
	if x := r.Arguments; x != nil {
		if x.JSON != "" {
			rec.AddAttrs(slog.Any("arguments", json.RawMessage(x.JSON)))
		}
		if len(x.Masked) > 0 {
			rec.AddAttrs(slog.Any("maskedArguments", x.Masked))
		}
		if x.Omitted != "" {
			rec.AddAttrs(slog.String("argumentsOmitted", x.Omitted))
		}
	}
	if err := s.h.Handle(ctx, rec); err != nil {
		return fmt.Errorf("writing audit record: %w", err)
	}
	return nil
}

// AuditLog is the audit hook. Its Before always allows and costs nothing;
// its BeforeTool writes an allowed call's decision record before the tool
// runs (its error denies the call); its After emits the call's one record.
// Put it first in the hook list so every call, including unknown tools and
// denials, reaches it.
type AuditLog struct { //nolint:revive // named after the hook "AuditLog" (its Name())
	sink Sink
	now  func() time.Time
	args func(context.Context, *hooks.Call) *Arguments // the decision log; nil when off
	mask func(context.Context, string) string          // masks reasons; nil when off
	// ids holds the CallID of each call between BeforeTool and After.
	ids sync.Map // *hooks.Call -> string
}

var (
	_ hooks.FallibleAfterHook = (*AuditLog)(nil)
	_ hooks.ToolGate          = (*AuditLog)(nil)
)

// Option configures an AuditLog.
type Option func(*AuditLog)

// WithReasonMask passes the reason of every decision a record holds
// (denial, warnings, ask, withheld) through mask, which replaces the
// secrets a reason may quote from the arguments (a denied command line).
// nil masks nothing.
func WithReasonMask(mask func(context.Context, string) string) Option {
	return func(a *AuditLog) { a.mask = mask }
}

// WithDecisionLog adds to each call's record (PhaseCompleted) the
// arguments args returns for it: the decision log. Nil leaves them out.
func WithDecisionLog(args func(context.Context, *hooks.Call) *Arguments) Option {
	return func(a *AuditLog) { a.args = args }
}

// WithClock sets the clock stamping records (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(a *AuditLog) { a.now = now }
}

// New returns an AuditLog emitting to sink; nil means NewJSONSink(os.Stdout).
func New(sink Sink, opts ...Option) *AuditLog {
	if sink == nil {
		sink = NewJSONSink(os.Stdout)
	}
	a := &AuditLog{sink: sink, now: time.Now}
	for _, opt := range opts {
		opt(a)
	}
	return a
}

// Name returns "AuditLog".
func (a *AuditLog) Name() string { return Name }

// Before allows every call; the records are written by BeforeTool and After.
func (a *AuditLog) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}

// BeforeTool writes the decision record of a call the hooks allowed, before
// its tool runs, and returns the sink's error, which denies the call.
func (a *AuditLog) BeforeTool(ctx context.Context, call *hooks.Call, res *hooks.Result) error {
	id := newCallID()
	r := a.record(ctx, call, res)
	r.Phase, r.CallID, r.Outcome = PhaseStarted, id, hooks.StatusAllowed
	r.TraceID = traceID(ctx)
	if err := a.sink.Emit(ctx, r); err != nil {
		return fmt.Errorf("writing the decision record: %w", err)
	}
	a.ids.Store(call, id)
	return nil
}

// After emits the call's record, logging a sink error to slog.Default(). The
// executor calls TryAfter instead and logs with its own logger.
func (a *AuditLog) After(ctx context.Context, call *hooks.Call, res *hooks.Result) {
	if err := a.TryAfter(ctx, call, res); err != nil {
		slog.Default().ErrorContext(ctx, "Audit record lost", "tool", call.Tool,
			"correlationId", call.CorrelationID, "error", err)
	}
}

// TryAfter emits the call's record and returns the sink's error.
func (a *AuditLog) TryAfter(ctx context.Context, call *hooks.Call, res *hooks.Result) error {
	r := a.record(ctx, call, res)
	r.TraceID = traceID(ctx)
	if a.args != nil {
		r.Arguments = a.args(ctx, call)
	}
	if id, ok := a.ids.LoadAndDelete(call); ok {
		r.CallID = id.(string)
	} else {
		r.CallID = newCallID()
	}
	if err := a.sink.Emit(ctx, r); err != nil {
		return fmt.Errorf("emitting audit record: %w", err)
	}
	return nil
}

// traceID is the trace id of the span context of ctx, or "" without one.
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// callPrefix makes CallIDs unique across processes; callSeq within one.
var (
	callPrefix = func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + "-"
	}()
	callSeq atomic.Uint64
)

// newCallID returns a CallID unique within the process and, with high
// probability, across processes.
func newCallID() string {
	return callPrefix + strconv.FormatUint(callSeq.Add(1), 10)
}

// record builds the record of a completed call.
func (a *AuditLog) record(ctx context.Context, call *hooks.Call, res *hooks.Result) Record {
	r := Record{
		Time:           a.now(),
		Tool:           call.Tool,
		SessionID:      call.SessionID,
		ChannelID:      call.ChannelID,
		SenderID:       call.SenderID,
		CorrelationID:  call.CorrelationID,
		Streaming:      call.Streaming,
		Outcome:        res.Status,
		Warnings:       slices.Clone(res.Warnings),
		Duration:       res.Duration,
		ArgumentLength: len(call.ArgsJSON),
		ResultLength:   len(res.Output),
	}
	if call.Caller != nil {
		r.SenderUID, r.SenderGroups = call.Caller.UID, slices.Clone(call.Caller.Groups)
	}
	if res.Denial != nil {
		d := *res.Denial
		r.Denial = &d
	}
	if res.Ask != nil {
		d := *res.Ask
		r.Ask = &d
	}
	if res.Approval != nil {
		a := *res.Approval
		r.Approval = &a
	}
	if res.Withheld != nil {
		d := *res.Withheld
		r.Withheld = &d
	}
	for _, f := range res.Filtering {
		f.Findings = slices.Clone(f.Findings)
		r.Filtering = append(r.Filtering, f)
	}
	if a.mask != nil {
		for _, d := range []*hooks.Decision{r.Denial, r.Ask, r.Withheld} {
			if d != nil {
				d.Reason = a.mask(ctx, d.Reason)
			}
		}
		for i := range r.Warnings {
			r.Warnings[i].Reason = a.mask(ctx, r.Warnings[i].Reason)
		}
	}
	return r
}
