package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// OtherLabel is the label value of every tool or hook name that is not known
// to the gateway, or that came after MaxLabelValues distinct names.
const OtherLabel = "other"

// MaxLabelValues bounds how many distinct tool and hook names each appear as
// label values over the gateway's lifetime.
const MaxLabelValues = 256

// Push rejection reasons (the reason label of toolhooks_config_push_rejections_total).
const (
	RejectUnauthenticated = "unauthenticated"
	RejectForbidden       = "forbidden"
	RejectMalformed       = "malformed"
	RejectTooLarge        = "too_large"
	RejectInvalid         = "invalid"
	RejectStale           = "stale"
	RejectPolicyFiles     = "policy_files" // standalone mode: the policy files do not load or compile
)

// rejectReasons are every value of the reason label.
var rejectReasons = []string{RejectUnauthenticated, RejectForbidden, RejectMalformed, RejectTooLarge,
	RejectInvalid, RejectStale, RejectPolicyFiles}

// Metric label names.
const (
	labelTool = "tool"
	labelHook = "hook"
	// labelCaller is how the caller was verified (hooks.KindOf: serviceaccount,
	// user, oidc, static, anonymous, none, unknown), never who it is.
	labelCaller = "caller_kind"
)

// NewRegistry returns a registry with the Go and process collectors, for
// Options.Registry.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metrics are the gateway's Prometheus metrics. Tool and hook labels are
// bounded: see boundedLabel.
type metrics struct {
	calls          *prometheus.CounterVec
	denials        *prometheus.CounterVec
	warnings       *prometheus.CounterVec
	decision       *prometheus.HistogramVec
	toolDuration   *prometheus.HistogramVec
	revision       *prometheus.GaugeVec
	issuedAt       prometheus.Gauge
	hooks          prometheus.Gauge
	rejections     *prometheus.CounterVec
	droppedDenials prometheus.Counter
	auditErrors    prometheus.Counter
	// unauthenticated counts calls refused for want of a verified caller.
	unauthenticated prometheus.Counter
	// resultFindings counts what result policies' rules found.
	resultFindings *prometheus.CounterVec

	// decisionByAPI are the decision histogram's series of the APIs,
	// looked up once (the histogram is never reset).
	decisionByAPI map[string]prometheus.Observer

	tools     *boundedLabel
	hookNames *boundedLabel
	builtins  []string

	mu          sync.Mutex
	revisionSet string
}

func newMetrics(reg prometheus.Registerer, toolNames []string) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_tool_calls_total",
			Help: "Tool calls and decisions by tool, outcome (allowed, denied, succeeded, failed, timed_out, cancelled, " +
				"withheld, unknown_tool) and caller kind (serviceaccount, user, oidc, static, anonymous, none, unknown). " +
				"Tools unknown to the gateway count as \"other\".",
		}, []string{labelTool, "outcome", labelCaller}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_denials_total",
			Help: "Denied calls by tool, deciding hook and caller kind.",
		}, []string{labelTool, labelHook, labelCaller}),
		warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_warnings_total",
			Help: "Would-be denials of hooks in warn (dry-run) mode, by tool and hook.",
		}, []string{labelTool, labelHook}),
		decision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolhooks_decision_duration_seconds",
			Help: "Time spent in the hook chain per call (before and after phases, excluding the tool), " +
				"by API (tool-calls, decisions, results or mcp).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5},
		}, []string{"api"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolhooks_tool_duration_seconds",
			Help:    "Time tools ran, by tool.",
			Buckets: prometheus.ExponentialBuckets(.001, 4, 10),
		}, []string{labelTool}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolhooks_config_revision_info",
			Help: "1 for the revision of the configuration in force (no series before the first configuration).",
		}, []string{"revision"}),
		issuedAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolhooks_config_issued_at_seconds",
			Help: "When the configuration in force was issued, in Unix seconds (0 before the first configuration).",
		}),
		hooks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolhooks_config_hooks",
			Help: "Length of the hook list in force.",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_config_push_rejections_total",
			Help: "Configuration pushes (and standalone reloads) rejected, by reason.",
		}, []string{"reason"}),
		droppedDenials: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolhooks_denial_events_dropped_total",
			Help: "Denials not handed to the denial sink because its queue was full.",
		}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolhooks_audit_write_errors_total",
			Help: "Audit records that could not be written (an allowed call's decision record failing denies the call).",
		}),
		unauthenticated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolhooks_caller_authentication_failures_total",
			Help: "Calls to POST /v1/tool-calls and /v1/decisions refused because the caller was not authenticated.",
		}),
		resultFindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_result_findings_total",
			Help: "Matches of result policies' rules in tool results, by hook (the policy), rule and action " +
				"(Redact, Withhold, or Warn for a rule that only records or a policy in warn mode).",
		}, []string{labelHook, "rule", "action"}),
		tools:     newBoundedLabel(MaxLabelValues),
		hookNames: newBoundedLabel(MaxLabelValues),
		builtins:  toolNames,
	}
	for _, c := range []prometheus.Collector{m.calls, m.denials, m.warnings, m.decision, m.toolDuration, m.revision,
		m.issuedAt, m.hooks, m.rejections, m.droppedDenials, m.auditErrors, m.unauthenticated, m.resultFindings} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range rejectReasons {
		m.rejections.WithLabelValues(r)
	}
	m.decisionByAPI = map[string]prometheus.Observer{
		apiToolCalls: m.decision.WithLabelValues(apiToolCalls),
		apiDecisions: m.decision.WithLabelValues(apiDecisions),
		apiResults:   m.decision.WithLabelValues(apiResults),
		apiMCP:       m.decision.WithLabelValues(apiMCP),
	}
	m.tools.setKnown(toolNames)
	m.hookNames.setKnown([]string{GatewayHookName, hooks.ArgumentsHookName, hooks.ContextHookName, hooks.RequestHookName})
	return m, nil
}

