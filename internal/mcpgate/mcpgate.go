// Package mcpgate is the gateway's MCP endpoint (streamable HTTP at /mcp,
// github.com/modelcontextprotocol/go-sdk) and its upstream MCP servers.
//
// Every tools/call runs through the gateway's executor exactly as POST
// /v1/tool-calls does (gateway.Server.ExecuteMCP): the hook context's session
// id is the MCP session id (Mcp-Session-Id, chosen by the gateway), the
// channel is "mcp" and the sender is the caller's authenticated identity
// (AnonymousSender only when anonymous callers are allowed). A denial is a
// tool result with isError whose text is "Tool execution denied by hook:
// <hook>" followed by lines naming the policy, rule and reason, with the
// structured denial (hook, policy, rule, reason) in
// _meta["toolhooks.dev/denial"] and, for tools without an output schema (which
// clients validate structuredContent against even in errors), in
// structuredContent.denial too. A tool's failure (a *hooks.ToolError, an
// upstream's isError result) is a tool result with isError and the tool's
// text; a call of an unknown tool is audited like any call, and so is every
// request the endpoint refuses with an HTTP error status (auditRefusals).
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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/tracing"
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
	// ResourceURL is the endpoint's URL as clients reach it (e.g.
	// https://gateway.example/mcp): the resource of its OAuth protected
	// resource metadata and its own origin. Empty: each request's Host,
	// with https when it came over TLS.
	ResourceURL string
	// AuthorizationServers are the issuers of the OIDC tokens the callers'
	// authenticator accepts, named in the protected resource metadata;
	// empty when callers get their tokens out of band (ServiceAccount or
	// static tokens).
	AuthorizationServers []string
	// AllowedOrigins are the web origins (scheme://host[:port]) besides the
	// endpoint's own whose requests are accepted, with CORS; a request
	// with any other Origin is refused with 403.
	AllowedOrigins []string
	// Logger logs the endpoint's events; nil means slog.Default().
	Logger *slog.Logger
}

// Handler is the MCP endpoint.
type Handler struct {
	gw       *gateway.Server
	resource *resource
	server   *mcp.Server
	http     http.Handler
	listing  listing
	hide     bool
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
	res, err := newResource(opts.ResourceURL, opts.AuthorizationServers)
	if err != nil {
		return nil, err
	}
	origins, err := newOrigins(res, opts.AllowedOrigins)
	if err != nil {
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
	h := &Handler{gw: opts.Gateway, resource: res, hide: opts.DeniedTools == DeniedHide, typed: map[string]bool{}, descs: descs}
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
	h.server.AddReceivingMiddleware(h.filterList, limits.claim, h.auditUnknownTools)
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
	edges := newCancellations().protocolEdges(limits.middleware(streamable))
	strict := strictMessages(edges, opts.Gateway.MaxBodyBytes())
	h.http = h.auditRefusals(origins.middleware(authMiddleware(opts.Gateway.Callers(), res, strict)))
	return h, nil
}

// ServeHTTP serves MCP's streamable HTTP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// Mount serves h at Path, its protected resource metadata at
// MetadataPath and MetadataRootPath (without authentication), a refusal of
// OAuth client registration at RegistrationPath, and everything else with gw.
func Mount(gw http.Handler, h *Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	mux.Handle(MetadataPath, h.resource)
	mux.Handle(MetadataRootPath, h.resource)
	mux.HandleFunc(RegistrationPath, refuseRegistration)
	mux.Handle("/", gw)
	return mux
}

// callTool runs one tools/call through the gateway.
func (h *Handler) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	call := callOf(req)
	if req.Extra != nil {
		// The decision span is a child of the traceparent of the HTTP
		// request that carried the call.
		ctx = tracing.Extract(ctx, req.Extra.Header)
	}
	if token := req.Params.GetProgressToken(); token != nil {
		notifyCtx, session := ctx, req.Session
		gate := &progressGate{}
		// The call is answered once this returns: its token is over for
		// the client, so a notification still on its way from an upstream
		// (a timed-out or cancelled call goes on there for a while) is
		// dropped.
		defer gate.close()
		ctx = withProgress(ctx, func(p *mcp.ProgressNotificationParams) {
			gate.forward(func() {
				p.ProgressToken = token
				_ = session.NotifyProgress(notifyCtx, p)
			})
		})
	}
	ctx, up := withSlot(ctx)
	res := h.gw.ExecuteMCP(ctx, call)
	return toResult(&res, up, h.typed[call.Tool]), nil
}

// progressGate forwards a call's progress notifications until the call is
// answered, and none after: a client drops, and reports as an error, a
// notification whose progress token belongs to a request it has its answer
// to.
type progressGate struct {
	mu     sync.Mutex
	closed bool
}

