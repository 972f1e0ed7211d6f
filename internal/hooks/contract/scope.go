package contract

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// DefaultName is the hook name used when Config.Name is empty.
const DefaultName = "ContractScope"

// Config configures a ContractScope hook.
type Config struct {
	// Name is the hook name reported in denials; DefaultName when empty.
	Name string
	// Subjects selects the calls Contract governs; nil selects every call.
	Subjects *hooks.SubjectMatcher
	// Contract governs the selected calls (required).
	Contract *Contract
	// WorkspaceRoot is the absolute path of an existing directory against
	// which relative paths and relative allowed-path prefixes resolve. It may
	// be empty only if no contract restricts paths: a call that needs a path
	// check without a root is denied.
	WorkspaceRoot string
	// Budgets holds the session counters; a private one (with
	// DefaultSessionTTL and DefaultMaxSessions) when nil. Pass the Budgets of
	// the hook this one replaces to keep counts across a configuration push.
	Budgets *Budgets
	// PathKeys are extra argument names that carry paths, added to
	// pathguard.DefaultPathKeys.
	PathKeys []string
}

// ContractScope is the contract hook. Its decisions, in order:
//
//  1. A call the subjects do not select is allowed.
//  2. A session that has executed MaxToolCalls calls (or has that many in
//     flight) is denied (rule maxToolCalls).
//  3. Under a contract where some capability has AllowedPaths, file-system
//     tools (read_file, write_file, edit_file, apply_patch, list_dir) and exec
//     tools (shell, code_exec, git, process) without a capability of their own
//     are denied; under a contract with top-level AllowedPaths, shell and
//     code_exec need a capability too (rule scopedCapabilities).
//  4. A capability with AllowedPaths: every path argument must resolve under
//     one of them, and a call from which no path can be extracted is denied.
//  5. A capability without AllowedPaths grants its tool without a path
//     restriction of its own.
//  6. Top-level AllowedPaths: every path of a file-system or exec tool call
//     must resolve under one of them (rule allowedPaths); a call with no path
//     is denied, except code_exec explicitly granted without paths.
//
// Paths are resolved by pathguard against the workspace root on every call,
// symlinks followed before ".." is applied; the lookups are shared with the
// other hooks deciding the same call through the executor's per-call
// pathguard.Memo, never across calls. The allowed prefixes are resolved
// the same way once, when first used, and kept for the hook's lifetime, so
// retargeting a symlink inside a prefix cannot move the scope. A shell (or
// process) command is parsed and every word that names a path is checked,
// see shellPaths.
//
// Budgets count executed calls: Before reserves a slot, After commits it, or
// releases it when the call was denied later in the before phase (a denied
// call did not execute). The count is exact under any concurrency.
type ContractScope struct { //nolint:revive // ContractScope is the name the docs and denials use
	name     string
	subjects *hooks.SubjectMatcher
	contract *Contract
	paths    *pathguard.Resolver // nil when no workspace root is configured
	budgets  *Budgets
	pathKeys []string

	prefixes  sync.Map // allowed-path prefix -> its real path, see prefix
	nPrefixes atomic.Int64
}

var _ hooks.Hook = (*ContractScope)(nil)

// New validates cfg and returns a ContractScope hook. A workspace root that
// does not exist or cannot be read is an error: the policy is invalid.
func New(cfg Config) (*ContractScope, error) {
	if err := cfg.Contract.Validate(); err != nil {
		return nil, fmt.Errorf("contract scope: %w", err)
	}
	h := &ContractScope{
		name:     cfg.Name,
		subjects: cfg.Subjects,
		contract: cfg.Contract,
		budgets:  cfg.Budgets,
		pathKeys: append([]string(nil), cfg.PathKeys...),
	}
	if h.name == "" {
		h.name = DefaultName
	}
	if cfg.WorkspaceRoot != "" {
		r, err := pathguard.NewResolver(cfg.WorkspaceRoot)
		if err != nil {
			return nil, fmt.Errorf("contract scope: %w", err)
		}
		h.paths = r
	}
	if h.budgets == nil {
		b, err := NewBudgets(BudgetConfig{})
		if err != nil {
			return nil, fmt.Errorf("contract scope: %w", err)
		}
		h.budgets = b
	}
	return h, nil
}

