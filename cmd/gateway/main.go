// Command gateway runs the toolhooks gateway: it executes agents' tool calls
// through the hook chain pushed by the controller, or, with --policies, loaded
// from policy files (standalone mode). Audit records go to stdout as JSON
// lines, logs to stderr.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/plugins"
	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/standalone"
	"github.com/toolhooks/toolhooks/internal/tools"
	"github.com/toolhooks/toolhooks/internal/tracing/otlp"
)

func main() {
	// A write to a closed stdout returns EPIPE (and denies the call it
	// records) instead of killing the gateway.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// flags are the command line.
type flags struct {
	listen         string
	workspace      string
	policies       string
	namespace      string
	labels         map[string]string
	policyDebounce time.Duration
	toolTimeout    time.Duration
	// maxFileBytes is the built-in tools' file size limit, from which the
	// request body limits derive (gateway.BodyBytesFor).
	maxFileBytes    int64
	staticTokenFile string
	shutdownTimeout time.Duration
	audit           auditFlags
	maxConns        int
	maxConnsPerIP   int
	idleTimeout     time.Duration
	gogc            int // garbage collector percentage to set; 0 keeps the runtime's (GOGC)
	sandbox         sandbox.Config
	kube            kubeFlags
	mcp             mcpFlags
	auth            authFlags
	tls             tlsFlags
	budgets         contract.BudgetConfig
	stateStore      stateStoreFlags
	// pluginMaxTimeouts: calls in a row a stdio plugin may let time out.
	pluginMaxTimeouts int
	// pluginTokenFile: the token presented to HTTP plugins ("": none).
	pluginTokenFile string
}

// defaultGOGC is the gateway's garbage collector percentage unless --gogc or
// the GOGC environment variable says otherwise. The gateway's live heap is a
// few MB while every decision allocates about 5 KB, so with Go's default of
// 100 the collector runs dozens of times a second under load; 400 cuts the
// instructions per decision by about 17% (callgrind, BenchmarkDecisionHandler:
// 98k at 100, 81k at 400) for about 11 MB more resident memory at 16
// connections (hack/bench-decisions.sh). GOMEMLIMIT, when set, still bounds the heap.
const defaultGOGC = 400

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.listen, "listen", ":8080", "HTTP listen address (empty: none, with --tls-cert-file)")
	fs.StringVar(&f.workspace, "workspace", "", "workspace directory the built-in tools operate in (required)")
	fs.StringVar(&f.policies, "policies", "", "standalone mode: load policy YAML files from this directory and reload them on change")
	fs.StringVar(&f.namespace, "namespace", "default", "standalone mode: the gateway's namespace; only policies in it apply")
	labels := fs.String("labels", "", "standalone mode: the gateway's labels as k=v,k2=v2, matched by gatewaySelectors")
	fs.DurationVar(&f.policyDebounce, "policy-debounce", standalone.DefaultDebounce,
		"standalone mode: load the policy files only once they stayed unchanged this long")
	fs.DurationVar(&f.toolTimeout, "tool-timeout", hooks.DefaultToolTimeout, "how long a tool may run (0 for no limit)")
	fs.Int64Var(&f.maxFileBytes, "max-file-bytes", tools.DefaultMaxFileBytes,
		"largest file read_file returns and write_file and edit_file write; "+
			"request bodies (POST /v1/tool-calls, /mcp) may be twice this plus 64 KiB")
	fs.StringVar(&f.staticTokenFile, "static-token-file", "", "accept configuration pushes bearing the token in this file (standalone use)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to wait for calls in flight on shutdown")
	gogc := fs.Int("gogc", defaultGOGC, "garbage collector percentage (as GOGC); without this flag a GOGC environment variable wins")
	fs.StringVar(&f.sandbox.Mode, "sandbox", sandbox.ModeLandlock,
		"confinement of the processes tools start: landlock, or off "+
			"(only where Landlock is missing; reported by /readyz, a metric and the log)")
	fs.StringVar(&f.sandbox.Network, "sandbox-network", sandbox.NetworkDeny,
		"TCP for the processes tools start: deny (no bind or connect; needs Landlock ABI 4, else tools are refused) or allow")
	readExec := fs.String("sandbox-read-exec-dirs", strings.Join(sandbox.DefaultReadExecDirs, ","),
		"comma-separated paths confined processes may read and execute beneath")
	fs.IntVar(&f.sandbox.Limits.Processes, "sandbox-max-processes", sandbox.DefaultMaxProcesses,
		"most processes and threads alive at once in the tree of one program a tool starts (0: no bound)")
	maxMemory := fs.String("sandbox-max-memory", "2Gi",
		"most private memory each process of a program may allocate (RLIMIT_DATA; a quantity such as 512Mi; 0: no bound)")
	fs.DurationVar(&f.sandbox.Limits.CPUTime, "sandbox-max-cpu-time", sandbox.DefaultMaxCPUTime,
		"most CPU time each process of a program may use; beyond it the program's whole tree is ended (0: no bound)")
	maxFileSize := fs.String("sandbox-max-file-size", "1Gi",
		"largest file a process of a program may write; beyond it the program's whole tree is ended (a quantity; 0: no bound)")
	f.kube.register(fs)
	f.mcp.register(fs)
	f.audit.register(fs)
	fs.IntVar(&f.maxConns, "max-connections", 1024,
		"most HTTP connections served at once; further ones wait in the kernel's backlog (0: no limit)")
	fs.IntVar(&f.maxConnsPerIP, "max-connections-per-ip", 256,
		"most HTTP connections one client address holds at once; more are closed as they arrive (0: no limit)")
	fs.DurationVar(&f.idleTimeout, "http-idle-timeout", 30*time.Second, "close keep-alive connections idle this long")
	f.auth.register(fs)
	f.tls.register(fs)
	f.stateStore.register(fs)
	fs.DurationVar(&f.budgets.SessionTTL, "budget-session-ttl", contract.DefaultSessionTTL,
		"forget a session's call count after it has made no call this long")
	fs.IntVar(&f.budgets.MaxSessions, "budget-max-sessions", contract.DefaultMaxSessions,
		"most sessions with a call budget tracked at once; a new session beyond it is denied until others expire")
	fs.IntVar(&f.budgets.MaxSessionsPerSender, "budget-max-sessions-per-caller", contract.DefaultMaxSessionsPerSender,
		"most live budget sessions of one caller, so that one caller cannot fill the table for everyone")
	fs.IntVar(&f.pluginMaxTimeouts, "plugin-max-timeouts", plugins.DefaultMaxTimeouts,
		"kill and restart a stdio plugin after this many calls in a row timed out")
	fs.StringVar(&f.pluginTokenFile, "plugin-token-file", "",
		"present the token in this file (a projected ServiceAccount token, re-read when it rotates) "+
			"as a bearer token to HTTP plugins; when it cannot be read, plugin calls fail")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage of gateway:\n")
		fs.PrintDefaults()
		_, _ = fmt.Fprint(fs.Output(), tracingUsage)
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if f.budgets.SessionTTL <= 0 || f.budgets.MaxSessions <= 0 || f.budgets.MaxSessionsPerSender <= 0 {
		return f, errors.New("--budget-session-ttl, --budget-max-sessions and --budget-max-sessions-per-caller must be positive")
	}
	if f.budgets.MaxSessionsPerSender > f.budgets.MaxSessions {
		return f, fmt.Errorf("--budget-max-sessions-per-caller %d is more than --budget-max-sessions %d",
			f.budgets.MaxSessionsPerSender, f.budgets.MaxSessions)
	}
	for _, check := range []func() error{f.mcp.check, func() error { return f.tls.check(f.listen) }, f.stateStore.check} {
		if err := check(); err != nil {
			return f, err
		}
	}
	if f.maxConns < 0 || f.maxConnsPerIP < 0 {
		return f, errors.New("--max-connections and --max-connections-per-ip must not be negative (0: no limit)")
	}
	if f.maxFileBytes < 1 || f.maxFileBytes > maxFileBytesLimit {
		return f, fmt.Errorf("--max-file-bytes %d: must be between 1 and %d", f.maxFileBytes, int64(maxFileBytesLimit))
	}
	if f.pluginMaxTimeouts < 1 {
		return f, fmt.Errorf("--plugin-max-timeouts %d: must be at least 1", f.pluginMaxTimeouts)
	}
	if *gogc < 1 {
		return f, fmt.Errorf("--gogc %d: must be at least 1 (GOGC=off switches the collector off)", *gogc)
	}
	f.gogc = *gogc
	if os.Getenv("GOGC") != "" && !flagSet(fs, "gogc") {
		f.gogc = 0 // the runtime already applied GOGC
	}
	if f.workspace == "" {
		return f, errors.New("--workspace is required")
	}
	abs, err := filepath.Abs(f.workspace)
	if err != nil {
		return f, fmt.Errorf("--workspace: %w", err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return f, fmt.Errorf("--workspace %s is not an existing directory", f.workspace)
	}
	f.workspace = abs
	if f.labels, err = parseLabels(*labels); err != nil {
		return f, fmt.Errorf("--labels: %w", err)
	}
	if f.toolTimeout == 0 {
		f.toolTimeout = -1 // gateway.Options: negative means none
	}
	if err := f.parseSandbox(*maxMemory, *maxFileSize, *readExec); err != nil {
		return f, err
	}
	return f, nil
}

