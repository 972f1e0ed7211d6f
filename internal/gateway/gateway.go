// Package gateway is the toolhooks gateway's HTTP server: it executes agents'
// tool calls through the hook chain (POST /v1/tool-calls), answers decisions
// for runtimes that run tools themselves (POST /v1/decisions), accepts the
// controller's configuration pushes (PUT /v1/config) and serves health,
// readiness and Prometheus metrics.
//
// Until its first configuration arrives the gateway denies every call (hook
// "gateway", rule NoPolicy) and is not ready. A configuration that holds no
// policy (only the AuditLog hook: no policy selects this gateway) is the same
// state: every call is denied with NoPolicy and the gateway is not ready, so
// that an allow-all gateway is only ever the result of a policy that says so,
// never of an absence. A configuration is swapped in atomically: calls in
// flight finish on the executor they started with.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/plugins"
	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/tools"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// GatewayHookName is the hook name of denials the gateway itself makes.
const GatewayHookName = "gateway"

// RuleNoPolicy is the rule of the denial of every call made before the first
// configuration arrives.
const RuleNoPolicy = "NoPolicy"

// NoPolicyReason is the reason of a RuleNoPolicy denial before the first
// configuration.
const NoPolicyReason = "no policy configuration has been received yet"

// NoPolicySelectedReason is the reason of a RuleNoPolicy denial under a
// configuration that holds no policy.
const NoPolicySelectedReason = "no policy that decides on calls selects this gateway (the configuration in force holds only " +
	"the AuditLog hook and result policies); " +
	"every call is denied until one does: an allow-all gateway needs a policy that allows all"

// DefaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes and
// Options.MaxFileBytes are zero: BodyBytesFor(tools.DefaultMaxFileBytes).
const DefaultMaxBodyBytes = 2*tools.DefaultMaxFileBytes + bodyEnvelopeBytes

// bodyEnvelopeBytes is the room a request body has beyond the JSON text of
// a file's content: the call's other fields and arguments.
const bodyEnvelopeBytes = 64 << 10

// ToolOptions are the built-in tools' options for a file size limit (0:
// tools.DefaultMaxFileBytes) and a sandbox.
func ToolOptions(maxFileBytes int64, sb *sandbox.Sandbox) tools.Options {
	if maxFileBytes <= 0 {
		maxFileBytes = tools.DefaultMaxFileBytes
	}
	return tools.Options{MaxReadBytes: maxFileBytes, MaxWriteBytes: int(maxFileBytes), Sandbox: sb}
}

// BodyBytesFor is the request body limit that lets a call carry a file of
// maxFileBytes bytes: twice as many, for JSON escaping (typical text escapes
// to well under twice its size; content that needs more, mostly control
// characters, is refused with 413), plus 64 KiB for the rest of the call.
func BodyBytesFor(maxFileBytes int64) int64 { return 2*maxFileBytes + bodyEnvelopeBytes }

// DefaultDenialQueueSize is how many denials may wait for the DenialSink.
const DefaultDenialQueueSize = 1024

