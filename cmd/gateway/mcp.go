package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// mcpFlags configure the MCP endpoint (/mcp) and its upstream servers.
type mcpFlags struct {
	enabled     bool
	upstreams   string
	deniedTools string
	idleTimeout time.Duration
	// maxSessions and maxSessionsPerCaller cap the open MCP sessions, in
	// total and per caller.
	maxSessions, maxSessionsPerCaller int
	// resourceURL and allowedOrigins: see mcpgate.Options.
	resourceURL, allowedOrigins string
}

// defaultMCPIdleTimeout is --mcp-session-idle-timeout's default.
const defaultMCPIdleTimeout = 5 * time.Minute

func (m *mcpFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&m.enabled, "mcp", false, "serve the MCP endpoint (streamable HTTP) at /mcp")
	fs.StringVar(&m.upstreams, "mcp-upstreams", "", "upstream MCP servers to front (YAML file; see README, MCP)")
	fs.StringVar(&m.deniedTools, "mcp-denied-tools", mcpgate.DeniedMark, "tools/list: mark or hide tools the policies deny outright")
	fs.DurationVar(&m.idleTimeout, "mcp-session-idle-timeout", defaultMCPIdleTimeout,
		"close MCP sessions idle this long, which frees their place under the session caps (0: never; only DELETE frees a place)")
	fs.IntVar(&m.maxSessions, "mcp-max-sessions", mcpgate.DefaultMaxSessions,
		"most MCP sessions open at once; a new session beyond it is refused (HTTP 503) until others close")
	fs.IntVar(&m.maxSessionsPerCaller, "mcp-max-sessions-per-caller", mcpgate.DefaultMaxSessionsPerCaller,
		"most MCP sessions one caller (by verified username) has open at once; one more is refused (HTTP 429)")
	fs.StringVar(&m.resourceURL, "mcp-resource-url", "",
		"the MCP endpoint's URL as clients reach it (e.g. https://gateway.example/mcp), named in its OAuth protected "+
			"resource metadata and its own origin (default: each request's Host, https over TLS; X-Forwarded-* is not trusted)")
	fs.StringVar(&m.allowedOrigins, "mcp-allowed-origins", "",
		"comma-separated web origins (scheme://host[:port]) besides the gateway's own allowed to call /mcp, with CORS; "+
			"a request with any other Origin header is refused (HTTP 403)")
}

// check validates the flags.
func (m *mcpFlags) check() error {
	switch {
	case m.idleTimeout < 0:
		return errors.New("--mcp-session-idle-timeout must not be negative (0: never)")
	case m.maxSessions <= 0 || m.maxSessionsPerCaller <= 0:
		return errors.New("--mcp-max-sessions and --mcp-max-sessions-per-caller must be positive")
	case !m.enabled && (m.resourceURL != "" || m.allowedOrigins != ""):
		return errors.New("--mcp-resource-url and --mcp-allowed-origins need --mcp")
	case m.maxSessionsPerCaller > m.maxSessions:
		return fmt.Errorf("--mcp-max-sessions-per-caller %d is more than --mcp-max-sessions %d", m.maxSessionsPerCaller, m.maxSessions)
	}
	return nil
}

// splitList splits a comma-separated list, dropping spaces and empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// connect connects the upstreams and adds their tools to opts; nil without --mcp-upstreams.
func (m *mcpFlags) connect(ctx context.Context, opts *gateway.Options, log *slog.Logger) (*mcpgate.Upstreams, error) {
	if m.upstreams == "" {
		return nil, nil
	}
	if !m.enabled {
		return nil, errors.New("--mcp-upstreams needs --mcp")
	}
	cfg, err := mcpgate.LoadConfig(m.upstreams)
	if err != nil {
		return nil, err
	}
	ups, err := mcpgate.Connect(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	builtins, err := tools.Builtins(opts.Workspace, gateway.ToolOptions(opts.MaxFileBytes, opts.Sandbox))
	if err != nil {
		ups.Close()
		return nil, fmt.Errorf("built-in tools: %w", err)
	}
	opts.Tools = append(builtins, ups.Tools()...)
	opts.ToolTraits = ups.Traits()
	return ups, nil
}

// handler is the gateway's HTTP handler, with /mcp when enabled (its
// callers authenticated by the gateway's authenticator of all APIs).
// issuers are the OIDC issuers named as the endpoint's authorization servers.
func (m *mcpFlags) handler(srv *gateway.Server, ups *mcpgate.Upstreams, issuers []string, log *slog.Logger) (http.Handler, error) {
	if !m.enabled {
		return srv.Handler(), nil
	}
	h, err := mcpgate.NewHandler(mcpgate.Options{
		Gateway: srv, Upstreams: ups, DeniedTools: m.deniedTools, SessionIdleTimeout: m.idleTimeout, Logger: log,
		MaxSessions: m.maxSessions, MaxSessionsPerCaller: m.maxSessionsPerCaller,
		ResourceURL: m.resourceURL, AuthorizationServers: issuers, AllowedOrigins: splitList(m.allowedOrigins),
	})
	if err != nil {
		return nil, err
	}
	log.Info("MCP endpoint enabled", "path", mcpgate.Path, "sessionIdleTimeout", m.idleTimeout,
		"maxSessions", m.maxSessions, "maxSessionsPerCaller", m.maxSessionsPerCaller,
		"resourceURL", m.resourceURL, "allowedOrigins", m.allowedOrigins, "authorizationServers", issuers)
	return mcpgate.Mount(srv.Handler(), h), nil
}
