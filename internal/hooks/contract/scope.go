package contract

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
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
	// Unused when Store is set.
	Budgets *Budgets
	// RateLimit limits the selected calls per caller and tool; nil for none.
	// With the in-process counters it counts in its own Windows.
	RateLimit *ratelimit.RateLimit
	// Store is a shared store that counts the budgets and rate limits
	// instead of Budgets and RateLimit's windows; nil counts in process.
	Store Store
	// Policy and RateRules namespace the counters in Store: the policy's
	// identity across pushes and that of its rate-limit rules.
	Policy, RateRules string
	// OnStoreFailure is what a call is given when Store fails;
	// StateFailureFail when empty.
	OnStoreFailure StateFailurePolicy
	// PendingTTL bounds how long a reservation in Store waits for its
	// after phase; DefaultPendingTTL when 0.
	PendingTTL time.Duration
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
	budgets  *Budgets            // the in-process counters; nil with a shared store
	rate     *ratelimit.RateLimit
	pathKeys []string

	store             Store
	shared            *pendingTable // reservations held in a shared store; nil in process
	policy, rateRules string
	ignoreFailures    bool

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
	switch cfg.OnStoreFailure {
	case "", StateFailureFail:
	case StateFailureIgnore:
		h.ignoreFailures = true
	default:
		return nil, fmt.Errorf("contract scope: %w: stateFailurePolicy %q: want %s or %s",
			ErrInvalidContract, cfg.OnStoreFailure, StateFailureFail, StateFailureIgnore)
	}
	h.rate = cfg.RateLimit
	if cfg.Store != nil {
		h.budgets = nil
		h.store = cfg.Store
		h.shared = &pendingTable{ttl: orDefault(cfg.PendingTTL, DefaultPendingTTL)}
		h.policy, h.rateRules = cfg.Policy, cfg.RateRules
		return h, nil
	}
	if h.budgets == nil {
		b, err := NewBudgets(BudgetConfig{})
		if err != nil {
			return nil, fmt.Errorf("contract scope: %w", err)
		}
		h.budgets = b
	}
	h.store = &localStore{budgets: h.budgets, rate: h.rate}
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

// Budgets returns the hook's in-process session counters (nil when a shared
// store counts).
func (h *ContractScope) Budgets() *Budgets { return h.budgets }

// Before decides the call against its contract and, when it is allowed,
// counts it: one reservation takes a slot of the session budget, of the
// caller's window and of the tool's rate limit, all or nothing. A counted
// call whose tool the contract's ask names is asked about instead of
// allowed; its slot is given back if it is then not run.
func (h *ContractScope) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !h.subjects.Matches(call) {
		return hooks.Allow, nil
	}
	v, nth, err := h.decide(ctx, call)
	if err == nil && v.Allowed {
		if ask, ok := h.contract.Ask.asks(call, nth); ok {
			return ask, nil
		}
	}
	return v, err
}

// nthUnknown is decide's place of a call that was allowed uncounted because
// the state store failed: the ask rules cannot tell how many calls came
// before it.
const nthUnknown = -1

// decide is Before for a call the subjects bind, without the ask rules. It
// also returns the call's place among its session's calls when it took a
// session slot (0 when none was taken, nthUnknown when it could not be).
func (h *ContractScope) decide(ctx context.Context, call *hooks.Call) (hooks.Verdict, int, error) {
	c := h.contract
	if h.budgets != nil && c.MaxToolCalls > 0 && h.budgets.exhausted(budgetKey(call), c.MaxToolCalls) {
		return DenyOverBudget(&Reservation{Call: call, MaxToolCalls: c.MaxToolCalls}), 0, nil
	}
	if v := h.checkScope(pathguard.MemoFrom(ctx), call, c); !v.Allowed {
		return v, 0, nil
	}
	r := Reservation{Call: call, Policy: h.policy, Session: budgetKey(call), Owner: senderOf(call),
		MaxToolCalls: c.counted(), RateRules: h.rateRules}
	r.CallerCalls, r.CallerWindow = c.perSender()
	if r.CallerCalls > 0 {
		r.Caller = callerOf(call)
	}
	if h.rate != nil {
		r.RatePerMinute, _ = h.rate.Limit(call.Tool)
	}
	if r.MaxToolCalls == 0 && r.CallerCalls == 0 && r.RatePerMinute == 0 {
		return hooks.Allow, 0, nil
	}
	if h.shared == nil {
		v, err := h.store.Reserve(ctx, &r)
		return v, r.Nth, err
	}
	r.ID = newReservationID()
	v, err := h.store.Reserve(ctx, &r)
	switch {
	case err != nil && h.ignoreFailures:
		return hooks.Allow, nthUnknown, nil
	case err != nil:
		if r.MaxToolCalls > 0 && !errors.Is(err, ErrNotSent) {
			// The reservation may have been taken before the failure was
			// seen; give it back, as the call will not run.
			releaseAfterFailure(h.store, &r)
		}
		return hooks.Deny(RuleStateStore, fmt.Sprintf(
			"The call cannot be counted against the contract's budgets and rate limits: the state store (%s) failed: %v",
			h.store.Name(), err)), 0, nil
	case v.Allowed && r.MaxToolCalls > 0:
		h.shared.put(&r)
	}
	return v, r.Nth, nil
}

// After settles the reservation Before took for call, if any: a call denied
// by a later hook (or whose before phase was cancelled) gives its slot back;
// every other outcome counts as executed.
func (h *ContractScope) After(ctx context.Context, call *hooks.Call, res *hooks.Result) {
	executed := res == nil || res.Status != hooks.StatusDenied
	if h.shared == nil {
		_ = h.store.Settle(ctx, &Reservation{Call: call}, executed)
		return
	}
	if r := h.shared.take(call); r != nil {
		// A settle that fails leaves the slot reserved until the store
		// commits it at its deadline: a failure only ever errs strict.
		_ = h.store.Settle(ctx, r, executed)
	}
}

// maxReleasesInFlight bounds the reservations being released after a
// store failure; beyond it a reservation stays counted (strict) rather than
// add load to a store that is failing.
const maxReleasesInFlight = 1024

// releasesInFlight counts the goroutines of releaseAfterFailure.
var releasesInFlight atomic.Int64

// releaseAfterFailure gives back r's slot in the background, in case the
// store took it before Reserve failed (a reservation stuck in a connection
// to a server that hangs can still run when it wakes up). Releasing a
// reservation that does not exist records it cancelled, so that it takes
// nothing if it arrives later; so the release is retried, with backoff,
// until the store answers or a minute has passed.
func releaseAfterFailure(store Store, r *Reservation) {
	if releasesInFlight.Add(1) > maxReleasesInFlight {
		releasesInFlight.Add(-1)
		return
	}
	go func() {
		defer releasesInFlight.Add(-1)
		wait := 50 * time.Millisecond
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); wait = min(2*wait, 2*time.Second) {
			if store.Settle(context.Background(), r, false) == nil {
				return
			}
			time.Sleep(wait)
		}
	}()
}