// Options configure a Server. Workspace is required.
type Options struct {
	// Workspace is the absolute path of the directory the built-in tools work
	// in and against which contracts' relative paths resolve.
	Workspace string
	// Tools are the tools the gateway runs; nil means the built-in tools
	// (internal/tools) in Workspace with their default limits.
	Tools []hooks.Tool
	// Budgets configures the policies' per-session call budgets: the idle
	// TTL, the table's size and each caller's share of it.
	Budgets contract.BudgetConfig
	// StateStore, when set, holds the contracts' counters (session budgets,
	// per-caller windows, rate limits) instead of this process, so that
	// every gateway sharing it counts exactly; Budgets then only sizes the
	// in-process table of sessions awaiting settlement. While Ready fails
	// the gateway is not ready (GET /readyz says why).
	StateStore StateStore
	// ToolTimeout bounds each tool run (0 means hooks.DefaultToolTimeout;
	// negative means none).
	ToolTimeout time.Duration
	// Audit receives the AuditLog records (see package audit: an allowed
	// call's decision record before its tool runs, then the call's record);
	// nil writes JSON lines to stdout. A failing write denies the call it
	// records (or, after the tool ran, is logged), counts
	// toolhooks_audit_write_errors_total and makes the gateway not ready for
	// AuditFailureHold, or while the sink's Healthy method (if any) fails.
	Audit audit.Sink
	// DecisionLog, when set, adds each call's masked canonical arguments to
	// its audit record (the decision log, which the replay command reads);
	// nil keeps arguments out of the records. A policy that requires the
	// decision log cannot be enforced without it.
	DecisionLog func(context.Context, *hooks.Call) *audit.Arguments
	// MaskReason, when set, replaces the secrets a decision's reason quotes
	// from the arguments (a denied command line's --password=...) in audit
	// records and in what the DenialSink is told; the caller's answer keeps
	// the reason as it is.
	MaskReason func(context.Context, string) string
	// Authenticator authenticates configuration pushes; nil refuses every push.
	Authenticator Authenticator
	// Callers authenticates the callers of POST /v1/tool-calls and POST
	// /v1/decisions; the verified identity becomes the call's sender
	// (Call.SenderID and Call.Caller). nil refuses every call (401).
	Callers *authn.Request
	// DenialSink is told of every denial and warn-mode would-deny, off the
	// request path; nil tells no one.
	DenialSink DenialSink
	// Approver records requests for approval of the calls a hook asks a
	// person about and their decisions; nil denies such calls (rule
	// approvalUnavailable). Every executor the gateway builds uses it.
	Approver hooks.Approver
	// DenialQueueSize bounds the denials waiting for DenialSink (default
	// DefaultDenialQueueSize); when full, further denials are dropped and counted.
	DenialQueueSize int
	// Plugins builds PluginHook runtimes; nil makes every plugin fail, so its
	// failure policy applies.
	Plugins plugins.Factory
	// Degraded, when set, returns the plugin hooks whose circuit breaker is
	// open, reported by GET /v1/config.
	Degraded func() []string
	// OnApplied, when set, is called with each configuration that comes into
	// force (after the swap), for example to stop plugins it no longer holds.
	OnApplied func(cfg *gatewayconfig.Config)
	// Registry receives the gateway's metrics; nil means a new registry with
	// the Go and process collectors. The global registry is never used.
	Registry *prometheus.Registry
	// MaxFileBytes is the largest file the built-in tools read or write
	// (tools.Options.MaxReadBytes and MaxWriteBytes; 0:
	// tools.DefaultMaxFileBytes) when Tools is nil; callers that build the
	// tools pass it to tools.Options themselves (ToolOptions).
	MaxFileBytes int64
	// MaxBodyBytes bounds request bodies, of POST /v1/tool-calls and of the
	// MCP endpoint (0: BodyBytesFor(MaxFileBytes)).
	MaxBodyBytes int64
	// Logger logs the gateway's own events; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of the gateway's decisions; nil means
	// the global provider as it is when a configuration is applied, which
	// traces nothing unless one was installed (see package tracing/otlp).
	TracerProvider trace.TracerProvider
	// ToolTraits declare the path arguments and read-only tools among Tools
	// beyond the built-ins (upstream MCP tools); every AutonomyPolicy adds them.
	ToolTraits hooks.ToolTraits
	// Sandbox confines the processes the built-in tools start; nil means
	// Landlock with the default directories. Where it is unusable the
	// built-in tools refuse every call (decisions still work); /readyz, the
	// toolhooks_sandbox_info metric and the log report its state.
	Sandbox *sandbox.Sandbox
}

// Server is the gateway. It is safe for concurrent use; create it with New
// and release it with Close.
type Server struct {
	opts      Options
	log       *slog.Logger
	tools     []hooks.Tool
	toolNames []string
	state     *contract.State
	metrics   *metrics
	denials   *denialQueue
	handler   http.Handler
	audit     *auditHealth // wraps Options.Audit

	applyMu sync.Mutex // serialises Apply
	cur     atomic.Pointer[active]

	watchMu  sync.Mutex
	watchers []func()
}

