package gatewayconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/plugins"
)

// Kind says which hook implementation an entry configures.
type Kind string

// Hook kinds, in the order the compiler places them.
const (
	KindAuditLog       Kind = "AuditLog"
	KindAutonomyPolicy Kind = "AutonomyPolicy"
	KindContractPolicy Kind = "ContractPolicy"
	KindPluginHook     Kind = "PluginHook"
	KindResultPolicy   Kind = "ResultPolicy"
)

// kind is what this package knows of one hook kind; everything else is in
// the kind's own package.
type kind struct {
	// hasSpec reports whether h carries this kind's spec; nil for a kind
	// without one.
	hasSpec func(h *Hook) bool
	// validate checks h's spec without touching the file system.
	validate func(h *Hook) error
	// build returns the entry's hook and whether its failures let calls through.
	build func(h *Hook, opts *BuildOptions) (hk hooks.Hook, failOpen bool, err error)
	// decidesNothing marks kinds that never decide on a call before it runs
	// (the AuditLog, result policies).
	decidesNothing bool
}

// kinds is the table of hook kinds.
var kinds = map[Kind]kind{
	KindAuditLog: {
		decidesNothing: true,
		build: func(_ *Hook, o *BuildOptions) (hooks.Hook, bool, error) {
			return audit.New(o.Audit, audit.WithDecisionLog(o.DecisionLog), audit.WithReasonMask(o.MaskReason)), false, nil
		},
	},
	KindAutonomyPolicy: {
		hasSpec:  func(h *Hook) bool { return h.Autonomy != nil },
		validate: func(h *Hook) error { return autonomy.Validate(*h.Autonomy) },
		build: func(h *Hook, o *BuildOptions) (hooks.Hook, bool, error) {
			a, err := autonomy.Build(h.Name, *h.Autonomy, o.env())
			return a, false, err
		},
	},
	KindContractPolicy: {
		hasSpec:  func(h *Hook) bool { return h.Contract != nil },
		validate: func(h *Hook) error { return contract.Validate(h.Contract) },
		build: func(h *Hook, o *BuildOptions) (hooks.Hook, bool, error) {
			c, err := contract.Build(h.Name, h.stateKey(), h.Contract, o.env(), o.State)
			return c, false, err
		},
	},
	KindPluginHook: {
		hasSpec:  func(h *Hook) bool { return h.Plugin != nil },
		validate: func(h *Hook) error { return plugins.Validate(h.Plugin) },
		build: func(h *Hook, o *BuildOptions) (hooks.Hook, bool, error) {
			ref := plugins.Ref{Name: h.Name, Policy: h.Policy, Spec: h.Plugin}
			if o.Plugins == nil {
				return plugins.Unavailable(ref), h.Plugin.FailOpen, nil
			}
			p, err := o.Plugins(ref)
			return p, h.Plugin.FailOpen, err
		},
	},
	KindResultPolicy: {
		decidesNothing: true,
		hasSpec:        func(h *Hook) bool { return h.Result != nil },
		validate:       func(h *Hook) error { return resultscan.Validate(h.Result) },
		build: func(h *Hook, _ *BuildOptions) (hooks.Hook, bool, error) {
			r, err := resultscan.Build(h.Name, h.Result)
			return r, false, err
		},
	},
}

// errNoDecisionLog makes a policy that requires the decision log
// unenforceable on a gateway that does not write it.
var errNoDecisionLog = errors.New("it requires the decision log, which this gateway does not write (its --decision-log flag is off)")

// RuleUnenforceable is the rule of the denial a policy gives when the gateway
// cannot build it (for example, it names a workspace root other than the
// gateway's).
const RuleUnenforceable = "policyUnenforceable"

// PluginFactory builds the runtime hook of a PluginHook entry.
type PluginFactory func(r plugins.Ref) (hooks.Hook, error)

// BuildOptions are the gateway's side of building a configuration.
type BuildOptions struct {
	// Workspace is the gateway's workspace root, the one directory relative
	// paths resolve against. Empty denies contract calls that need a path check.
	Workspace string
	// Audit receives the AuditLog records; nil writes JSON lines to stdout.
	Audit audit.Sink
	// DecisionLog adds each call's masked arguments to its audit record;
	// nil leaves them out, and an entry that requires them is unenforceable.
	DecisionLog func(context.Context, *hooks.Call) *audit.Arguments
	// MaskReason replaces the secrets a decision's reason quotes in its
	// audit record; nil keeps reasons as they are.
	MaskReason func(context.Context, string) string
	// State keeps contract policies' runtime state (budgets, windows) across
	// builds; nil keeps none.
	State *contract.State
	// Plugins builds PluginHook runtimes; nil makes every plugin fail, so its
	// failure policy applies.
	Plugins PluginFactory
	// Traits are what the gateway knows about its own tools (the upstream
	// MCP tools it fronts); every AutonomyPolicy entry adds them to its own
	// pathArgs and readOnlyTools.
	Traits hooks.ToolTraits
}

