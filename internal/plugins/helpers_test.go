package plugins

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// nodePath returns the node binary; the plugin tests need it and fail loudly without it.
func nodePath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the plugin tests (install the Debian package nodejs): %v", err)
	}
	return p
}

// testdata returns the absolute path of a file in testdata.
func testdata(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newManager returns a Manager with a fresh registry, closed at the end of the test.
func newManager(t testing.TB, opts Options) *Manager {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// testWriter sends log lines to t.Log, and nowhere once the test ended.
type testWriter struct{ t testing.TB }

var logMu sync.Mutex

func (w testWriter) Write(b []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	defer func() { _ = recover() }() // a log line after the test finished
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// spec is a PluginHook entry for tests: before and after, 2 s timeout, fail closed.
func spec(name string, p Spec) Ref {
	if !p.Before && !p.After {
		p.Before, p.After = true, true
	}
	if p.TimeoutMillis == 0 {
		p.TimeoutMillis = 2000
	}
	return Ref{
		Name:   "PluginHook/default/" + name,
		Policy: hooks.PolicyRef{Kind: "PluginHook", Namespace: "default", Name: name, UID: "uid-" + name},
		Spec:   &p,
	}
}

// nodePlugin is a stdio transport running a JavaScript plugin file under node.
func nodePlugin(t testing.TB, file string, env map[string]string) *StdioSpec {
	return &StdioSpec{Command: nodePath(t), Args: []string{testdata(t, file)}, Env: env}
}

// okTool is a tool that returns "ok".
func okTool(name string) hooks.Tool {
	return hooks.ToolFunc{ToolName: name, Func: func(context.Context, map[string]any) (string, error) { return "ok", nil }}
}

// executor builds the hook list as the gateway does: each entry validated,
// then built by the manager, its failure policy from its spec.
func executor(t testing.TB, m *Manager, rs ...Ref) *hooks.Executor {
	t.Helper()
	var entries []hooks.Entry
	for _, r := range rs {
		if err := Validate(r.Spec); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, hooks.Entry{Hook: build(t, m, r), Policy: r.Policy, FailOpen: r.Spec.FailOpen})
	}
	ex, err := hooks.NewExecutor(entries,
		[]hooks.Tool{okTool("shell"), okTool("read_file"), okTool("rm"), okTool("slow"), okTool("crash"), okTool("write_file")},
		hooks.WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// build returns the runtime hook of h.
func build(t testing.TB, m *Manager, h Ref) hooks.Hook {
	t.Helper()
	hk, err := m.Build(h)
	if err != nil {
		t.Fatal(err)
	}
	return hk
}

func newCall(tool, args string) *hooks.Call {
	c := hooks.NewCall(tool, args)
	c.SessionID, c.ChannelID, c.SenderID, c.CorrelationID = "sess-1", "chan-1", "sender-1", "corr-1"
	return c
}

// eventually polls cond until it holds or 15 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readLines returns the lines of a file, none if it does not exist yet.
func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// failures returns the failures counted for a plugin hook and kind.
func failures(m *Manager, hook string, k Kind) float64 {
	return counter(m.m.failures.WithLabelValues(hook, string(k)))
}

// counter returns a counter's value.
func counter(c prometheus.Counter) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// wantKind checks that err is a plugin failure of kind k.
func wantKind(t testing.TB, err error, k Kind) {
	t.Helper()
	if got := FailureKind(err); got != k {
		t.Fatalf("error %v: kind %q, want %q", err, got, k)
	}
}

// rpcServer is an HTTP plugin: handle decides each request's reply.
type rpcServer struct {
	mu    sync.Mutex
	calls map[string]int // by method
}

func (s *rpcServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// handler returns an http.Handler that decodes the request and lets
// handle write the reply; handle returns the result to send, or writes itself and returns nil.
func (s *rpcServer) handler(handle func(w http.ResponseWriter, req *request) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		if s.calls == nil {
			s.calls = map[string]int{}
		}
		s.calls[req.Method]++
		s.mu.Unlock()
		res := handle(w, &req)
		if res == nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": req.ID, "result": res})
	})
}
