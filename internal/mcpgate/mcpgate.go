// Package mcpgate is the gateway's MCP endpoint (streamable HTTP at /mcp,
// github.com/modelcontextprotocol/go-sdk) and its upstream MCP servers.
//
// Every tools/call runs through the gateway's executor exactly as POST
// /v1/tool-calls does (gateway.Server.ExecuteMCP): the hook context's session
// id is the MCP session id (Mcp-Session-Id, chosen by the gateway), the
// channel is "mcp" and the sender is the caller's authenticated identity
// (AnonymousSender only when anonymous callers are allowed). A denial is a
// tool result with isError, the text "Tool execution denied by hook:
// <hook>" and the structured denial (hook, policy, rule, reason) in
// _meta["toolhooks.dev/denial"] and, for tools without an output schema (which
// clients validate structuredContent against even in errors), in
// structuredContent.denial too.
//
// Upstream MCP servers (stdio processes or streamable-HTTP URLs, see Config)
// are connected at start; their tools join the gateway's tools as
// <upstream>_<tool> and pass the same hooks.
//
// tools/list shows the built-in and upstream tools. A tool that the policies
// in force deny by its name alone (an AutonomyPolicy's tool deny or allow
// globs, readonly mode for a tool not known to be read-only, the shell
// disabled; or no configuration yet) is marked (DeniedMark: its description
// starts with "[denied by policy]" and _meta["toolhooks.dev/denial"] holds
// the denial a call would get) or left out (DeniedHide). Either way a call
// still reaches the hooks and gets that denial, never "unknown tool".
//
// Sessions are capped in total (Options.MaxSessions) and per caller, by
// verified username (Options.MaxSessionsPerCaller). A request without an
// Mcp-Session-Id over a cap opens nothing: it is answered with HTTP 429 (the
// caller's cap) or 503 (the total) and a JSON-RPC error CodeSessionLimit that
// names the cap, its value and the idle timeout. A session frees its place
// when it ends: DELETE, the idle timeout (Options.SessionIdleTimeout; with
// none, only DELETE), or any other close. The metrics toolhooks_mcp_sessions
// and toolhooks_mcp_sessions_refused_total{cap} join the gateway's.
package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Path is where the MCP endpoint is served.
const Path = "/mcp"

// ChannelID is the hook context's channel of MCP calls.
const ChannelID = "mcp"

// Meta keys of results and listed tools.
const (
	MetaDenial   = "toolhooks.dev/denial"
	MetaWarnings = "toolhooks.dev/warnings"
)

// DeniedMarker starts the description of a listed tool the policies deny outright.
const DeniedMarker = "[denied by policy] "

// How tools/list shows tools the policies deny outright.
const (
	DeniedMark = "mark"
	DeniedHide = "hide"
)

// Options configure the MCP endpoint. Gateway is required; its callers'
// authenticator (gateway.Options.Callers) authenticates MCP requests too.
type Options struct {
	// Gateway runs every call.
	Gateway *gateway.Server
	// Upstreams are the connected upstream servers; nil for none.
	Upstreams *Upstreams
	// DeniedTools is DeniedMark (default) or DeniedHide.
	DeniedTools string
	// SessionIdleTimeout closes MCP sessions idle this long (0: never, so
	// that only DELETE frees a session's place under the caps below).
	SessionIdleTimeout time.Duration
	// MaxSessions caps the sessions open at once (0: DefaultMaxSessions);
	// a request that would open one more is refused with HTTP 503.
	MaxSessions int
	// MaxSessionsPerCaller caps the sessions one caller (by verified
	// username) has open at once (0: DefaultMaxSessionsPerCaller, or
	// MaxSessions if less); one more is refused with HTTP 429. It must not
	// exceed MaxSessions.
	MaxSessionsPerCaller int
	// Logger logs the endpoint's events; nil means slog.Default().
	Logger *slog.Logger
}

