package gateway

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// apiMCP is the api label of calls made through the MCP endpoint (internal/mcpgate).
const apiMCP = "mcp"

// ExecuteMCP runs an MCP tools/call exactly as POST /v1/tool-calls runs a
// call: the executor in force (before hooks, tool, after hooks, one audit
// record), metrics under api "mcp" and the denial sink. Before the first
// configuration it denies (rule NoPolicy).
func (s *Server) ExecuteMCP(ctx context.Context, call *hooks.Call) hooks.Result {
	return s.run(ctx, apiMCP, call)
}

// RefuseMCP audits and counts, under api "mcp", a request the MCP
// endpoint refused before it was read as a call: why is a *hooks.Refusal,
// or TooLargeError's for a body over the limit; call names what is known
// of the caller and session (nothing was read as a call, so no tool).
func (s *Server) RefuseMCP(ctx context.Context, call *hooks.Call, why error) {
	if call.Args == nil {
		call.Args = map[string]any{}
	}
	call.ArgsErr = why
	s.refuseCall(ctx, apiMCP, call)
}

// TooLargeError is why a request whose body is over limit bytes is refused
// unread (it wraps hooks.ErrTooLarge).
func TooLargeError(limit int64) error { return tooLargeErr(limit) }

// MaxBodyBytes is the request body limit (Options.MaxBodyBytes) of every
// API: the MCP endpoint applies it to its messages too.
func (s *Server) MaxBodyBytes() int64 { return s.opts.MaxBodyBytes }

// Config returns the configuration in force, nil before the first. It is
// shared: callers must not modify it.
func (s *Server) Config() *gatewayconfig.Config { return s.cur.Load().cfg }

// Built returns the revision in force ("" before the first configuration),
// the entries built from it (nil while the gateway denies every call for want
// of a policy) and, in that state, why. Callers must not modify the entries.
func (s *Server) Built() (revision string, entries []hooks.Entry, noPolicy string) {
	cur := s.cur.Load()
	if cur.cfg != nil {
		revision = cur.cfg.Revision
	}
	return revision, cur.entries, cur.noPolicy
}

// DenialOf converts an executor decision into the API's denial (nil for nil).
func DenialOf(d *hooks.Decision) *wire.Denial { return denialOf(d) }

// Callers is the authenticator of every API's callers (Options.Callers),
// which the MCP endpoint shares.
func (s *Server) Callers() *authn.Request { return s.opts.Callers }

// Registry receives the gateway's metrics (Options.Registry), which the MCP
// endpoint's join.
func (s *Server) Registry() prometheus.Registerer { return s.opts.Registry }
