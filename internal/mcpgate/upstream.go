package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/tracing"
)

// reconnectBackoff is how long an upstream whose connection attempt failed
// answers calls with that failure before trying again.
const reconnectBackoff = time.Second

// Upstreams are the connected upstream MCP servers and the tools they offer.
type Upstreams struct {
	list []*upstream
	// onChange is told of an upstream's new tool list (see watch).
	onChange atomic.Pointer[func(u *upstream, listed []*mcp.Tool)]
	tools    []hooks.Tool
	descs    []*mcp.Tool
	traits   hooks.ToolTraits
}

// Connect connects to every configured upstream and lists its tools, each
// within its connectTimeout. Any failure is an error naming the upstream: a
// gateway does not start with tools missing. Tools are listed once, here.
func Connect(ctx context.Context, cfg *Config, log *slog.Logger) (*Upstreams, error) {
	if log == nil {
		log = slog.Default()
	}
	us := &Upstreams{traits: hooks.ToolTraits{PathArgs: map[string][]string{}}}
	for i := range cfg.Upstreams {
		c := cfg.Upstreams[i]
		u := &upstream{cfg: c, log: log.With("upstream", c.Name), owner: us, progress: map[string]*progressSink{}, started: make(chan struct{})}
		us.list = append(us.list, u) // closed by Close even when a later one fails
		if err := u.start(ctx); err != nil {
			us.Close()
			return nil, err
		}
		if err := us.add(u); err != nil {
			us.Close()
			return nil, err
		}
	}
	return us, nil
}

// add registers u's tools under their prefixed names with their traits.
func (us *Upstreams) add(u *upstream) error {
	offered := make([]string, 0, len(u.listed))
	for _, t := range u.listed {
		offered = append(offered, t.Name)
	}
	for name := range u.cfg.Tools {
		if !slices.Contains(offered, name) {
			return fmt.Errorf("upstream %q: tools.%s is configured but the upstream offers no such tool (it offers %s)",
				u.cfg.Name, name, strings.Join(offered, ", "))
		}
	}
	for _, t := range u.listed {
		name := u.cfg.Name + "_" + t.Name
		desc := *t
		desc.Name = name
		us.descs = append(us.descs, &desc)
		us.tools = append(us.tools, &upstreamTool{u: u, name: name, remote: t.Name})
		tc := u.cfg.Tools[t.Name]
		if len(tc.PathArgs) > 0 {
			us.traits.PathArgs[name] = append([]string(nil), tc.PathArgs...)
		}
		if tc.ReadOnly {
			us.traits.ReadOnlyTools = append(us.traits.ReadOnlyTools, name)
		}
	}
	return nil
}

// Tools are the upstream tools for the gateway's executor (gateway.Options.Tools).
func (us *Upstreams) Tools() []hooks.Tool { return us.tools }

// Descriptors are the upstream tools as MCP lists them, under their prefixed names.
func (us *Upstreams) Descriptors() []*mcp.Tool { return us.descs }

// Traits are the configured path arguments and read-only tools (gateway.Options.ToolTraits).
func (us *Upstreams) Traits() hooks.ToolTraits { return us.traits }

// watch has f told of each new tool list an upstream announces (its
// notifications/tools/list_changed, then a re-listing).
func (us *Upstreams) watch(f func(u *upstream, listed []*mcp.Tool)) { us.onChange.Store(&f) }

// Close disconnects every upstream, stopping stdio processes.
func (us *Upstreams) Close() {
	for _, u := range us.list {
		u.close()
	}
}

// upstream is one upstream server's connection, re-established on demand
// after it breaks.
type upstream struct {
	cfg    UpstreamConfig
	log    *slog.Logger
	listed []*mcp.Tool // as listed at start
	// started is closed once start has listed the tools (or failed): an
	// upstream may announce a list change while it is being listed.
	started chan struct{}
	owner   *Upstreams

	progressMu   sync.Mutex
	progress     map[string]*progressSink // by the progress token sent upstream
	progressNext uint64

	// withdrawn are the tools listed at start that the upstream no longer
	// offers (by its own name): their calls fail without reaching it.
	withdrawn sync.Map

	transportOnce sync.Once
	transport     *http.Transport // HTTP upstreams only

	mu      sync.Mutex
	sess    *mcp.ClientSession
	lastErr error     // the last failed connection attempt
	lastTry time.Time // when it was made
	closed  bool
}