// Handler is the MCP endpoint.
type Handler struct {
	gw      *gateway.Server
	server  *mcp.Server
	http    http.Handler
	listing listing
	hide    bool
	// typed are the tools with an output schema: clients validate a
	// structuredContent against it even in error results, so their denials
	// carry the structured denial in _meta only.
	typed map[string]bool
	lists *listWatch

	descsMu sync.Mutex
	descs   []*mcp.Tool // the tools served, as tools/list shows them unfiltered
}

// NewHandler builds the endpoint serving the built-in tools (the gateway's
// defaults, internal/tools) and the upstreams' tools.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Gateway == nil {
		return nil, errors.New("mcp: a gateway is required")
	}
	if opts.Gateway.Callers() == nil {
		return nil, errors.New("mcp: callers must authenticate: the gateway has no authenticator for callers")
	}
	switch opts.DeniedTools {
	case "":
		opts.DeniedTools = DeniedMark
	case DeniedMark, DeniedHide:
	default:
		return nil, fmt.Errorf("mcp: denied tools must be %q or %q, not %q", DeniedMark, DeniedHide, opts.DeniedTools)
	}
	if err := checkSessionLimits(&opts); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	limits, err := newSessionLimits(opts.Gateway.Registry(), opts.MaxSessions, opts.MaxSessionsPerCaller, opts.SessionIdleTimeout)
	if err != nil {
		return nil, fmt.Errorf("mcp: session metrics: %w", err)
	}
	descs := builtinTools()
	if opts.Upstreams != nil {
		descs = append(descs, opts.Upstreams.Descriptors()...)
	}
	h := &Handler{gw: opts.Gateway, hide: opts.DeniedTools == DeniedHide, typed: map[string]bool{}, descs: descs}
	if h.lists, err = newListWatch(h, opts.Gateway.Registry()); err != nil {
		return nil, fmt.Errorf("mcp: list metrics: %w", err)
	}
	names := make([]string, len(descs))
	for i, d := range descs {
		names[i] = d.Name
		if d.OutputSchema != nil {
			h.typed[d.Name] = true
		}
	}
	h.listing = listing{gw: opts.Gateway, names: names}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "toolhooks-gateway", Version: "v1alpha1"},
		&mcp.ServerOptions{Logger: opts.Logger, PageSize: 10000, SupportedProtocolVersions: protocolVersions()})
	for _, d := range descs {
		h.server.AddTool(d, h.callTool)
	}
	h.server.AddReceivingMiddleware(h.filterList, limits.claim)
	h.server.AddSendingMiddleware(h.lists.only)
	opts.Gateway.WatchConfig(h.lists.recheck)
	if opts.Upstreams != nil {
		opts.Upstreams.watch(h.upstreamToolsChanged)
	}
	// JSON responses rather than an SSE stream per POST: it saves work on
	// every call. With them the SDK sends the notifications of a call (an
	// upstream's progress) on the session's standalone stream (GET), which
	// the go-sdk, TypeScript and Python clients open.
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.server },
		&mcp.StreamableHTTPOptions{Logger: opts.Logger, SessionTimeout: opts.SessionIdleTimeout, JSONResponse: true})
	h.http = authMiddleware(opts.Gateway.Callers(), strictMessages(newCancellations().protocolEdges(limits.middleware(streamable))))
	return h, nil
}

// ServeHTTP serves MCP's streamable HTTP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// Mount serves mcp at Path and everything else with gw.
func Mount(gw, mcpHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, mcpHandler)
	mux.Handle("/", gw)
	return mux
}

// callTool runs one tools/call through the gateway.
func (h *Handler) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := string(req.Params.Arguments)
	if args == "null" { // as POST /v1/tool-calls: null means no arguments
		args = ""
	}
	call := hooks.NewCall(req.Params.Name, args)
	callerContext(call, req.Session, req.Extra)
	if token := req.Params.GetProgressToken(); token != nil {
		notifyCtx, session := ctx, req.Session
		ctx = withProgress(ctx, func(p *mcp.ProgressNotificationParams) {
			p.ProgressToken = token
			_ = session.NotifyProgress(notifyCtx, p)
		})
	}
	ctx, up := withSlot(ctx)
	res := h.gw.ExecuteMCP(ctx, call)
	return toResult(&res, up, h.typed[call.Tool]), nil
}