// setConfig records cfg, built into entries, as in force and makes its hook
// and tool names known label values.
func (m *metrics) setConfig(cfg *gatewayconfig.Config, entries []hooks.Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revisionSet != cfg.Revision {
		m.revision.Reset()
		m.revision.WithLabelValues(cfg.Revision).Set(1)
		m.revisionSet = cfg.Revision
	}
	m.issuedAt.Set(float64(cfg.IssuedAt) / float64(time.Second))
	m.hooks.Set(float64(len(cfg.Hooks)))
	names := make([]string, 0, 5+len(cfg.Hooks))
	names = append(names, GatewayHookName, hooks.ArgumentsHookName, hooks.ContextHookName, hooks.RequestHookName,
		gatewayconfig.UnboundHookName)
	for _, h := range cfg.Hooks {
		names = append(names, h.Name)
	}
	m.hookNames.setKnown(names)
	m.tools.setKnown(append(append([]string(nil), m.builtins...), configuredTools(entries)...))
}

// observe counts one call.
func (m *metrics) observe(api string, call *hooks.Call, res *hooks.Result, hookTime time.Duration) {
	tool, caller := m.tools.value(call.Tool), string(hooks.KindOf(call.Caller))
	m.calls.WithLabelValues(tool, string(res.Status), caller).Inc()
	if o, ok := m.decisionByAPI[api]; ok {
		o.Observe(hookTime.Seconds())
	} else {
		m.decision.WithLabelValues(api).Observe(hookTime.Seconds())
	}
	if res.Denial != nil {
		m.denials.WithLabelValues(tool, m.hookNames.value(res.Denial.Hook), caller).Inc()
	}
	for _, w := range res.Warnings {
		m.warnings.WithLabelValues(tool, m.hookNames.value(w.Hook)).Inc()
	}
	for _, r := range redactionsOf(res.Filtering) {
		m.resultFindings.WithLabelValues(m.hookNames.value(r.Hook), r.Rule, r.Action).Add(float64(r.Count))
	}
	if res.Status == hooks.StatusSucceeded || res.Status == hooks.StatusFailed || res.Status == hooks.StatusTimedOut ||
		res.Status == hooks.StatusCancelled || res.Status == hooks.StatusWithheld {
		m.toolDuration.WithLabelValues(tool).Observe(res.Duration.Seconds())
	}
}

// configuredTools are the exact tool names (not globs) the built hooks'
// configurations name.
func configuredTools(entries []hooks.Entry) []string {
	var out []string
	for _, e := range entries {
		if n, ok := e.Hook.(hooks.ToolNamer); ok {
			out = append(out, n.ToolNames()...)
		}
	}
	return out
}

// boundedLabel maps names to label values: a name currently known appears as
// itself while fewer than max distinct names have appeared, every other name
// as OtherLabel. So the label's cardinality never exceeds max+1 whatever
// callers send.
type boundedLabel struct {
	mu      sync.RWMutex
	known   map[string]bool
	emitted map[string]bool
	max     int
}

func newBoundedLabel(max int) *boundedLabel {
	return &boundedLabel{known: map[string]bool{}, emitted: map[string]bool{}, max: max}
}

func (b *boundedLabel) setKnown(names []string) {
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	b.mu.Lock()
	b.known = known
	b.mu.Unlock()
}

func (b *boundedLabel) value(name string) string {
	b.mu.RLock()
	known, emitted := b.known[name], b.emitted[name]
	b.mu.RUnlock()
	switch {
	case !known:
		return OtherLabel
	case emitted:
		return name
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.emitted[name] {
		return name
	}
	if len(b.emitted) >= b.max {
		return OtherLabel
	}
	b.emitted[name] = true
	return name
}

// StateStoreMetrics registers the state store's metrics with reg:
// toolhooks_state_store_duration_seconds and _errors_total by operation
// (reserve, release, ping) and toolhooks_state_store_up from ready. It
// returns the observer to hand the store (statestore.Options.Observe).
func StateStoreMetrics(reg prometheus.Registerer, ready func() error) (func(op string, d time.Duration, err error), error) {
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolhooks_state_store_duration_seconds",
		Help:    "Time the shared state store took per operation (reserve, release, ping), failed ones included.",
		Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .1, 1},
	}, []string{"op"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolhooks_state_store_errors_total",
		Help: "State store operations that failed or timed out, by operation; a failed reserve is decided by its policy's stateFailurePolicy.",
	}, []string{"op"})
	up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolhooks_state_store_up",
		Help: "1 while the shared state store answers, else 0.",
	}, func() float64 {
		if ready() != nil {
			return 0
		}
		return 1
	})
	for _, c := range []prometheus.Collector{duration, errs, up} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	ops := []string{"reserve", "release", "ping"}
	byOp := make(map[string]prometheus.Observer, len(ops))
	errByOp := make(map[string]prometheus.Counter, len(ops))
	for _, op := range ops {
		byOp[op], errByOp[op] = duration.WithLabelValues(op), errs.WithLabelValues(op)
	}
	return func(op string, d time.Duration, err error) {
		o, ok := byOp[op]
		if !ok { // not one of the store's operations: counted, never added to the maps read concurrently
			o = duration.WithLabelValues(op)
		}
		o.Observe(d.Seconds())
		if err == nil {
			return
		}
		if c, ok := errByOp[op]; ok {
			c.Inc()
		} else {
			errs.WithLabelValues(op).Inc()
		}
	}, nil
}
