package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
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
}

func (m *mcpFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&m.enabled, "mcp", false, "serve the MCP endpoint (streamable HTTP) at /mcp")
	fs.StringVar(&m.upstreams, "mcp-upstreams", "", "upstream MCP servers to front (YAML file; see README, MCP)")
	fs.StringVar(&m.deniedTools, "mcp-denied-tools", mcpgate.DeniedMark, "tools/list: mark or hide tools the policies deny outright")
	fs.DurationVar(&m.idleTimeout, "mcp-session-idle-timeout", 30*time.Minute, "close MCP sessions idle this long (0: never)")
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
	builtins, err := tools.Builtins(opts.Workspace, tools.Options{Sandbox: opts.Sandbox})
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
func (m *mcpFlags) handler(srv *gateway.Server, ups *mcpgate.Upstreams, log *slog.Logger) (http.Handler, error) {
	if !m.enabled {
		return srv.Handler(), nil
	}
	h, err := mcpgate.NewHandler(mcpgate.Options{
		Gateway: srv, Upstreams: ups, DeniedTools: m.deniedTools, SessionIdleTimeout: m.idleTimeout, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("MCP endpoint enabled", "path", mcpgate.Path)
	return mcpgate.Mount(srv.Handler(), h), nil
}