// start connects and lists the tools.
func (u *upstream) start(ctx context.Context) error {
	defer close(u.started)
	timeout, _ := u.cfg.connectTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, err := u.connect(cctx)
	if err != nil {
		return fmt.Errorf("upstream %q: connecting: %w", u.cfg.Name, err)
	}
	u.sess = sess
	for t, err := range sess.Tools(cctx, nil) {
		if err != nil {
			return fmt.Errorf("upstream %q: listing tools: %w", u.cfg.Name, err)
		}
		u.listed = append(u.listed, t)
	}
	u.log.Info("Upstream MCP server connected", "tools", len(u.listed))
	return nil
}

// connect opens a new client session.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	var tr mcp.Transport
	switch {
	case u.cfg.Stdio != nil:
		s := u.cfg.Stdio
		cmd := exec.Command(s.Command, s.Args...) //nolint:gosec // the operator's configured upstream command
		cmd.Dir = s.Dir
		cmd.Env = upstreamEnv(s.Env)
		cmd.Stderr = &logWriter{log: u.log}
		tr = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	default:
		tr = &mcp.StreamableClientTransport{
			Endpoint: u.cfg.HTTP.URL,
			// The trace context of each call (its tool span, or the caller's
			// traceparent) goes upstream with the call's requests.
			HTTPClient: &http.Client{Transport: tracing.Transport{
				Next: headerTransport{headers: u.cfg.HTTP.Headers, next: u.httpTransport()},
			}},
			MaxRetries: -1,
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolhooks-gateway", Version: "v1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: u.onProgress,
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			go u.relist(req.Session) // listing needs the session's reader, which called this
		},
	})
	return client.Connect(ctx, tr, nil)
}

// maxIdleConnsPerUpstream is how many idle keep-alive connections the
// gateway keeps to each HTTP upstream. Every tools/call is one POST, so the
// connections needed are the calls in flight; http.DefaultTransport keeps 2,
// and with more calls in flight every extra call dialled (and later closed)
// a TCP connection of its own, which cost about a tenth of the gateway's CPU
// per call at 64 calls in flight (make bench-mcp).
const maxIdleConnsPerUpstream = 256

// httpTransport is the upstream's HTTP transport, shared by its sessions
// (reconnects included) so that their keep-alive connections are reused.
func (u *upstream) httpTransport() http.RoundTripper {
	u.transportOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = maxIdleConnsPerUpstream
		t.MaxIdleConnsPerHost = maxIdleConnsPerUpstream
		u.transport = t
	})
	return u.transport
}

// session returns the live session, reconnecting (at most once per
// reconnectBackoff) when the previous one broke.
func (u *upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errors.New("the gateway is shutting down")
	}
	if u.sess != nil {
		return u.sess, nil
	}
	if u.lastErr != nil && time.Since(u.lastTry) < reconnectBackoff {
		return nil, u.lastErr
	}
	timeout, _ := u.cfg.connectTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, err := u.connect(cctx)
	u.lastTry = time.Now()
	if err != nil {
		u.lastErr = fmt.Errorf("reconnecting: %w", u.scrub(err, ""))
		return nil, u.lastErr
	}
	u.log.Info("Upstream MCP server reconnected")
	u.sess, u.lastErr = sess, nil
	return sess, nil
}

// broken forgets sess after a transport failure, so the next call reconnects.
func (u *upstream) broken(sess *mcp.ClientSession, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess == sess {
		u.sess = nil
		u.log.Warn("Upstream MCP server connection failed; reconnecting on the next call", "error", err)
		go func() { _ = sess.Close() }()
	}
}

func (u *upstream) close() {
	u.mu.Lock()
	sess := u.sess
	u.sess, u.closed = nil, true
	u.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	if u.transport != nil {
		u.transport.CloseIdleConnections()
	}
}

