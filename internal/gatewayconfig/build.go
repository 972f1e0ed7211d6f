package gatewayconfig

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
)

// RuleUnenforceable is the rule of the denial a policy gives when the gateway
// cannot build it (for example, its workspace root does not exist there).
const RuleUnenforceable = "policyUnenforceable"

// ErrPluginRuntimeUnavailable is what a PluginHook's before-callback returns
// when there is no plugin runtime (the offline CLI, or a gateway built without
// one); the entry's failure policy decides.
var ErrPluginRuntimeUnavailable = errors.New("no plugin runtime is available here to call the plugin")

// PluginFactory builds the runtime hook of a PluginHook entry.
type PluginFactory func(h Hook) (hooks.Hook, error)

// BuildOptions are the gateway's side of building a configuration.
type BuildOptions struct {
	// Workspace is the gateway's workspace root, against which contracts'
	// relative paths resolve. Empty denies contract calls that need a path check.
	Workspace string
	// Audit receives the AuditLog records; nil writes JSON lines to stdout.
	Audit audit.Sink
	// State keeps per-policy runtime state (budgets) across builds; nil keeps none.
	State *State
	// Plugins builds PluginHook runtimes; nil makes every plugin fail, so its
	// failure policy applies.
	Plugins PluginFactory
	// Traits are what the gateway knows about its own tools (the upstream
	// MCP tools it fronts); every AutonomyPolicy entry adds them to its own
	// pathArgs and readOnlyTools (see AutonomyConfig).
	Traits ToolTraits
}

// ToolTraits describe tools a gateway serves beyond the built-in ones, so that
// the policies check them like built-ins. They can only widen checking
// (more path-bearing arguments) or name tools read-only, which readonly mode
// still refuses for the seed's mutating tools.
type ToolTraits struct {
	// PathArgs are extra path-bearing argument names per tool name.
	PathArgs map[string][]string
	// ReadOnlyTools are tool names known to change nothing.
	ReadOnlyTools []string
}

// AutonomyConfig is the autonomy hook configuration of AutonomyPolicy entry h
// with the gateway's tool traits added to the policy's own pathArgs and
// readOnlyTools.
func AutonomyConfig(h Hook, traits ToolTraits) autonomy.Config {
	c := h.Autonomy.config(h.Name)
	if len(traits.ReadOnlyTools) > 0 {
		c.ReadOnlyTools = append(append([]string(nil), c.ReadOnlyTools...), traits.ReadOnlyTools...)
	}
	if len(traits.PathArgs) > 0 {
		merged := make(map[string][]string, len(c.PathArgs)+len(traits.PathArgs))
		for t, keys := range c.PathArgs {
			merged[t] = append([]string(nil), keys...)
		}
		for t, keys := range traits.PathArgs {
			merged[t] = append(merged[t], keys...)
		}
		c.PathArgs = merged
	}
	return c
}

// State carries runtime state of policies across configuration pushes, so a
// new revision does not reset sessions' budgets.
type State struct {
	mu        sync.Mutex
	budgetCfg contract.BudgetConfig
	budgets   map[string]*contract.Budgets
	windows   map[string]*ratelimit.Windows // by policy and rules (windowsKey)
}

// NewState returns empty state whose budgets use the defaults.
func NewState() *State { return NewStateWithBudgets(contract.BudgetConfig{}) }

// NewStateWithBudgets returns empty state whose policies' budgets are
// configured by cfg (session TTL and caps).
func NewStateWithBudgets(cfg contract.BudgetConfig) *State {
	return &State{budgetCfg: cfg, budgets: map[string]*contract.Budgets{}, windows: map[string]*ratelimit.Windows{}}
}

// windowsFor returns the rate-limit windows of a policy's rules: kept across
// configuration changes as long as the policy (uid) and its rules are the same.
func (s *State) windowsFor(key string) *ratelimit.Windows {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.windows[key]
	if !ok {
		w = ratelimit.NewWindows()
		s.windows[key] = w
	}
	return w
}

// windowsKey identifies a contract's rate limits: its policy and its rules.
func windowsKey(h Hook) string {
	var k strings.Builder
	k.WriteString(stateKey(h))
	for _, r := range h.Contract.rules() {
		fmt.Fprintf(&k, "\x00%s\x00%d", r.Tools, r.PerSenderPerMinute)
	}
	return k.String()
}

