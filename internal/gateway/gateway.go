// Package gateway is the toolhooks gateway's HTTP server: it executes agents'
// tool calls through the hook chain (POST /v1/tool-calls), answers decisions
// for runtimes that run tools themselves (POST /v1/decisions), accepts the
// controller's configuration pushes (PUT /v1/config) and serves health,
// readiness and Prometheus metrics.
//
// Until its first configuration arrives the gateway denies every call (hook
// "gateway", rule NoPolicy) and is not ready. A configuration is swapped in
// atomically: calls in flight finish on the executor they started with.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// GatewayHookName is the hook name of denials the gateway itself makes.
const GatewayHookName = "gateway"

// RuleNoPolicy is the rule of the denial of every call made before the first
// configuration arrives.
const RuleNoPolicy = "NoPolicy"

// NoPolicyReason is the reason of a RuleNoPolicy denial.
const NoPolicyReason = "no policy configuration has been received yet"

// DefaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

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
	// ToolTimeout bounds each tool run (0 means hooks.DefaultToolTimeout;
	// negative means none).
	ToolTimeout time.Duration
	// Audit receives one AuditLog record per call; nil writes JSON lines to stdout.
	Audit audit.Sink
	// Authenticator authenticates configuration pushes; nil refuses every push.
	Authenticator Authenticator
	// DenialSink is told of every denial and warn-mode would-deny, off the
	// request path; nil tells no one.
	DenialSink DenialSink
	// DenialQueueSize bounds the denials waiting for DenialSink (default
	// DefaultDenialQueueSize); when full, further denials are dropped and counted.
	DenialQueueSize int
	// Plugins builds PluginHook runtimes; nil makes every plugin fail, so its
	// failure policy applies.
	Plugins gatewayconfig.PluginFactory
	// OnApplied, when set, is called with each configuration that comes into
	// force (after the swap), for example to stop plugins it no longer holds.
	OnApplied func(cfg *gatewayconfig.Config)
	// Registry receives the gateway's metrics; nil means a new registry with
	// the Go and process collectors. The global registry is never used.
	Registry *prometheus.Registry
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Logger logs the gateway's own events; nil means slog.Default().
	Logger *slog.Logger
}

// Server is the gateway. It is safe for concurrent use; create it with New
// and release it with Close.
type Server struct {
	opts      Options
	log       *slog.Logger
	tools     []hooks.Tool
	toolNames []string
	state     *gatewayconfig.State
	metrics   *metrics
	denials   *denialQueue
	handler   http.Handler

	applyMu sync.Mutex // serialises Apply
	cur     atomic.Pointer[active]
}

// active is the configuration in force and the executor built from it.
type active struct {
	exec *hooks.Executor
	// cfg is nil before the first configuration.
	cfg       *gatewayconfig.Config
	appliedAt time.Time
}

// New returns a Server that denies every call until a configuration is
// applied (by a push, Apply or RunStandalone).
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
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
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
	s := &Server{opts: opts, log: opts.Logger, tools: opts.Tools, state: gatewayconfig.NewState()}
	if s.tools == nil {
		builtins, err := tools.Builtins(opts.Workspace, tools.Options{})
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
	initial, err := hooks.NewExecutor([]hooks.Entry{
		{Hook: audit.New(opts.Audit)},
		{Hook: noPolicy{}},
	}, nil, hooks.WithLogger(opts.Logger))
	if err != nil {
		return nil, fmt.Errorf("gateway: initial executor: %w", err)
	}
	s.cur.Store(&active{exec: initial})
	s.denials = newDenialQueue(opts.DenialSink, opts.DenialQueueSize, opts.Logger, m)
	s.handler = s.routes()
	return s, nil
}

// Handler is the gateway's HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops delivering denials to the DenialSink, waiting for the one in
// progress. It does not stop an http.Server serving Handler.
func (s *Server) Close() { s.denials.close() }

// Ready reports whether a configuration is in force.
func (s *Server) Ready() bool { return s.cur.Load().cfg != nil }

// ConfigStatus describes the configuration in force.
type ConfigStatus struct {
	// Revision is the configuration's content hash; empty before the first one.
	Revision string `json:"revision"`
	// IssuedAt is when its pusher issued it (Unix nanoseconds).
	IssuedAt int64 `json:"issuedAt"`
	// Hooks is the length of its hook list.
	Hooks int `json:"hooks"`
}

// Status returns the configuration in force.
func (s *Server) Status() ConfigStatus {
	a := s.cur.Load()
	if a.cfg == nil {
		return ConfigStatus{}
	}
	return ConfigStatus{Revision: a.cfg.Revision, IssuedAt: a.cfg.IssuedAt, Hooks: len(a.cfg.Hooks)}
}

// noPolicy denies every call: it stands in for the hook list until the
// first configuration arrives.
type noPolicy struct{}

func (noPolicy) Name() string { return GatewayHookName }

func (noPolicy) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Deny(RuleNoPolicy, NoPolicyReason), nil
}

func (noPolicy) After(context.Context, *hooks.Call, *hooks.Result) {}
