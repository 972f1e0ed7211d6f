package gatewayconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// Kind says which hook implementation an entry configures: KindAuditLog or
// the name of a kind registered with hooks.RegisterKind.
type Kind string

// KindAuditLog is the kind of the list's first entry, which records every call.
const KindAuditLog Kind = "AuditLog"

// errNoDecisionLog makes a policy that requires the decision log
// unenforceable on a gateway that does not write it.
var errNoDecisionLog = errors.New("it requires the decision log, which this gateway does not write (its --decision-log flag is off)")

// RuleUnenforceable is the rule of the denial a policy gives when the gateway
// cannot build it (for example, it names a workspace root other than the
// gateway's).
const RuleUnenforceable = "policyUnenforceable"

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
	// Runtime holds what kinds need of the gateway, each kind finding its
	// own by type (hooks.RuntimeOf): the contract policies' state kept across
	// builds (a *contract.State), the plugin runtime (a plugins.Factory).
	Runtime []any
	// Traits are what the gateway knows about its own tools (the upstream
	// MCP tools it fronts); every AutonomyPolicy entry adds them to its own
	// pathArgs and readOnlyTools.
	Traits hooks.ToolTraits
}

// Build turns cfg into the executor's ordered entries; an invalid cfg is an
// error, and nothing is built. Each spec is built once: only an entry that
// fails to build is built again without the file system, to tell an invalid
// spec (cfg is invalid) from a policy the gateway cannot enforce (it names
// another workspace root, say), which fails closed: its entry denies every
// call with RuleUnenforceable and the reason.
func Build(cfg *Config, opts BuildOptions) ([]hooks.Entry, error) {
	if err := cfg.checkList(); err != nil {
		return nil, err
	}
	specs := make([]hooks.Spec, len(cfg.Hooks))
	for i := range cfg.Hooks {
		spec, err := cfg.Hooks[i].decodeChecked()
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", cfg.Hooks[i].Name, err)
		}
		specs[i] = spec
	}
	env := hooks.BuildEnv{Workspace: opts.Workspace, Traits: opts.Traits, Runtime: opts.Runtime}
	entries := make([]hooks.Entry, 0, len(cfg.Hooks))
	for i := range cfg.Hooks {
		h, spec := &cfg.Hooks[i], specs[i]
		var hook hooks.Hook
		var failOpen bool
		var err error
		if spec == nil {
			hook = audit.New(opts.Audit, audit.WithDecisionLog(opts.DecisionLog), audit.WithReasonMask(opts.MaskReason))
		} else if hook, failOpen, err = spec.Build(h.ref(), &env); err != nil {
			if _, _, invalid := spec.Build(h.ref(), &hooks.BuildEnv{Validate: true}); invalid != nil {
				return nil, fmt.Errorf("hook %s: %w", h.Name, invalid)
			}
		}
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