func (s *State) budgetsFor(key string) (*contract.Budgets, error) {
	if s == nil {
		return contract.NewBudgets(contract.BudgetConfig{})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.budgets[key]; ok {
		return b, nil
	}
	b, err := contract.NewBudgets(s.budgetCfg)
	if err != nil {
		return nil, err
	}
	s.budgets[key] = b
	return b, nil
}

// Retain forgets the state of policies not in cfg.
func (s *State) Retain(cfg *Config) {
	if s == nil {
		return
	}
	keep := map[string]bool{}
	for _, h := range cfg.Hooks {
		keep[stateKey(h)] = true
		if h.Contract != nil {
			keep[windowsKey(h)] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.budgets {
		if !keep[k] {
			delete(s.budgets, k)
		}
	}
	for k := range s.windows {
		if !keep[k] {
			delete(s.windows, k)
		}
	}
}

func stateKey(h Hook) string {
	if h.Policy.UID != "" {
		return h.Policy.UID
	}
	return h.Name
}

// Build validates cfg and turns it into the executor's ordered entries. A
// policy the gateway cannot build (a workspace root missing here, say) fails
// closed: its entry denies every call with RuleUnenforceable and the reason.
func Build(cfg *Config, opts BuildOptions) ([]hooks.Entry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	entries := make([]hooks.Entry, 0, len(cfg.Hooks))
	for _, h := range cfg.Hooks {
		hook, failOpen, err := build(h, opts)
		if err != nil {
			hook, failOpen = unenforceable{name: h.Name, err: err}, false
		}
		entries = append(entries, hooks.Entry{Hook: hook, Policy: h.Policy, Action: h.Action, FailOpen: failOpen})
	}
	return entries, nil
}

func build(h Hook, opts BuildOptions) (hooks.Hook, bool, error) {
	switch h.Kind {
	case KindAuditLog:
		return audit.New(opts.Audit), false, nil
	case KindAutonomyPolicy:
		a, err := autonomy.New(AutonomyConfig(h, opts.Traits))
		return a, false, err
	case KindContractPolicy:
		hk, err := buildContract(h, opts)
		return hk, false, err
	case KindPluginHook:
		if opts.Plugins == nil {
			return unavailablePlugin{name: h.Name, plugin: h.Plugin}, h.Plugin.FailOpen, nil
		}
		p, err := opts.Plugins(h)
		return p, h.Plugin.FailOpen, err
	}
	return nil, false, fmt.Errorf("unknown hook kind %q", h.Kind)
}

func buildContract(h Hook, opts BuildOptions) (hooks.Hook, error) {
	c := h.Contract
	matcher, err := contract.NewMatcher(contract.Subjects(c.Subjects))
	if err != nil {
		return nil, err
	}
	budgets, err := opts.State.budgetsFor(stateKey(h))
	if err != nil {
		return nil, err
	}
	resolver, err := contract.NewStaticResolver(contract.Binding{Subjects: matcher, Contract: c.contract()})
	if err != nil {
		return nil, err
	}
	scope, err := contract.New(contract.Config{Name: h.Name, Resolver: resolver, WorkspaceRoot: opts.Workspace, Budgets: budgets})
	if err != nil {
		return nil, err
	}
	if len(c.RateLimits) == 0 {
		return scope, nil
	}
	limits, err := ratelimit.New(ratelimit.Config{Name: h.Name, Rules: c.rules(), Windows: opts.State.windowsFor(windowsKey(h))})
	if err != nil {
		return nil, err
	}
	return sequence{name: h.Name, parts: []hooks.Hook{scope, subjectFilter{Hook: limits, m: matcher}}}, nil
}

// sequence runs several hooks as one named hook: the first denial wins; every
// part's After runs.
type sequence struct {
	name  string
	parts []hooks.Hook
}

func (s sequence) Name() string { return s.name }

func (s sequence) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	for _, p := range s.parts {
		v, err := p.Before(ctx, call)
		if err != nil || !v.Allowed {
			return v, err
		}
	}
	return hooks.Allow, nil
}

func (s sequence) After(ctx context.Context, call *hooks.Call, res *hooks.Result) {
	for _, p := range s.parts {
		p.After(ctx, call, res)
	}
}

// subjectFilter applies a hook only to the calls a contract's subjects match.
type subjectFilter struct {
	hooks.Hook
	m *contract.Matcher
}

func (f subjectFilter) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !f.m.Matches(call) {
		return hooks.Allow, nil
	}
	return f.Hook.Before(ctx, call)
}

// unenforceable stands in for a policy the gateway could not build: it denies.
type unenforceable struct {
	name string
	err  error
}

func (u unenforceable) Name() string { return u.name }

func (u unenforceable) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Deny(RuleUnenforceable, fmt.Sprintf("Policy %s cannot be enforced on this gateway: %v", u.name, u.err)), nil
}

func (unenforceable) After(context.Context, *hooks.Call, *hooks.Result) {}

// unavailablePlugin fails the before-calls the plugin subscribed to (a
// tool:before subscription and a matching tool), so the entry's failure
// policy applies to exactly those; other calls never reach a plugin.
type unavailablePlugin struct {
	name   string
	plugin *Plugin
}

func (p unavailablePlugin) Name() string { return p.name }

func (p unavailablePlugin) Before(_ context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !p.plugin.Subscribed(call.Tool) {
		return hooks.Allow, nil
	}
	return hooks.Verdict{}, ErrPluginRuntimeUnavailable
}

// Subscribed reports whether the plugin's before-hook is called for tool: it
// subscribes to tool:before and tool matches one of its Tools globs (or it has none).
func (p *Plugin) Subscribed(tool string) bool {
	return p.Before && p.MatchesTool(tool)
}

// MatchesTool reports whether the plugin's tools globs let tool through
// (no globs: every tool).
func (p *Plugin) MatchesTool(tool string) bool {
	if len(p.Tools) == 0 {
		return true
	}
	for _, g := range p.Tools {
		if ok, err := doublestar.Match(g, tool); err == nil && ok {
			return true
		}
	}
	return false
}

func (unavailablePlugin) After(context.Context, *hooks.Call, *hooks.Result) {}

// Timeout returns the plugin's before-phase timeout.
func (p *Plugin) Timeout() time.Duration { return time.Duration(p.TimeoutMillis) * time.Millisecond }