// parseSandbox checks the sandbox flags and sets the limits and read-exec
// directories from the text of --sandbox-max-memory, --sandbox-max-file-size
// and --sandbox-read-exec-dirs.
func (f *flags) parseSandbox(maxMemory, maxFileSize, readExec string) error {
	if f.sandbox.Mode != sandbox.ModeLandlock && f.sandbox.Mode != sandbox.ModeOff {
		return fmt.Errorf("--sandbox %q: want %s or %s", f.sandbox.Mode, sandbox.ModeLandlock, sandbox.ModeOff)
	}
	if f.sandbox.Network != sandbox.NetworkDeny && f.sandbox.Network != sandbox.NetworkAllow {
		return fmt.Errorf("--sandbox-network %q: want %s or %s", f.sandbox.Network, sandbox.NetworkDeny, sandbox.NetworkAllow)
	}
	for _, q := range []struct {
		name string
		v    string
		dst  *uint64
	}{{"--sandbox-max-memory", maxMemory, &f.sandbox.Limits.Memory}, {"--sandbox-max-file-size", maxFileSize, &f.sandbox.Limits.FileSize}} {
		n, err := resource.ParseQuantity(q.v)
		if err != nil || n.Sign() < 0 {
			return fmt.Errorf("%s %q: want a byte quantity such as 512Mi", q.name, q.v)
		}
		*q.dst = uint64(n.Value())
	}
	if f.sandbox.Limits.Processes < 0 || f.sandbox.Limits.CPUTime < 0 {
		return errors.New("--sandbox-max-processes and --sandbox-max-cpu-time may not be negative")
	}
	f.sandbox.ReadExecDirs = []string{}
	for d := range strings.SplitSeq(readExec, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--sandbox-read-exec-dirs: %q is not an absolute path", d)
		}
		f.sandbox.ReadExecDirs = append(f.sandbox.ReadExecDirs, d)
	}
	return nil
}

