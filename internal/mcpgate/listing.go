package mcpgate

import (
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// listing computes, for one caller, which tools the hooks built from the
// configuration in force deny outright and with which denial. It asks the
// hooks on every tools/list: a policy's subjects may bind one caller and not
// another, and asking is cheap next to the request itself (see
// BenchmarkOutrightDenials).
type listing struct {
	gw    *gateway.Server
	names []string
}

// denied maps the tools denied outright to the denial a call of them by
// caller would get. caller carries the session, channel, sender and verified
// identity of the MCP session asking; its tool and arguments are not read.
func (l *listing) denied(caller *hooks.Call) map[string]*wire.Denial {
	_, entries, noPolicy := l.gw.Built()
	return outrightDenials(entries, noPolicy, l.names, caller)
}

// outrightDenials asks every enforcing (Deny) entry, in the configuration's
// order, which of the tools it denies to caller whatever the arguments (the
// hooks that are a hooks.OutrightDenier: autonomy policies' tool-name rules
// for the callers their subjects bind, and policies this gateway cannot
// enforce); the first denial of a tool is the one a call would get. While
// the gateway denies every call for want of a policy, every tool is denied.
func outrightDenials(entries []hooks.Entry, noPolicy string, names []string, caller *hooks.Call) map[string]*wire.Denial {
	out := map[string]*wire.Denial{}
	if noPolicy != "" {
		for _, n := range names {
			out[n] = &wire.Denial{Hook: gateway.GatewayHookName, Rule: gateway.RuleNoPolicy, Reason: noPolicy}
		}
		return out
	}
	probe := *caller
	probe.Args, probe.ArgsJSON, probe.ArgsErr = map[string]any{}, "", nil
	for _, e := range entries {
		d, ok := e.Hook.(hooks.OutrightDenier)
		if !ok || e.Action == hooks.ActionWarn {
			continue
		}
		for _, n := range names {
			if _, done := out[n]; done {
				continue
			}
			probe.Tool = n
			if v, denied := d.DeniesOutright(&probe); denied {
				out[n] = gateway.DenialOf(&hooks.Decision{Hook: e.Hook.Name(), Policy: e.Policy, Action: hooks.ActionDeny,
					Rule: v.Rule, Reason: v.Reason})
			}
		}
	}
	return out
}
