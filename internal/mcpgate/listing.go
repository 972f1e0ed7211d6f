package mcpgate

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// outrightRules are the autonomy rules a tool's name alone decides.
var outrightRules = []string{autonomy.RuleToolDeny, autonomy.RuleToolAllow, autonomy.RuleReadOnly, autonomy.RuleShellDisabled}

// listing computes, once per configuration revision, which tools the
// policies in force deny outright and with which denial.
type listing struct {
	gw    *gateway.Server
	names []string
	cache atomic.Pointer[deniedSet]
}

type deniedSet struct {
	revision string
	tools    map[string]*wire.Denial
}

// denied maps the tools denied outright to the denial a call would get.
func (l *listing) denied() map[string]*wire.Denial {
	cfg := l.gw.Config()
	rev := ""
	if cfg != nil {
		rev = cfg.Revision
	}
	if c := l.cache.Load(); c != nil && c.revision == rev {
		return c.tools
	}
	set := &deniedSet{revision: rev, tools: outrightDenials(cfg, l.gw.ToolTraits(), l.names)}
	l.cache.Store(set)
	return set.tools
}

// outrightDenials evaluates every AutonomyPolicy entry in enforcing (Deny)
// mode, in the configuration's order, the way the executor builds it
// (gatewayconfig.AutonomyConfig with the gateway's tool traits), on a call of
// each tool without arguments, and keeps the denials whose rule depends on the
// tool's name only. Before the first configuration every tool is denied.
func outrightDenials(cfg *gatewayconfig.Config, traits gatewayconfig.ToolTraits, names []string) map[string]*wire.Denial {
	out := map[string]*wire.Denial{}
	if cfg == nil {
		for _, n := range names {
			out[n] = &wire.Denial{Hook: gateway.GatewayHookName, Rule: gateway.RuleNoPolicy, Reason: gateway.NoPolicyReason}
		}
		return out
	}
	for _, h := range cfg.Hooks {
		if h.Kind != gatewayconfig.KindAutonomyPolicy || h.Action == hooks.ActionWarn {
			continue
		}
		ref := &hooks.Decision{Hook: h.Name, Policy: h.Policy, Action: hooks.ActionDeny}
		a, err := autonomy.New(gatewayconfig.AutonomyConfig(h, traits))
		for _, n := range names {
			if _, done := out[n]; done {
				continue
			}
			d := *ref
			if err != nil { // the executor's entry denies every call (policyUnenforceable)
				d.Rule, d.Reason = gatewayconfig.RuleUnenforceable, err.Error()
			} else {
				v, verr := a.Before(context.Background(), hooks.NewCall(n, ""))
				if verr != nil || v.Allowed || !slices.Contains(outrightRules, v.Rule) {
					continue
				}
				d.Rule, d.Reason = v.Rule, v.Reason
			}
			out[n] = gateway.DenialOf(&d)
		}
	}
	return out
}