// forward runs send unless the gate is closed; close waits for it.
func (g *progressGate) forward(send func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		send()
	}
}

// close lets no notification through any more.
func (g *progressGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// callOf is the hook call of a tools/call request.
func callOf(req *mcp.CallToolRequest) *hooks.Call {
	args := string(req.Params.Arguments)
	if args == "null" { // as POST /v1/tool-calls: null means no arguments
		args = ""
	}
	call := hooks.NewCall(req.Params.Name, args)
	callerContext(call, req.Session, req.Extra)
	return call
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
// output schema) get no structuredContent in denials. A denial's text names
// the hook on its first line (the compatible denial text) and the policy,
// rule and reason on the next ones, since many hosts show the model only
// text contents; a denial's structuredContent is repeated as JSON text, and
// so is an upstream's when its result has no text. An upstream's result
// that a result policy scanned is answered with the scanned text alone (its
// other contents and structuredContent were not scanned, so they never
// leave); a withheld result is an error whose text names the hook.
func toResult(res *hooks.Result, up *slot, typed bool) *mcp.CallToolResult {
	out := &mcp.CallToolResult{}
	full, upErr := up.get()
	switch {
	case full != nil && len(res.Filtering) == 0 && (res.Status == hooks.StatusSucceeded || res.Status == hooks.StatusFailed):
		c := *full // the upstream's own result, passed through
		out = &c
		out.IsError = res.Status == hooks.StatusFailed
		out.Content = withStructuredText(c.Content, c.StructuredContent)
	case res.Status == hooks.StatusSucceeded:
		out.Content = []mcp.Content{&mcp.TextContent{Text: res.Output}}
	case res.Status == hooks.StatusFailed && len(res.Filtering) > 0:
		out.IsError = true
		out.Content = []mcp.Content{&mcp.TextContent{Text: res.Output}}
	case res.Status == hooks.StatusDenied:
		d := gateway.DenialOf(res.Denial)
		out.IsError = true
		out.Content = []mcp.Content{&mcp.TextContent{Text: denialText(res.Output, d)}}
		if !typed {
			out.StructuredContent = map[string]any{"denial": d}
			out.Content = appendJSONText(out.Content, out.StructuredContent)
		}
		out.Meta = mcp.Meta{MetaDenial: d}
	default: // failed, timed out, unknown tool
		out.IsError = true
		text := res.Output
		if upErr != nil && res.Status == hooks.StatusFailed {
			text += " " + upErr.Error()
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

// denialText is a denial's text content: first the denial text the caller
// matches on, then a line each for the policy, rule and reason that are set.
func denialText(first string, d *wire.Denial) string {
	var b strings.Builder
	b.WriteString(first)
	if d == nil {
		return b.String()
	}
	if p := d.Policy; p != nil && p.Name != "" {
		b.WriteString("\nPolicy: ")
		if p.Namespace != "" {
			b.WriteString(p.Namespace + "/")
		}
		b.WriteString(p.Name)
	}
	for _, l := range [...]struct{ label, value string }{{"Rule", d.Rule}, {"Reason", d.Reason}} {
		if l.value != "" {
			b.WriteString("\n" + l.label + ": " + l.value)
		}
	}
	return b.String()
}

// withStructuredText returns content with structured's JSON appended as a
// text content, as MCP recommends for clients that read only text, when
// structured is set and content holds no text: a tool whose result has text
// already said it in that text, and repeating it would double what the model
// reads.
func withStructuredText(content []mcp.Content, structured any) []mcp.Content {
	if structured == nil {
		return content
	}
	for _, c := range content {
		if _, ok := c.(*mcp.TextContent); ok {
			return content
		}
	}
	return appendJSONText(content, structured)
}

// appendJSONText returns content with v's JSON appended as a text content.
func appendJSONText(content []mcp.Content, v any) []mcp.Content {
	j, err := json.Marshal(v)
	if err != nil {
		return content
	}
	return append(slices.Clip(content), &mcp.TextContent{Text: string(j)})
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

// serves reports whether the MCP server serves the tool named name now (an
// upstream may have withdrawn one it offered at start).
func (h *Handler) serves(name string) bool {
	h.descsMu.Lock()
	defer h.descsMu.Unlock()
	return slices.ContainsFunc(h.descs, func(d *mcp.Tool) bool { return d.Name == name })
}

// descriptors are the tools served, unfiltered.
func (h *Handler) descriptors() []*mcp.Tool {
	h.descsMu.Lock()
	defer h.descsMu.Unlock()
	return slices.Clone(h.descs)
}