// maxFileBytesLimit bounds --max-file-bytes: a request body may be twice as
// large and is held in memory while it is checked.
const maxFileBytesLimit = 256 << 20

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// run wires the gateway and serves until ctx ends.
// newPluginHost returns the host of the gateway's plugins.
func newPluginHost(f flags, reg *prometheus.Registry, log *slog.Logger) (*plugins.Manager, error) {
	popts := plugins.Options{Logger: log, Registry: reg, MaxTimeouts: f.pluginMaxTimeouts}
	if f.pluginTokenFile != "" {
		popts.Token = plugins.NewTokenFile(f.pluginTokenFile, plugins.DefaultTokenCheckInterval, nil)
		if _, err := popts.Token.Token(); err != nil {
			// Not fatal: the kubelet may not have written it yet; every plugin call fails until it has.
			log.Warn("The plugin token file cannot be read yet; HTTP plugin calls fail until it can", "error", err)
		}
	}
	return plugins.New(popts)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	traces, err := setupRuntime(ctx, f, log)
	if err != nil {
		return err
	}
	defer flushTraces(traces, log) // last: after the servers and plugins have stopped
	reg := gateway.NewRegistry()
	pluginHost, err := newPluginHost(f, reg, log)
	if err != nil {
		return err
	}
	defer pluginHost.Close() // after the HTTP server has shut down: stops the plugin processes
	sb, err := sandbox.New(f.sandbox)
	if err != nil {
		return err
	}
	opts := gateway.Options{
		Sandbox:      sb,
		Budgets:      f.budgets,
		Workspace:    f.workspace,
		ToolTimeout:  f.toolTimeout,
		MaxFileBytes: f.maxFileBytes,
		Plugins:      pluginHost.Build,
		OnApplied:    func(cfg *gatewayconfig.Config) { pluginHost.Retain(plugins.Refs(cfg.Live())) },
		Degraded:     pluginHost.Degraded,
		Registry:     reg,
		Logger:       log,
	}
	if err := f.audit.apply(&opts, stdout); err != nil {
		return err
	}
	closeStore, err := f.stateStore.apply(&opts, f.budgets.SessionTTL, log)
	if err != nil {
		return err
	}
	defer closeStore() // after the HTTP server has shut down
	if f.staticTokenFile != "" {
		tok, err := gateway.LoadStaticToken(f.staticTokenFile)
		if err != nil {
			return err
		}
		opts.Authenticator = tok
	}
	if f.kube.enabled() {
		if f.staticTokenFile != "" {
			return errors.New("--static-token-file is for standalone use; it cannot be combined with cluster mode")
		}
		stopKube, err := f.kube.setup(ctx, &opts, log)
		if err != nil {
			return err
		}
		defer stopKube()
	}
	if opts.Callers, err = f.auth.build(f.kube.tokenReviews, log); err != nil {
		return err
	}
	ups, err := f.mcp.connect(ctx, &opts, log)
	if err != nil {
		return err
	}
	if ups != nil {
		defer ups.Close() // after the HTTP server has shut down: stops the upstream processes
	}
	srv, err := gateway.New(opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	handler, err := f.mcp.handler(srv, ups, f.auth.issuers(), log)
	if err != nil {
		return err
	}

	var tlsConfig *tls.Config
	if f.tls.enabled() {
		if tlsConfig, err = f.tls.config(ctx, log); err != nil {
			return err
		}
	}
	var servers []*http.Server
	errc := make(chan error, 2)
	serve := func(addr string, h http.Handler, tc *tls.Config) error {
		ln, err := listen(addr, f.maxConns, f.maxConnsPerIP)
		if err != nil {
			return err
		}
		if tc != nil {
			ln = tls.NewListener(ln, tc)
		}
		hs := &http.Server{
			Handler:           h,
			TLSConfig:         tc,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute, // the request only; tools may run longer (no WriteTimeout)
			IdleTimeout:       f.idleTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		servers = append(servers, hs)
		go func() { errc <- hs.Serve(ln) }()
		log.Info("Gateway listening", "address", ln.Addr().String(), "tls", tc != nil, "workspace", f.workspace,
			"standalone", f.policies != "", "pushes", opts.Authenticator != nil, "mcp", f.mcp.enabled,
			"anonymousCallers", f.auth.allowAnonymous, "decisionLog", f.audit.decisionLog)
		return nil
	}
	if tlsConfig != nil {
		if err := serve(f.tls.listen, handler, tlsConfig); err != nil {
			return err
		}
		handler = plainRefusesConfig(handler)
	}
	if f.listen != "" {
		if err := serve(f.listen, handler, nil); err != nil {
			_ = shutdown(servers, time.Second)
			return err
		}
	}

	if f.policies != "" {
		go func() {
			_ = standalone.Run(ctx, srv, standalone.Options{Dir: f.policies, Namespace: f.namespace, Labels: f.labels,
				Debounce: f.policyDebounce, Logger: log})
		}()
	}

	select {
	case err := <-errc:
		_ = shutdown(servers, time.Second)
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("Shutting down")
	if err := shutdown(servers, f.shutdownTimeout); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// tracingUsage ends the usage text: tracing is configured by the standard
// OpenTelemetry environment variables, not by flags.
const tracingUsage = `
Tracing (off by default) is configured by the OpenTelemetry environment variables:
  OTEL_TRACES_EXPORTER=otlp, or OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
  switch on the export of decision spans over OTLP/HTTP (protobuf); OTEL_TRACES_EXPORTER=none
  or OTEL_SDK_DISABLED=true keep it off. OTEL_SERVICE_NAME (default toolhooks-gateway),
  OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_EXPORTER_OTLP_HEADERS and the other
  OTEL_EXPORTER_OTLP_* and OTEL_BSP_* variables apply as the OpenTelemetry SDK reads them.
  Spans carry tool names, outcomes, hooks, policies and rules, never arguments or results.
`

// setupRuntime sets the garbage collector percentage and starts tracing as
// the environment says. It must run before anything builds a hook executor:
// executors use the TracerProvider installed here.
func setupRuntime(ctx context.Context, f flags, log *slog.Logger) (*otlp.Tracing, error) {
	if f.gogc > 0 {
		debug.SetGCPercent(f.gogc)
	}
	traces, err := otlp.Start(ctx, log)
	if err != nil {
		return nil, err
	}
	log.Info("Decision tracing", traces.LogAttrs()...)
	return traces, nil
}

// flushTraces exports the spans still buffered and stops the exporter.
func flushTraces(t *otlp.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("Flushing the last spans failed", "error", err)
	}
}

// shutdown stops the servers, waiting up to timeout for calls in flight.
func shutdown(servers []*http.Server, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make(chan error, len(servers))
	for _, hs := range servers {
		go func() { errs <- hs.Shutdown(sctx) }()
	}
	var err error
	for range servers {
		err = errors.Join(err, <-errs)
	}
	return err
}

// listen listens on addr and serves at most maxConns connections at once,
// at most perIP of them from one client address (0: no limit): one caller
// holding thousands of idle keep-alive connections cannot exhaust the
// gateway's memory or file descriptors, nor take every slot from others.
func listen(addr string, maxConns, perIP int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	if perIP > 0 {
		ln = &perIPListener{Listener: ln, max: perIP, open: map[string]int{}}
	}
	if maxConns > 0 {
		// Outside the per-address cap: a connection refused for its address
		// takes no slot of the total.
		ln = netutil.LimitListener(ln, maxConns)
	}
	return ln, nil
}

// perIPListener closes, as it accepts them, the connections of a client
// address that already holds max.
type perIPListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[string]int
}

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		l.mu.Lock()
		ok := l.open[ip] < l.max
		if ok {
			l.open[ip]++
		}
		l.mu.Unlock()
		if ok {
			return &perIPConn{Conn: c, l: l, ip: ip}, nil
		}
		_ = c.Close()
	}
}

// perIPConn gives its address's place back when closed, once.
type perIPConn struct {
	net.Conn
	l    *perIPListener
	ip   string
	once sync.Once
}

func (c *perIPConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.l.open[c.ip]--; c.l.open[c.ip] <= 0 {
			delete(c.l.open, c.ip)
		}
		c.l.mu.Unlock()
	})
	return err
}