// call calls the upstream tool remote. A transport failure (the process
// died, the URL is down) is an error; the tool's own error is a result
// with IsError.
func (u *upstream) call(ctx context.Context, remote string, args json.RawMessage) (*mcp.CallToolResult, error) {
	sess, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	if _, gone := u.withdrawn.Load(remote); gone {
		return nil, fmt.Errorf("the upstream no longer offers the tool %q", remote)
	}
	params := &mcp.CallToolParams{Name: remote, Arguments: args}
	if fwd := progressFrom(ctx); fwd != nil {
		token, sink := u.expectProgress(fwd)
		defer u.endProgress(token, sink)
		params.SetProgressToken(token)
	}
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The caller's cancellation and deadline end the call in flight; the SDK
	// then sends the upstream notifications/cancelled.
	stop := context.AfterFunc(ctx, cancel)
	res, err := sess.CallTool(callCtx, params)
	if stop() {
		// The call ended first. The caller's context ends as soon as it has
		// the result, while go-sdk is still reading the rest of the
		// upstream's response stream (an SSE stream ends after the
		// response event) to reuse the connection: ending the request's
		// context then would abort that read and close the connection, and
		// the next call would dial a new one. So the request's context ends
		// a little later.
		time.AfterFunc(streamDrainGrace, cancel)
	}
	if err != nil {
		var rpcErr *jsonrpc.Error
		if ctx.Err() == nil && !errors.As(err, &rpcErr) {
			u.broken(sess, err) // the connection failed; a JSON-RPC error answer means it works
		}
		return nil, u.scrub(err, sess.ID())
	}
	return res, nil
}

// scrub hides from err's text, which reaches the caller, what only the
// gateway may know: the upstream session's id (go-sdk names it in
// connection errors, and it lets whoever holds it act in that session) and
// the upstream's URL, which may carry credentials in its query.
func (u *upstream) scrub(err error, sessionID string) error {
	text := err.Error()
	if sessionID != "" {
		text = strings.ReplaceAll(text, sessionID, "[redacted]")
	}
	if u.cfg.HTTP != nil && u.cfg.HTTP.URL != "" {
		text = strings.ReplaceAll(text, u.cfg.HTTP.URL, "[upstream URL]")
		if pu, perr := url.Parse(u.cfg.HTTP.URL); perr == nil && pu.User != nil {
			// net/http names the URL with its password masked so.
			masked := strings.Replace(pu.String(), pu.User.String()+"@", pu.User.Username()+":***@", 1)
			text = strings.ReplaceAll(text, masked, "[upstream URL]")
		}
	}
	return &scrubbedError{err: err, text: text}
}

// scrubbedError is an error whose text had secrets removed; it still wraps
// the original for errors.Is and errors.As.
type scrubbedError struct {
	err  error
	text string
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }

// progressFunc forwards one progress notification of an upstream call to
// the MCP client that made the call (under the client's progress token).
type progressFunc func(*mcp.ProgressNotificationParams)

type progressKey struct{}