// callerContext fills in call's session, channel and caller from an MCP
// request's session and extra (the verified token).
func callerContext(call *hooks.Call, session *mcp.ServerSession, extra *mcp.RequestExtra) {
	call.SessionID = session.ID()
	call.ChannelID = ChannelID
	var ti *auth.TokenInfo
	if extra != nil {
		ti = extra.TokenInfo
	}
	call.Caller = callerOf(ti)
	call.SenderID = call.Caller.Username
}

// toResult turns the executor's result into MCP's; typed tools (with an
// output schema) get no structuredContent in denials.
func toResult(res *hooks.Result, up *slot, typed bool) *mcp.CallToolResult {
	out := &mcp.CallToolResult{}
	switch res.Status {
	case hooks.StatusSucceeded:
		if full, _ := up.get(); full != nil {
			c := *full // the upstream's own result, passed through
			out = &c
		} else {
			out.Content = []mcp.Content{&mcp.TextContent{Text: res.Output}}
		}
	case hooks.StatusDenied:
		d := gateway.DenialOf(res.Denial)
		out.IsError = true
		out.Content = []mcp.Content{&mcp.TextContent{Text: res.Output}}
		if !typed {
			out.StructuredContent = map[string]any{"denial": d}
		}
		out.Meta = mcp.Meta{MetaDenial: d}
	default: // failed, timed out, unknown tool
		out.IsError = true
		text := res.Output
		if _, err := up.get(); err != nil && res.Status == hooks.StatusFailed {
			text += " " + err.Error()
		}
		out.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	}
	if len(res.Warnings) > 0 {
		ws := make([]*wire.Denial, len(res.Warnings))
		for i := range res.Warnings {
			ws[i] = gateway.DenialOf(&res.Warnings[i])
		}
		meta := mcp.Meta{}
		maps.Copy(meta, out.Meta)
		meta[MetaWarnings] = ws
		out.Meta = meta
	}
	return out
}

// filterList marks or hides, in tools/list answers, the tools the policies
// in force deny outright to the session's caller.
func (h *Handler) filterList(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := res.(*mcp.ListToolsResult)
		if err != nil || method != "tools/list" || !ok {
			return res, err
		}
		lreq, ok := req.(*mcp.ListToolsRequest)
		if !ok { // without its caller, no listing can be filtered for it
			return nil, fmt.Errorf("mcp: tools/list request of type %T", req)
		}
		caller := &hooks.Call{}
		callerContext(caller, lreq.Session, lreq.Extra)
		out := *lr
		out.Tools = h.visible(lr.Tools, caller)
		h.lists.saw(lreq.Session, caller, out.Tools)
		return &out, nil
	}
}

// visible is tools as caller's tools/list shows them: those the policies
// in force deny outright marked or left out.
func (h *Handler) visible(tools []*mcp.Tool, caller *hooks.Call) []*mcp.Tool {
	denied := h.listing.denied(caller)
	out := make([]*mcp.Tool, 0, len(tools))
	for _, t := range tools {
		d, isDenied := denied[t.Name]
		switch {
		case !isDenied:
			out = append(out, t)
		case !h.hide:
			m := *t
			m.Description = DeniedMarker + d.Reason + " " + t.Description
			m.Meta = mcp.Meta{}
			maps.Copy(m.Meta, t.Meta)
			m.Meta[MetaDenial] = d
			out = append(out, &m)
		}
	}
	return out
}

// descriptors are the tools served, unfiltered.
func (h *Handler) descriptors() []*mcp.Tool {
	h.descsMu.Lock()
	defer h.descsMu.Unlock()
	return slices.Clone(h.descs)
}
