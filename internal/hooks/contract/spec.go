package contract

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
)

// Spec is a ContractPolicy's compiled spec: what the controller pushes to
// gateways (as JSON) and what Build turns into the hook.
type Spec struct {
	// Subjects selects the calls the contract binds; empty lists match all.
	Subjects hooks.Subjects `json:"subjects,omitzero"`
	Contract
	// RateLimits limit the selected calls per caller and tool.
	RateLimits []ratelimit.Rule `json:"rateLimits,omitempty"`
}

// Validate checks s without touching the file system. Errors wrap
// hooks.ErrInvalidGlob, hooks.ErrInvalidPath or hooks.ErrInvalidSpec.
func Validate(s *Spec) error {
	if err := hooks.ValidateSubjects(s.Subjects); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	for _, r := range s.RateLimits {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Build returns the hook of a ContractPolicy entry named name on a gateway:
// the contract scope, then (when the spec has rate limits) the rate-limit
// hook for the calls the subjects select. key identifies the policy across
// configuration pushes (its uid): the budgets and windows in state are kept
// under it. Relative paths resolve against the gateway's workspace.
func Build(name, key string, s *Spec, env hooks.BuildEnv, state *State) (hooks.Hook, error) {
	matcher, err := hooks.NewSubjectMatcher(s.Subjects)
	if err != nil {
		return nil, err
	}
	budgets, err := state.budgetsFor(key)
	if err != nil {
		return nil, err
	}
	c := s.Contract
	scope, err := New(Config{Name: name, Subjects: matcher, Contract: &c, WorkspaceRoot: env.Workspace, Budgets: budgets})
	if err != nil {
		return nil, err
	}
	names := s.toolNames()
	if len(s.RateLimits) == 0 {
		return &hook{name: name, parts: []hooks.Hook{scope}, names: names, subjects: matcher}, nil
	}
	limits, err := ratelimit.New(ratelimit.Config{Name: name, Rules: s.RateLimits, Windows: state.windowsFor(windowsKey(key, s))})
	if err != nil {
		return nil, err
	}
	return &hook{name: name, parts: []hooks.Hook{scope, subjectFilter{Hook: limits, m: matcher}}, names: names, subjects: matcher}, nil
}

// toolNames are the exact tool names (not globs) s names.
func (s *Spec) toolNames() []string {
	tools := make([]string, 0, len(s.ScopedCapabilities)+len(s.RateLimits))
	for _, cp := range s.ScopedCapabilities {
		tools = append(tools, cp.Tool)
	}
	for _, r := range s.RateLimits {
		tools = append(tools, r.Tools)
	}
	return hooks.ExactToolNames(tools)
}

// hook runs the contract's parts as one named hook: the first denial wins;
// every part's After runs.
type hook struct {
	name     string
	parts    []hooks.Hook
	names    []string
	subjects *hooks.SubjectMatcher // nil binds every call
}

var (
	_ hooks.ToolNamer    = (*hook)(nil)
	_ hooks.RuntimeGuard = (*hook)(nil)
	_ hooks.Scoped       = (*hook)(nil)
)

func (h *hook) Name() string { return h.name }

func (h *hook) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	for _, p := range h.parts {
		v, err := p.Before(ctx, call)
		if err != nil || !v.Allowed {
			return v, err
		}
	}
	return hooks.Allow, nil
}

func (h *hook) After(ctx context.Context, call *hooks.Call, res *hooks.Result) {
	for _, p := range h.parts {
		p.After(ctx, call, res)
	}
}

// CheckExec re-checks a command a running shell tool starts (see ContractScope.CheckExec).
func (h *hook) CheckExec(ctx context.Context, call *hooks.Call, dir string, env, argv []string) hooks.Verdict {
	return h.parts[0].(*ContractScope).CheckExec(ctx, call, dir, env, argv)
}

// CheckOpen re-checks a file a running tool opens (see ContractScope.CheckOpen).
func (h *hook) CheckOpen(ctx context.Context, call *hooks.Call, path string, write bool) hooks.Verdict {
	return h.parts[0].(*ContractScope).CheckOpen(ctx, call, path, write)
}

// Subjects returns the contract's subjects (nil binds every call).
func (h *hook) Subjects() *hooks.SubjectMatcher { return h.subjects }

// ToolNames returns the exact tool names the spec names.
func (h *hook) ToolNames() []string { return h.names }

// subjectFilter applies a hook only to the calls a contract's subjects match.
type subjectFilter struct {
	hooks.Hook
	m *hooks.SubjectMatcher
}

func (f subjectFilter) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !f.m.Matches(call) {
		return hooks.Allow, nil
	}
	return f.Hook.Before(ctx, call)
}

// State carries the runtime state of contract policies across configuration
// pushes (session budgets, caller windows and rate-limit windows), so that a
// new revision does not reset them. Its zero value is not usable; a nil
// *State keeps nothing across builds.
type State struct {
	mu        sync.Mutex
	budgetCfg BudgetConfig
	budgets   map[string]*Budgets
	windows   map[string]*ratelimit.Windows // by policy and rules (windowsKey)
}

// NewState returns empty state whose policies' budgets are configured by cfg
// (session TTL and caps).
func NewState(cfg BudgetConfig) *State {
	return &State{budgetCfg: cfg, budgets: map[string]*Budgets{}, windows: map[string]*ratelimit.Windows{}}
}

// windowsFor returns the rate-limit windows under key, kept as long as the
// policy and its rules stay the same.
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
func windowsKey(key string, s *Spec) string {
	var k strings.Builder
	k.WriteString(key)
	for _, r := range s.RateLimits {
		fmt.Fprintf(&k, "\x00%s\x00%d", r.Tools, r.PerSenderPerMinute)
	}
	return k.String()
}

func (s *State) budgetsFor(key string) (*Budgets, error) {
	if s == nil {
		return NewBudgets(BudgetConfig{})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.budgets[key]; ok {
		return b, nil
	}
	b, err := NewBudgets(s.budgetCfg)
	if err != nil {
		return nil, err
	}
	s.budgets[key] = b
	return b, nil
}

// Retain forgets the state of every policy but those in live (policy key to
// its spec).
func (s *State) Retain(live map[string]*Spec) {
	if s == nil {
		return
	}
	keep := map[string]bool{}
	for key, spec := range live {
		keep[key] = true
		keep[windowsKey(key, spec)] = true
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