// withProgress has the upstream call made with ctx forward its progress with f.
func withProgress(ctx context.Context, f progressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

func progressFrom(ctx context.Context) progressFunc {
	f, _ := ctx.Value(progressKey{}).(progressFunc)
	return f
}

// progressSettle bounds how long an upstream call that has its result waits
// for the progress notifications the upstream sent before that result: the
// go-sdk client hands notifications to their handler on a queue of their
// own while it delivers the result at once, so the last ones may come
// after it. Forwarded after the result, a client would drop them (their
// token ended with the call). A notification whose progress reaches its
// total ends the wait at once.
const progressSettle = 100 * time.Millisecond

// progressSink forwards the progress of one upstream call.
type progressSink struct {
	forward progressFunc
	final   chan struct{} // closed by a notification whose progress reaches its total
	once    sync.Once
}

// expectProgress returns a new progress token for an upstream call whose
// progress f forwards.
func (u *upstream) expectProgress(f progressFunc) (string, *progressSink) {
	u.progressMu.Lock()
	defer u.progressMu.Unlock()
	u.progressNext++
	token := fmt.Sprintf("toolhooks-%d", u.progressNext)
	sink := &progressSink{forward: f, final: make(chan struct{})}
	u.progress[token] = sink
	return token, sink
}

// endProgress ends the forwarding of a call's progress once the
// notifications sent before its result have been forwarded (progressSettle).
func (u *upstream) endProgress(token string, sink *progressSink) {
	t := time.NewTimer(progressSettle)
	select {
	case <-sink.final:
	case <-t.C:
	}
	t.Stop()
	u.progressMu.Lock()
	delete(u.progress, token)
	u.progressMu.Unlock()
}

// onProgress forwards an upstream's progress notification to the call it
// belongs to; others (unknown or finished calls) are dropped.
func (u *upstream) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	u.progressMu.Lock()
	sink := u.progress[token]
	u.progressMu.Unlock()
	if sink == nil {
		return
	}
	sink.forward(&mcp.ProgressNotificationParams{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	if req.Params.Total > 0 && req.Params.Progress >= req.Params.Total {
		sink.once.Do(func() { close(sink.final) })
	}
}

// relist lists the tools of an upstream that announced a change, marks the
// tools it listed at start and no longer offers as withdrawn (their calls
// fail without reaching it; those it offers again come back) and tells the
// MCP endpoint (Upstreams.watch).
func (u *upstream) relist(sess *mcp.ClientSession) {
	timeout, _ := u.cfg.connectTimeout()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-u.started:
	case <-ctx.Done():
		return
	}
	var listed []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			u.log.Warn("Upstream MCP server announced a tool list change; listing its tools failed", "error", err)
			return
		}
		listed = append(listed, t)
	}
	for _, t := range u.listed {
		if slices.ContainsFunc(listed, func(l *mcp.Tool) bool { return l.Name == t.Name }) {
			u.withdrawn.Delete(t.Name)
		} else {
			u.withdrawn.Store(t.Name, true)
		}
	}
	for _, l := range listed {
		if !slices.ContainsFunc(u.listed, func(t *mcp.Tool) bool { return t.Name == l.Name }) {
			u.log.Warn("Upstream MCP server offers a new tool; the gateway serves it after a restart", "tool", l.Name)
		}
	}
	if f := u.owner.onChange.Load(); f != nil {
		(*f)(u, listed)
	}
}

// streamDrainGrace is how long an upstream call's HTTP request may still
// read its response stream after the call has its result.
const streamDrainGrace = time.Second

// upstreamTool runs one upstream tool for the executor.
type upstreamTool struct {
	u      *upstream
	name   string // <upstream>_<tool>
	remote string // the upstream's name
}

func (t *upstreamTool) Name() string { return t.name }

// Execute forwards the arguments the hooks decided on. The upstream's full
// result is handed to the MCP endpoint through the call's context (see
// withSlot); the text returned is what /v1/tool-calls callers get.
func (t *upstreamTool) Execute(ctx context.Context, args map[string]any) (string, error) {
	raw, err := strictjson.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("encoding arguments: %w", err)
	}
	res, err := t.u.call(ctx, t.remote, raw)
	if err != nil {
		err = fmt.Errorf("upstream MCP server %q: %w", t.u.cfg.Name, err)
		slotFrom(ctx).set(nil, err)
		return "", err
	}
	slotFrom(ctx).set(res, nil)
	text := ResultText(res)
	if res.IsError { // the upstream tool failed: so does the call
		if !strings.HasPrefix(text, "Error") {
			text = "Error: " + text
		}
		return "", &hooks.ToolError{Text: text}
	}
	return text, nil
}

// ResultText is the text an agent reads from a result: its text contents,
// one per line, and a placeholder for other contents (the structured
// content's JSON when there are no contents).
func ResultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for i, c := range res.Content {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s]", c.MIMEType)
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s]", c.MIMEType)
		default:
			fmt.Fprintf(&b, "[%T]", c)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if j, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(j)
		}
	}
	return b.String()
}

// slot carries an upstream's full result from the tool back to the MCP
// endpoint through the call's context.
type slot struct {
	mu  sync.Mutex
	res *mcp.CallToolResult
	err error
}

type slotKey struct{}

func withSlot(ctx context.Context) (context.Context, *slot) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey{}).(*slot)
	return s
}

func (s *slot) set(res *mcp.CallToolResult, err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.res, s.err = res, err
	s.mu.Unlock()
}

func (s *slot) get() (*mcp.CallToolResult, error) {
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res, s.err
}

// upstreamEnv is the environment of an upstream process: a few basics from
// the gateway's, never its credentials, plus the configured variables.
func upstreamEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// headerTransport adds configured headers to every upstream request.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}

// logWriter logs an upstream process's stderr lines.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			w.log.Info("Upstream stderr", "line", line)
		}
	}
	return len(p), nil
}