// budgetKey is the key of call's session budget: the session id scoped by
// the verified caller, so that a caller reusing another's session id spends,
// and learns, nothing of the other's budget. Calls without a verified
// caller (tests, the CLI's eval) are keyed by the session id alone.
func budgetKey(call *hooks.Call) string {
	if call.Caller == nil {
		return call.SessionID
	}
	return call.Caller.Username + "\x00" + call.SessionID
}

// Name returns the hook name.
func (h *ContractScope) Name() string { return h.name }

// Budgets returns the hook's session counters.
func (h *ContractScope) Budgets() *Budgets { return h.budgets }

// Before decides the call against its contract and, when the contract has a
// budget and the call is allowed, reserves one slot of it.
func (h *ContractScope) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !h.subjects.Matches(call) {
		return hooks.Allow, nil
	}
	c := h.contract
	if c.MaxToolCalls < 0 || c.MaxToolCalls > MaxToolCallsLimit {
		return hooks.Deny(RuleInvalidContract, fmt.Sprintf(
			"The contract for session %q has an invalid maxToolCalls (%d)", call.SessionID, c.MaxToolCalls)), nil
	}
	if c.MaxToolCalls > 0 && h.budgets.exhausted(budgetKey(call), c.MaxToolCalls) {
		return h.overBudget(call, c), nil
	}
	if v := h.checkScope(pathguard.MemoFrom(ctx), call, c); !v.Allowed {
		return v, nil
	}
	if calls, window := c.perSender(); calls > 0 {
		who := callerOf(call)
		ok, full := h.budgets.senders(window).Take(who, h.budgets.now(), calls)
		switch {
		case full:
			return hooks.Deny(RuleMaxToolCallsPerSender, fmt.Sprintf(
				"The per-caller budget table is full (%d callers within their window); caller %q cannot start one until others go idle",
				h.budgets.maxSess, who)), nil
		case !ok:
			return hooks.Deny(RuleMaxToolCallsPerSender, fmt.Sprintf(
				"Caller %q has made its %d tool calls allowed per %s, across all its sessions", who, calls, window)), nil
		}
	}
	if c.MaxToolCalls > 0 {
		switch h.budgets.reserve(call, c.MaxToolCalls) {
		case overBudget:
			return h.overBudget(call, c), nil
		case tableFull:
			return hooks.Deny(RuleMaxToolCalls, fmt.Sprintf(
				"The call budget table is full (%d sessions within their idle timeout); session %q cannot start a budget until others expire",
				h.budgets.maxSess, call.SessionID)), nil
		case senderFull:
			return hooks.Deny(RuleMaxToolCalls, fmt.Sprintf(
				"Caller %q has %d sessions with a budget within their idle timeout, its limit; session %q cannot start one until some expire",
				senderOf(call), h.budgets.maxPerSend, call.SessionID)), nil
		}
	}
	return hooks.Allow, nil
}

func (h *ContractScope) overBudget(call *hooks.Call, c *Contract) hooks.Verdict {
	return hooks.Deny(RuleMaxToolCalls, fmt.Sprintf(
		"Session %q has used its budget of %d tool calls", call.SessionID, c.MaxToolCalls))
}

// After settles the reservation Before took for call, if any: a call denied
// by a later hook (or whose before phase was cancelled) gives its slot back;
// every other outcome counts as executed.
func (h *ContractScope) After(_ context.Context, call *hooks.Call, res *hooks.Result) {
	h.budgets.settle(call, res != nil && res.Status == hooks.StatusDenied)
}
