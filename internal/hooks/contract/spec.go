package contract

import (
	"crypto/sha256"
	"encoding/hex"
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
	// StateFailurePolicy is what a call is given when the shared state
	// store cannot count it: Fail (deny, the default) or Ignore (allow uncounted).
	StateFailurePolicy StateFailurePolicy `json:"stateFailurePolicy,omitempty"`
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
	switch s.StateFailurePolicy {
	case "", StateFailureFail, StateFailureIgnore:
		return nil
	}
	return fmt.Errorf("%w: stateFailurePolicy %q: want %s or %s", ErrInvalidContract, s.StateFailurePolicy,
		StateFailureFail, StateFailureIgnore)
}

// Build returns the hook of a ContractPolicy entry named name on a gateway:
// the contract scope with its budgets and rate limits for the calls the
// subjects select. key identifies the policy across configuration pushes
// (its uid): the counters in state are kept under it. Relative paths
// resolve against the gateway's workspace.
func Build(name, key string, s *Spec, env hooks.BuildEnv, state *State) (hooks.Hook, error) {
	matcher, err := hooks.NewSubjectMatcher(s.Subjects)
	if err != nil {
		return nil, err
	}
	cfg := Config{Name: name, Subjects: matcher, WorkspaceRoot: env.Workspace, OnStoreFailure: s.StateFailurePolicy}
	c := s.Contract
	cfg.Contract = &c
	shared := state.shared()
	if len(s.RateLimits) > 0 {
		rc := ratelimit.Config{Name: name, Rules: s.RateLimits}
		if shared == nil {
			rc.Windows = state.windowsFor(windowsKey(key, s))
		}
		if cfg.RateLimit, err = ratelimit.New(rc); err != nil {
			return nil, err
		}
	}
	if shared != nil {
		cfg.Store, cfg.Policy, cfg.RateRules, cfg.PendingTTL = shared, key, rulesID(s), state.budgetCfg.PendingTTL
	} else if cfg.Budgets, err = state.budgetsFor(key); err != nil {
		return nil, err
	}
	scope, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &hook{ContractScope: scope, names: s.toolNames(), subjects: matcher}, nil
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

// hook is a contract policy's hook: its scope, with the tool names and
// subjects the gateway lists.
type hook struct {
	*ContractScope
	names    []string
	subjects *hooks.SubjectMatcher // nil binds every call
}

var (
	_ hooks.ToolNamer    = (*hook)(nil)
	_ hooks.RuntimeGuard = (*hook)(nil)
	_ hooks.Scoped       = (*hook)(nil)
)

// Subjects returns the contract's subjects (nil binds every call).
func (h *hook) Subjects() *hooks.SubjectMatcher { return h.subjects }

// ToolNames returns the exact tool names the spec names.
func (h *hook) ToolNames() []string { return h.names }

// State carries the runtime state of contract policies across configuration
// pushes (session budgets, caller windows and rate-limit windows), so that a
// new revision does not reset them. Its zero value is not usable; a nil
// *State keeps nothing across builds.
type State struct {
	mu        sync.Mutex
	budgetCfg BudgetConfig
	store     Store // a shared store; nil counts in process
	budgets   map[string]*Budgets
	windows   map[string]*ratelimit.Windows // by policy and rules (windowsKey)
}

// NewState returns empty state whose policies' budgets are configured by cfg
// (session TTL and caps).
func NewState(cfg BudgetConfig) *State {
	return &State{budgetCfg: cfg, budgets: map[string]*Budgets{}, windows: map[string]*ratelimit.Windows{}}
}

// NewSharedState returns state kept in store, shared with every gateway
// that uses the same store; cfg's PendingTTL bounds how long a
// reservation waits for its after phase.
func NewSharedState(store Store, cfg BudgetConfig) *State {
	s := NewState(cfg)
	s.store = store
	return s
}

// shared returns the shared store, nil when counting in process.
func (s *State) shared() Store {
	if s == nil {
		return nil
	}
	return s.store
}

// rulesID identifies a contract's rate-limit rules, so that counters in a
// shared store are kept while the rules stay the same.
func rulesID(s *Spec) string {
	h := sha256.New()
	for _, r := range s.RateLimits {
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", r.Tools, r.PerSenderPerMinute)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
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
