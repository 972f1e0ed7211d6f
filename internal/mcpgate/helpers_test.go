package mcpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/tools"
	"github.com/toolhooks/toolhooks/internal/wire"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
	tokensYAML = "tokens:\n- {identity: alice, token: " + aliceToken + "}\n- {identity: bob, token: " + bobToken + "}\n"
)

// upstreamEnvVar makes the test binary run as a stdio upstream MCP server (see TestMain).
const upstreamEnvVar = "MCPGATE_TEST_STDIO_UPSTREAM"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnvVar) != "" {
		srv, _ := newUpstreamServer()
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refusals counts m's records of refused requests (hook "request") by
// rule, under "" those of refused requests that name a sender or a tool,
// and under "calls" every other record.
func refusals(m *audit.Memory) map[string]int {
	out := map[string]int{}
	for _, r := range m.Records() {
		switch {
		case r.Denial == nil || r.Denial.Hook != hooks.RequestHookName:
			out["calls"]++
		case r.Tool != "" || (r.SenderID != "") != (r.Denial.Rule != hooks.RuleUnauthenticated && r.Denial.Rule != hooks.RuleForeignOrigin):
			out[""]++
		default:
			out[r.Denial.Rule]++
		}
	}
	return out
}

// lastRecord returns the newest record m holds, failing without one.
func lastRecord(t *testing.T, m *audit.Memory) audit.Record {
	t.Helper()
	recs := m.Records()
	if len(recs) == 0 {
		t.Fatal("no audit record")
	}
	return recs[len(recs)-1]
}

// env is a gateway with its MCP endpoint behind a real HTTP server on loopback.
type env struct {
	t     *testing.T
	ws    string
	srv   *gateway.Server
	url   string
	base  string // the server's URL, without a path
	audit *audit.Memory
}

type envOptions struct {
	upstreams *mcpgate.Config
	anonymous bool
	noAuth    bool
	denied    string
	// toolTimeout is the gateway's tool timeout (0: the default).
	toolTimeout time.Duration
	// maxFileBytes is the gateway's file size limit (0: the default).
	maxFileBytes int64
	// Session limits and idle timeout (mcpgate.Options; 0: the defaults).
	maxSessions, maxSessionsPerCaller int
	sessionIdle                       time.Duration
	// tweak changes the endpoint's options before it is built.
	tweak func(*mcpgate.Options)
	// approver records the gateway's requests for approval (nil: none).
	approver hooks.Approver
	// tracerProvider makes the gateway's spans (nil: none).
	tracerProvider trace.TracerProvider
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), o)
}

// newEnvIn is newEnv with the workspace ws.
func newEnvIn(t *testing.T, ws string, o envOptions) *env {
	t.Helper()
	for name, body := range map[string]string{
		"README.md":   "# project\n",
		"config/.env": "SECRET=1\n",
	} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{t: t, ws: ws, audit: &audit.Memory{}}
	opts := gateway.Options{Workspace: ws, Audit: e.audit, Logger: discard(), ToolTimeout: o.toolTimeout,
		MaxFileBytes: o.maxFileBytes, Callers: &authn.Request{AllowAnonymous: o.anonymous}, Approver: o.approver,
		TracerProvider: o.tracerProvider}
	if !o.noAuth {
		toks, err := authn.ParseStaticTokens([]byte(tokensYAML))
		if err != nil {
			t.Fatal(err)
		}
		opts.Callers.Tokens = toks
	}
	var ups *mcpgate.Upstreams
	if o.upstreams != nil {
		var err error
		ups, err = mcpgate.Connect(context.Background(), o.upstreams, discard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ups.Close)
		builtins, err := tools.Builtins(ws, gateway.ToolOptions(o.maxFileBytes, nil))
		if err != nil {
			t.Fatal(err)
		}
		opts.Tools = append(builtins, ups.Tools()...)
		opts.ToolTraits = ups.Traits()
	}
	srv, err := gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e.srv = srv
	mo := mcpgate.Options{Gateway: srv, Upstreams: ups, DeniedTools: o.denied, Logger: discard(),
		MaxSessions: o.maxSessions, MaxSessionsPerCaller: o.maxSessionsPerCaller, SessionIdleTimeout: o.sessionIdle}
	if o.tweak != nil {
		o.tweak(&mo)
	}
	h, err := mcpgate.NewHandler(mo)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcpgate.Mount(srv.Handler(), h))
	t.Cleanup(hs.Close)
	e.url = hs.URL + mcpgate.Path
	e.base = hs.URL
	return e
}

// apply puts policy YAML (WORKSPACE replaced) in force.
func (e *env) apply(docs string) {
	e.t.Helper()
	if _, err := e.srv.Apply(context.Background(), compileYAML(e.t, e.ws, docs), "test"); err != nil {
		e.t.Fatal(err)
	}
}