// active is the configuration in force and the executor built from it.
type active struct {
	exec *hooks.Executor
	// entries are what exec was built from (nil in the no-policy states).
	entries []hooks.Entry
	// cfg is nil before the first configuration and after DenyEverything.
	cfg       *gatewayconfig.Config
	appliedAt time.Time
	// noPolicy, when not empty, says why exec is the no-policy chain that
	// denies every call (RuleNoPolicy) and the gateway is not ready.
	noPolicy string
}

// New returns a Server that denies every call until a configuration is
// applied (by a push or Apply).
func New(opts Options) (*Server, error) {
	if opts.Workspace == "" {
		return nil, errors.New("gateway: a workspace is required")
	}
	if opts.Audit == nil {
		opts.Audit = audit.NewJSONSink(os.Stdout)
	}
	if opts.ToolTimeout == 0 {
		opts.ToolTimeout = hooks.DefaultToolTimeout
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = tools.DefaultMaxFileBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = BodyBytesFor(opts.MaxFileBytes)
	}
	if opts.DenialQueueSize <= 0 {
		opts.DenialQueueSize = DefaultDenialQueueSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = NewRegistry()
	}
	s := &Server{opts: opts, log: opts.Logger, tools: opts.Tools}
	if opts.StateStore != nil {
		s.state = contract.NewSharedState(opts.StateStore, opts.Budgets)
	} else {
		s.state = contract.NewState(opts.Budgets)
	}
	if s.opts.Sandbox == nil {
		var err error
		if s.opts.Sandbox, err = sandbox.New(sandbox.Config{}); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	if s.tools == nil {
		builtins, err := tools.Builtins(opts.Workspace, ToolOptions(opts.MaxFileBytes, s.opts.Sandbox))
		if err != nil {
			return nil, fmt.Errorf("gateway: built-in tools: %w", err)
		}
		s.tools = builtins
	}
	for _, t := range s.tools {
		if t == nil {
			return nil, errors.New("gateway: a tool is nil")
		}
		s.toolNames = append(s.toolNames, t.Name())
	}
	m, err := newMetrics(opts.Registry, s.toolNames)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	s.metrics = m
	if err := s.reportSandbox(opts.Registry, s.opts.Sandbox); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	s.audit = &auditHealth{sink: opts.Audit, errs: m.auditErrors}
	s.opts.Audit = s.audit
	initial, err := s.noPolicyExecutor(NoPolicyReason)
	if err != nil {
		return nil, fmt.Errorf("gateway: initial executor: %w", err)
	}
	s.cur.Store(&active{exec: initial, noPolicy: NoPolicyReason})
	s.denials = newDenialQueue(opts.DenialSink, opts.DenialQueueSize, opts.MaskReason, opts.Logger, m)
	s.handler = s.routes()
	return s, nil
}

// Handler is the gateway's HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops delivering denials to the DenialSink, waiting for the one in
// progress. It does not stop an http.Server serving Handler.
func (s *Server) Close() { s.denials.close() }

// Ready reports whether a configuration holding at least one policy is in
// force, the audit sink is writing and the state store (if any) answers.
func (s *Server) Ready() bool { return s.NotReadyReason() == "" }

// NotReadyReason says why the gateway is not ready, or is empty when it is.
func (s *Server) NotReadyReason() string {
	if r := s.cur.Load().noPolicy; r != "" {
		return r
	}
	if r := s.audit.notReady(); r != "" {
		return r
	}
	return s.stateStoreNotReady()
}

// StateStore is a shared contract.Store that reports its health.
type StateStore interface {
	contract.Store
	// Ready returns nil while the store answers, else why it does not.
	Ready() error
}

// stateStoreNotReady says why the state store cannot count calls, or is
// empty when it can or there is none.
func (s *Server) stateStoreNotReady() string {
	if s.opts.StateStore == nil {
		return ""
	}
	if err := s.opts.StateStore.Ready(); err != nil {
		return fmt.Sprintf("state store %s: %v", s.opts.StateStore.Name(), err)
	}
	return ""
}

// stateStoreStatus describes the state store for GET /readyz.
func (s *Server) stateStoreStatus() string {
	if s.opts.StateStore == nil {
		return "in-process (exact within this gateway only)"
	}
	if err := s.opts.StateStore.Ready(); err != nil {
		return s.opts.StateStore.Name() + ": unavailable: " + err.Error()
	}
	return s.opts.StateStore.Name() + ": ready"
}

// Status returns the configuration in force.
func (s *Server) Status() wire.ConfigStatus {
	a := s.cur.Load()
	if a.cfg == nil {
		return wire.ConfigStatus{}
	}
	st := wire.ConfigStatus{Revision: a.cfg.Revision, IssuedAt: a.cfg.IssuedAt, Hooks: len(a.cfg.Hooks)}
	if s.opts.Degraded != nil {
		st.Degraded = s.opts.Degraded()
	}
	return st
}

// noPolicy denies every call: it stands in for the hook list until the
// first configuration holding a policy arrives.
type noPolicy struct{ reason string }

func (noPolicy) Name() string { return GatewayHookName }

func (n noPolicy) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Deny(RuleNoPolicy, n.reason), nil
}

