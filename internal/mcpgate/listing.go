package mcpgate

import (
	"sync/atomic"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// listing computes, once per configuration in force, which tools the hooks
// built from it deny outright and with which denial.
type listing struct {
	gw    *gateway.Server
	names []string
	cache atomic.Pointer[deniedSet]
}

type deniedSet struct {
	revision, noPolicy string
	tools              map[string]*wire.Denial
}

// denied maps the tools denied outright to the denial a call would get.
func (l *listing) denied() map[string]*wire.Denial {
	rev, entries, noPolicy := l.gw.Built()
	if c := l.cache.Load(); c != nil && c.revision == rev && c.noPolicy == noPolicy {
		return c.tools
	}
	set := &deniedSet{revision: rev, noPolicy: noPolicy, tools: outrightDenials(entries, noPolicy, l.names)}
	l.cache.Store(set)
	return set.tools
}

// outrightDenials asks every enforcing (Deny) entry, in the configuration's
// order, which of the tools it denies whatever the arguments (the hooks that
// are a hooks.OutrightDenier: autonomy policies' tool-name rules, and policies
// this gateway cannot enforce); the first denial of a tool is the one a call
// would get. While the gateway denies every call for want of a policy, every
// tool is denied.
func outrightDenials(entries []hooks.Entry, noPolicy string, names []string) map[string]*wire.Denial {
	out := map[string]*wire.Denial{}
	if noPolicy != "" {
		for _, n := range names {
			out[n] = &wire.Denial{Hook: gateway.GatewayHookName, Rule: gateway.RuleNoPolicy, Reason: noPolicy}
		}
		return out
	}
	for _, e := range entries {
		d, ok := e.Hook.(hooks.OutrightDenier)
		if !ok || e.Action == hooks.ActionWarn {
			continue
		}
		for _, n := range names {
			if _, done := out[n]; done {
				continue
			}
			if v, denied := d.DeniesOutright(n); denied {
				out[n] = gateway.DenialOf(&hooks.Decision{Hook: e.Hook.Name(), Policy: e.Policy, Action: hooks.ActionDeny,
					Rule: v.Rule, Reason: v.Reason})
			}
		}
	}
	return out
}