func compileYAML(t testing.TB, ws, docs string) *gatewayconfig.Config {
	t.Helper()
	p, err := policyfile.Parse([]byte(strings.ReplaceAll(docs, "WORKSPACE", ws)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, p)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Fatalf("%s: %v", compile.HookName(o.Policy), o.Err)
		}
	}
	return cfg
}

// bearerTransport adds a bearer token (when set) to every request, over
// next (http.DefaultTransport when nil).
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return next.RoundTrip(r)
}

// connect opens an MCP client session to url with token ("" for none).
func connect(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := connectErr(url, token)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func connectErr(url, token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}
	return client.Connect(context.Background(), tr, nil)
}

func call(t testing.TB, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

// text is the text of a result's first text content, which holds the
// tool's output, or the error or denial text.
func text(res *mcp.CallToolResult) string {
	if t := texts(res); len(t) > 0 {
		return t[0]
	}
	return ""
}

// texts are the texts of a result's text contents.
func texts(res *mcp.CallToolResult) []string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return parts
}

// denialOf decodes a result's structured denial; nil when there is none.
func denialOf(t testing.TB, res *mcp.CallToolResult) *wire.Denial {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Denial *wire.Denial `json:"denial"`
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return sc.Denial
}

// hangsCancelled counts the calls of the hang tool whose context the upstream
// server cancelled (the caller cancelled the call in flight).
var hangsCancelled atomic.Int64

// newUpstreamServer is a small upstream MCP server: echo (returns its text
// argument), where (returns its "where" argument, a path the gateway's
// upstream config declares), fail (a tool error) and crash (exits the
// process, for stdio). calls counts the calls that reached it.
func newUpstreamServer() (*mcp.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "v1"}, nil)
	schema := func(props ...string) map[string]any {
		p := map[string]any{}
		for _, k := range props {
			p[k] = map[string]any{"type": "string"}
		}
		return map[string]any{"type": "object", "properties": p}
	}
	arg := func(req *mcp.CallToolRequest, k string) string {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		s, _ := m[k].(string)
		return s
	}
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "Echo text.", InputSchema: schema("text")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + arg(req, "text")}},
				StructuredContent: map[string]any{"echoed": arg(req, "text")}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "where", Description: "Return the where argument.", InputSchema: schema("where")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "at " + arg(req, "where")}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "json", Description: "Return structured content and no text.", InputSchema: schema()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"s": "x", "n": 1}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Fail.", InputSchema: schema()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "hang", Description: "Never answer.", InputSchema: schema()},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			<-ctx.Done()
			hangsCancelled.Add(1)
			return nil, ctx.Err()
		})
	srv.AddTool(&mcp.Tool{Name: "progress", Description: "Report progress three times, then answer.", InputSchema: schema()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			token := req.Params.GetProgressToken()
			for i := 1; i <= 3 && token != nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
					Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("progress token %v", token != nil)}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "progress_on", Description: "Report progress every few milliseconds until cancelled and for a while after, then fail; it creates the file named by its done argument once it has stopped.",
		InputSchema: schema("done")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			token := req.Params.GetProgressToken()
			if token == nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no progress token"}}}, nil
			}
			// Notifications go on after the cancellation, as an upstream's
			// may while the cancellation is on its way to it.
			notify := context.WithoutCancel(ctx)
			var after <-chan time.Time
			for i := 1; i < 100000; i++ {
				_ = req.Session.NotifyProgress(notify, &mcp.ProgressNotificationParams{ProgressToken: token,
					Progress: float64(i), Message: fmt.Sprintf("step %d", i)})
				if after == nil && ctx.Err() != nil {
					after = time.After(300 * time.Millisecond)
				}
				select {
				case <-after:
					if done := arg(req, "done"); done != "" {
						_ = os.WriteFile(done, nil, 0o600)
					}
					return nil, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
			return nil, errors.New("never cancelled")
		})
	srv.AddTool(&mcp.Tool{Name: "drop_echo", Description: "Stop offering echo.", InputSchema: schema()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			srv.RemoveTools("echo")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo dropped"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "crash", Description: "Exit the server process.", InputSchema: schema()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if os.Getenv(upstreamEnvVar) == "" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "crash only exits a stdio upstream"}}}, nil
			}
			os.Exit(7)
			return nil, nil
		})
	return srv, &calls
}

// httpUpstream serves newUpstreamServer over streamable HTTP.
func httpUpstream(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	srv, calls := newUpstreamServer()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs, calls
}

// jsonEqual reports whether text is JSON equal to v's encoding.
func jsonEqual(t testing.TB, text string, v any) bool {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if json.Unmarshal([]byte(text), &got) != nil || json.Unmarshal(b, &want) != nil {
		return false
	}
	return reflect.DeepEqual(got, want)
}

// metrics returns the gateway's GET /metrics text.
func (e *env) metrics() string {
	e.t.Helper()
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}