func (noPolicy) After(context.Context, *hooks.Call, *hooks.Result) {}

// noPolicyExecutor is the chain that audits and denies every call with
// RuleNoPolicy and reason.
func (s *Server) noPolicyExecutor(reason string) (*hooks.Executor, error) {
	return hooks.NewExecutor([]hooks.Entry{
		{Hook: audit.New(s.opts.Audit, audit.WithDecisionLog(s.opts.DecisionLog), audit.WithReasonMask(s.opts.MaskReason))},
		{Hook: noPolicy{reason: reason}},
	}, nil, hooks.WithLogger(s.log), s.tracerOption())
}

// tracerOption passes the configured TracerProvider to an executor; without
// one the executor uses the global provider.
func (s *Server) tracerOption() hooks.Option {
	if s.opts.TracerProvider == nil {
		return func(*hooks.Executor) {}
	}
	return hooks.WithTracerProvider(s.opts.TracerProvider)
}

// DenyEverything puts the no-policy chain in force with reason, dropping
// the configuration in force: every call is denied (RuleNoPolicy) and the
// gateway is not ready, naming reason, until a configuration is applied. A
// configuration source whose input says nothing usable (standalone mode's
// policy files emptied or unreadable) uses it, so that an absence is never
// read as "allow".
func (s *Server) DenyEverything(ctx context.Context, reason string) error {
	exec, err := s.noPolicyExecutor(reason)
	if err != nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if cur := s.cur.Load(); cur.cfg == nil && cur.noPolicy == reason {
		return nil
	}
	s.cur.Store(&active{exec: exec, appliedAt: time.Now(), noPolicy: reason})
	s.metrics.setConfig(&gatewayconfig.Config{}, nil)
	s.notifyWatchers()
	s.log.ErrorContext(ctx, "Denying every call: no policy in force", "reason", reason)
	return nil
}

// WatchConfig registers f to be called after every change of the
// configuration in force (an Apply that changed it, DenyEverything), for
// example to tell MCP clients that their tool lists may have changed. f is
// called with the configuration already in force, while the next change
// waits, so it must return quickly.
func (s *Server) WatchConfig(f func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watchers = append(s.watchers, f)
}

// notifyWatchers calls the WatchConfig functions.
func (s *Server) notifyWatchers() {
	s.watchMu.Lock()
	ws := slices.Clone(s.watchers)
	s.watchMu.Unlock()
	for _, f := range ws {
		f()
	}
}

// CountRejection counts a configuration that was refused, in
// toolhooks_config_push_rejections_total. reason is one of the Reject*
// constants; any other value is counted as RejectInvalid, so the label stays
// bounded.
func (s *Server) CountRejection(reason string) {
	if !slices.Contains(rejectReasons, reason) {
		reason = RejectInvalid
	}
	s.metrics.rejections.WithLabelValues(reason).Inc()
}