func (o *BuildOptions) env() hooks.BuildEnv {
	return hooks.BuildEnv{Workspace: o.Workspace, Traits: o.Traits}
}

// Build validates cfg (an invalid one is an error, and nothing is built) and
// turns it into the executor's ordered entries: one pass of validation, one
// of building. A policy the gateway cannot build (it names another workspace
// root, say) fails closed: its entry denies every call with
// RuleUnenforceable and the reason.
func Build(cfg *Config, opts BuildOptions) ([]hooks.Entry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	entries := make([]hooks.Entry, 0, len(cfg.Hooks))
	for i := range cfg.Hooks {
		h := &cfg.Hooks[i]
		hook, failOpen, err := kinds[h.Kind].build(h, &opts)
		if err == nil && h.RequireDecisionLog && opts.DecisionLog == nil {
			err = errNoDecisionLog
		}
		if err != nil {
			hook, failOpen = unenforceable{name: h.Name, err: err}, false
		}
		entries = append(entries, hooks.Entry{Hook: hook, Policy: h.Policy, Action: h.Action, FailOpen: failOpen})
	}
	if u, ok := unboundGuard(cfg, entries); ok {
		// Right after the AuditLog, before the policies.
		entries = slices.Insert(entries, 1, hooks.Entry{Hook: u})
	}
	return entries, nil
}

// RuleNoPolicyBindsCaller is the rule of the denial of a call that no policy
// in the list binds: every policy's subjects leave it out.
const RuleNoPolicyBindsCaller = "noPolicyBindsCaller"

// UnboundHookName is the name of the hook that denies the calls no policy binds.
const UnboundHookName = "subjects"

// unboundGuard returns the hook that denies the calls no policy of entries
// binds, when the list begins with the AuditLog and every policy after it
// binds only the calls its subjects select: a caller that all of them leave
// out is not left unrestricted. When some policy binds every call, none is
// needed.
func unboundGuard(cfg *Config, entries []hooks.Entry) (unbound, bool) {
	if len(entries) < 2 || cfg.Hooks[0].Kind != KindAuditLog {
		return unbound{}, false
	}
	var u unbound
	for _, e := range entries[1:] {
		if _, filter := e.Hook.(hooks.ResultFilter); filter {
			// A result policy decides nothing before a call: it binds none.
			continue
		}
		s, ok := e.Hook.(hooks.Scoped)
		if !ok || s.Subjects() == nil {
			return unbound{}, false
		}
		u.subjects = append(u.subjects, s.Subjects())
	}
	return u, len(u.subjects) > 0
}

// unbound denies the calls that none of its subjects bind.
type unbound struct {
	subjects []*hooks.SubjectMatcher
}

var _ hooks.OutrightDenier = unbound{}

func (unbound) Name() string { return UnboundHookName }

func (u unbound) Before(_ context.Context, call *hooks.Call) (hooks.Verdict, error) {
	v, _ := u.DeniesOutright(call)
	return v, nil
}

func (unbound) After(context.Context, *hooks.Call, *hooks.Result) {}

// DeniesOutright denies every tool to a caller no policy binds.
func (u unbound) DeniesOutright(call *hooks.Call) (hooks.Verdict, bool) {
	for _, m := range u.subjects {
		if m.Matches(call) {
			return hooks.Allow, false
		}
	}
	who := call.SenderID
	if who == "" {
		who = "a caller without a verified identity"
	}
	return hooks.Deny(RuleNoPolicyBindsCaller, fmt.Sprintf("No policy of this gateway binds %s (session %q, channel %q): "+
		"every policy's subjects leave the call out, and a call no policy binds is denied.",
		who, call.SessionID, call.ChannelID)), true
}

// RetainState forgets, in state, the contract policies cfg does not hold.
func RetainState(state *contract.State, cfg *Config) { state.Retain(cfg.contracts()) }

// unenforceable stands in for a policy the gateway could not build: it denies
// every call.
type unenforceable struct {
	name string
	err  error
}

var _ hooks.OutrightDenier = unenforceable{}

func (u unenforceable) Name() string { return u.name }

func (u unenforceable) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return u.verdict(), nil
}

func (u unenforceable) verdict() hooks.Verdict {
	return hooks.Deny(RuleUnenforceable, fmt.Sprintf("Policy %s cannot be enforced on this gateway: %v", u.name, u.err))
}

// DeniesOutright denies every tool: no call passes a policy that cannot be enforced.
func (u unenforceable) DeniesOutright(*hooks.Call) (hooks.Verdict, bool) { return u.verdict(), true }

func (unenforceable) After(context.Context, *hooks.Call, *hooks.Result) {}
