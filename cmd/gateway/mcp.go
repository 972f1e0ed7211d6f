package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayk8s"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// DefaultMCPAudience is the audience cluster-mode MCP callers' tokens must be bound to.
const DefaultMCPAudience = "toolhooks.dev/mcp"

// mcpFlags configure the MCP endpoint (/mcp) and its upstream servers.
type mcpFlags struct {
	enabled        bool
	tokensFile     string
	allowAnonymous bool
	audience       string
	upstreams      string
	deniedTools    string
	idleTimeout    time.Duration
	tokenCacheTTL  time.Duration
}

// DefaultMCPTokenCacheTTL is how long a cluster-mode MCP caller's token,
// once accepted by a TokenReview, is accepted without asking again: the
// longest a deleted ServiceAccount or a revoked token keeps working beyond
// the API server's own cache of successful authentications.
const DefaultMCPTokenCacheTTL = time.Minute

func (m *mcpFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&m.enabled, "mcp", false, "serve the MCP endpoint (streamable HTTP) at /mcp")
	fs.StringVar(&m.tokensFile, "mcp-tokens-file", "",
		"standalone mode: MCP callers' bearer tokens and identities (YAML: tokens: [{identity, token}])")
	fs.BoolVar(&m.allowAnonymous, "mcp-allow-anonymous", false,
		"accept MCP requests without a bearer token (sender "+mcpgate.AnonymousSender+")")
	fs.StringVar(&m.audience, "mcp-audience", DefaultMCPAudience,
		"cluster mode: the audience MCP callers' ServiceAccount tokens must be bound to (checked by TokenReview)")
	fs.StringVar(&m.upstreams, "mcp-upstreams", "", "upstream MCP servers to front (YAML file; see README, MCP)")
	fs.StringVar(&m.deniedTools, "mcp-denied-tools", mcpgate.DeniedMark, "tools/list: mark or hide tools the policies deny outright")
	fs.DurationVar(&m.idleTimeout, "mcp-session-idle-timeout", 30*time.Minute, "close MCP sessions idle this long (0: never)")
	fs.DurationVar(&m.tokenCacheTTL, "mcp-token-cache-ttl", DefaultMCPTokenCacheTTL,
		"cluster mode: accept an MCP caller's token this long after a TokenReview accepted it, the longest a revoked "+
			"token keeps working beyond the API server's own token cache (10s in kube-apiserver) (0: review every request)")
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

// handler is the gateway's HTTP handler, with /mcp when enabled.
func (m *mcpFlags) handler(srv *gateway.Server, ups *mcpgate.Upstreams, reviews authnclient.TokenReviewInterface,
	log *slog.Logger) (http.Handler, error) {
	if !m.enabled {
		if m.tokensFile != "" || m.allowAnonymous {
			return nil, errors.New("--mcp-tokens-file and --mcp-allow-anonymous need --mcp")
		}
		return srv.Handler(), nil
	}
	if m.tokenCacheTTL < 0 {
		return nil, fmt.Errorf("--mcp-token-cache-ttl must not be negative, got %s", m.tokenCacheTTL)
	}
	var authn gateway.Authenticator
	switch {
	case m.tokensFile != "" && reviews != nil:
		return nil, errors.New("--mcp-tokens-file is for standalone use; in cluster mode MCP callers are authenticated by TokenReview")
	case m.tokensFile != "":
		t, err := mcpgate.LoadStaticTokens(m.tokensFile)
		if err != nil {
			return nil, err
		}
		authn = t
	case reviews != nil:
		authn = &gatewayk8s.TokenReview{Client: reviews, Audience: m.audience, AnyUser: true}
		if m.tokenCacheTTL > 0 {
			authn = mcpgate.NewCached(authn, m.tokenCacheTTL, 10000)
		}
	}
	h, err := mcpgate.NewHandler(mcpgate.Options{
		Gateway: srv, Upstreams: ups, Authenticator: authn, AllowAnonymous: m.allowAnonymous,
		DeniedTools: m.deniedTools, SessionIdleTimeout: m.idleTimeout, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("MCP endpoint enabled", "path", mcpgate.Path, "anonymous", m.allowAnonymous, "tokenReview", reviews != nil)
	return mcpgate.Mount(srv.Handler(), h), nil
}
