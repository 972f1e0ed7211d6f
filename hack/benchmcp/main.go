// Command benchmcp measures what the gateway's MCP endpoint adds to a
// tools/call, with every party in its own process (make bench-mcp).
//
// Method. benchmcp re-executes itself as the upstream MCP server (go-sdk,
// streamable HTTP, a trivial echo tool) and starts the real gateway binary
// (-gateway) in standalone mode in front of it: --mcp with a tokens file,
// --mcp-upstreams naming the upstream, --policies holding the coding-agent
// AutonomyPolicy and a ContractPolicy budget, and the JSON audit log on
// stdout going to -audit (/dev/null by default). The load generator is this
// process: -sessions (64) go-sdk client sessions to the upstream ("direct",
// tool echo) and as many to the gateway's /mcp ("gated", tool up_echo, bearer
// token), all connected before any measurement. Each shape runs first direct,
// then gated, each after a warm-up at the same shape:
//
//   - open loop at a fixed aggregate rate: session i sends its calls at
//     t0 + (i/sessions + j) * sessions/rate, one call at a time, and a call's
//     latency is counted from its scheduled time, so time spent queueing
//     behind a slow earlier call is counted too (no coordinated omission).
//     Calls still unsent a second after the run's end are dropped and
//     reported: the path was saturated at that rate.
//   - closed loop with N calls in flight: N workers call back to back, each
//     rotating over the sessions; latency from the send. With N above the
//     cores, latency is mostly queueing for the CPU: N x CPU per call / cores.
//
// For each run it reports p50, p99 and max latency, the CPU time the gateway
// and the upstream processes used per call (utime+stime of /proc/PID/stat,
// 10 ms ticks, so a few percent over a run of several seconds), and the
// 1-minute load average at the end. added is gated minus direct. For the
// gateway it also reports, per call, its mean wall time in the hook chain
// (toolhooks_decision_duration_seconds{api="mcp"}), the context switches of
// its threads (/proc/PID/task/*/status), the bytes it allocated
// (go_memstats_alloc_bytes_total) and its collections, and its resident
// memory at the end: these depend far less on other load on the machine
// than the times do. -gated-only skips the direct runs and prints the
// gateway's PID, to profile it (perf record -g -p PID).
//
// Before measuring, benchmcp checks that the gated path works: the echo
// comes back through the gateway and a call naming a forbidden path (.env)
// gets the gateway's structured denial, so a broken chain cannot pass for a
// fast one.
//
// A third path separates what toolhooks adds from what proxying through
// go-sdk costs at all ("sdk proxy", on unless -sdk-proxy=false): benchmcp
// re-executed as a bare go-sdk proxy, a streamable-HTTP server whose up_echo
// forwards each call to the upstream over one go-sdk client session, with
// the gateway's upstream settings (256 keep-alive connections, the response
// stream read to its end) and nothing else: no authentication, hooks, audit
// or metrics. gated minus sdk proxy is the price of toolhooks' own work;
// sdk proxy minus direct is the price of an extra go-sdk hop.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

const (
	// upstreamEnv makes the binary (or the test binary) run as the upstream server.
	upstreamEnv = "BENCHMCP_SERVE_UPSTREAM"
	// proxyEnv makes the binary run as a bare go-sdk proxy in front of the
	// upstream whose URL it holds.
	proxyEnv = "BENCHMCP_SERVE_PROXY"
	token    = "bench-token-0123456789"
	// upstreamTool is the upstream's echo tool.
	upstreamTool = "echo"
	// gatedTool is the upstream's echo as the gateway offers it.
	gatedTool = "up_echo"
	// clockTicks is the unit of /proc/PID/stat's utime and stime (USER_HZ).
	clockTicks = 100
)

// arguments of every measured call: "path" is one of the autonomy hook's
// default path arguments, so the call is resolved against the workspace.
var arguments = map[string]any{"text": "hello", "path": "README.md"}

type options struct {
	gateway  string
	audit    string
	sessions int
	rates    []int
	inflight []int
	duration time.Duration
	warmup   time.Duration
	// gatewayEnv is added to the gateway's environment.
	gatewayEnv []string
	// gatedOnly skips the direct and sdk proxy runs (for profiling the gateway).
	gatedOnly bool
	// sdkProxy adds the bare go-sdk proxy path.
	sdkProxy bool
	out      io.Writer
	progress io.Writer
}

func main() {
	if serveRole() {
		return
	}
	if err := mainErr(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchmcp:", err)
		os.Exit(1)
	}
}

func mainErr(args []string) error {
	fs := flag.NewFlagSet("benchmcp", flag.ContinueOnError)
	o := options{out: os.Stdout, progress: os.Stderr}
	fs.StringVar(&o.gateway, "gateway", "", "the gateway binary (go build ./cmd/gateway)")
	fs.StringVar(&o.audit, "audit", os.DevNull, "where the gateway's audit log (its stdout) goes")
	fs.IntVar(&o.sessions, "sessions", 64, "concurrent MCP sessions, for each of direct and gated")
	rates := fs.String("rates", "250,500,1000,2000", "open-loop aggregate rates in calls/s (empty: none)")
	inflight := fs.String("inflight", "1,64", "closed-loop calls in flight (empty: none)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each run, at the same load")
	genv := fs.String("gateway-env", "", "extra environment for the gateway process, NAME=value separated by spaces (e.g. GOMAXPROCS=1)")
	fs.BoolVar(&o.gatedOnly, "gated-only", false, "measure only the gated path (to profile the gateway, whose PID is printed)")
	fs.BoolVar(&o.sdkProxy, "sdk-proxy", true, "also measure a bare go-sdk proxy (no toolhooks code) in front of the upstream")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.gatewayEnv = strings.Fields(*genv)
	var err error
	if o.rates, err = ints(*rates); err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	if o.inflight, err = ints(*inflight); err != nil {
		return fmt.Errorf("-inflight: %w", err)
	}
	if o.gateway == "" {
		return errors.New("-gateway is required")
	}
	if o.sessions < 1 {
		return errors.New("-sessions must be at least 1")
	}
	ctx, stop := signalContext()
	defer stop()
	_, err = run(ctx, o)
	return err
}

// ints parses a comma-separated list of positive integers.
func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// shape is one load shape: an open-loop rate or a closed-loop in-flight count.
type shape struct {
	rate     int // calls/s, open loop; 0 for closed loop
	inflight int // closed loop
}

func (s shape) String() string {
	if s.rate > 0 {
		return fmt.Sprintf("open %d/s", s.rate)
	}
	return fmt.Sprintf("closed %d in flight", s.inflight)
}

// result is one measured run.
type result struct {
	calls, errors, dropped int
	p50, p99, max          time.Duration
	// CPU per call of the process in front of the upstream (the gateway,
	// or the sdk proxy on that path) and of the upstream.
	gatewayCPU, upstreamCPU time.Duration
	// gateway, per call: context switches of all its threads, bytes
	// allocated (go_memstats_alloc_bytes_total) and GC cycles per 1000 calls.
	gatewaySwitches, gatewayAllocKB, gatewayGCs float64
	// hookUS is the gateway's mean wall time per call in the hook chain
	// (before and after phases, toolhooks_decision_duration_seconds{api="mcp"}).
	hookUS float64
	// gatewayRSSMB is the gateway's resident memory at the end of the run.
	gatewayRSSMB float64
	load         string
	firstErr     error
}

// row is one shape measured direct, through the bare go-sdk proxy (when
// measured) and gated.
type row struct {
	shape                shape
	direct, proxy, gated result
}

// target is one side of the comparison: sessions and the tool to call.
type target struct {
	name     string
	sessions []*mcp.ClientSession
	tool     string
}

func run(ctx context.Context, o options) ([]row, error) {
	tmp, err := os.MkdirTemp("", "benchmcp-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	progress(o, "starting the upstream MCP server")
	up, err := startUpstream(tmp)
	if err != nil {
		return nil, err
	}
	defer up.stop()
	var sdkProxy *proc
	if o.sdkProxy && !o.gatedOnly {
		progress(o, "starting the bare go-sdk proxy")
		if sdkProxy, err = startSelf(tmp, "proxy", proxyEnv+"="+up.url); err != nil {
			return nil, err
		}
		defer sdkProxy.stop()
	}
	progress(o, "starting the gateway %s", o.gateway)
	gw, err := startGateway(ctx, o, tmp, up.url)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	progress(o, "gateway PID %d, upstream PID %d", gw.cmd.Process.Pid, up.cmd.Process.Pid)

	progress(o, "connecting %d sessions directly and %d through the gateway", o.sessions, o.sessions)
	direct := target{name: "direct", tool: upstreamTool}
	proxy := target{name: "sdk proxy", tool: gatedTool}
	gated := target{name: "gated", tool: gatedTool}
	if direct.sessions, err = connectAll(ctx, up.url, "", o.sessions); err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	defer closeAll(direct.sessions)
	if sdkProxy != nil {
		if proxy.sessions, err = connectAll(ctx, sdkProxy.url, "", o.sessions); err != nil {
			return nil, fmt.Errorf("sdk proxy: %w", err)
		}
		defer closeAll(proxy.sessions)
		if err := checkEcho(ctx, proxy.sessions[0]); err != nil {
			return nil, fmt.Errorf("sdk proxy: %w", err)
		}
	}
	if gated.sessions, err = connectAll(ctx, gw.url, token, o.sessions); err != nil {
		return nil, fmt.Errorf("gated: %w", err)
	}
	defer closeAll(gated.sessions)
	if err := checkGated(ctx, gated.sessions[0]); err != nil {
		return nil, err
	}

	var shapes []shape
	for _, r := range o.rates {
		shapes = append(shapes, shape{rate: r})
	}
	for _, n := range o.inflight {
		shapes = append(shapes, shape{inflight: n})
	}
	var rows []row
	for _, s := range shapes {
		r := row{shape: s}
		for _, side := range []struct {
			t   target
			res *result
		}{{direct, &r.direct}, {proxy, &r.proxy}, {gated, &r.gated}} {
			if (o.gatedOnly && side.t.name == "direct") || side.t.sessions == nil {
				continue
			}
			progress(o, "%s %s: %s warm-up, %s measured", s, side.t.name, o.warmup, o.duration)
			if o.warmup > 0 {
				measure(ctx, side.t, s, o.warmup, nil, nil)
			}
			measured := map[string]*proc{"sdk proxy": sdkProxy, "gated": gw}[side.t.name] // its CPU is sampled
			*side.res = measure(ctx, side.t, s, o.duration, measured, up)
			if side.res.firstErr != nil {
				return rows, fmt.Errorf("%s %s: %d of %d calls failed, first: %w", s, side.t.name,
					side.res.errors, side.res.calls, side.res.firstErr)
			}
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
		}
		rows = append(rows, r)
		printRow(o.out, rows, r)
	}
	return rows, nil
}

func progress(o options, format string, args ...any) {
	_, _ = fmt.Fprintf(o.progress, "benchmcp: "+format+"\n", args...)
}

// measure runs shape s against t for d. gw (the process in front of the
// upstream: the gateway or the sdk proxy) and up, when set, are sampled for
// their CPU time.
func measure(ctx context.Context, t target, s shape, d time.Duration, gw, up *proc) result {
	var cpu0 [2]time.Duration
	cpu0[0], cpu0[1] = gw.cpu(), up.cpu()
	sw0, mem0 := gw.switches(), gw.memStats(ctx)
	var lat []time.Duration
	var res result
	if s.rate > 0 {
		lat, res = openLoop(ctx, t, s.rate, d)
	} else {
		lat, res = closedLoop(ctx, t, s.inflight, d)
	}
	res.load = loadAvg()
	res.gatewayRSSMB = gw.rssMB()
	if n := time.Duration(len(lat)); n > 0 {
		res.gatewayCPU = (gw.cpu() - cpu0[0]) / n
		res.upstreamCPU = (up.cpu() - cpu0[1]) / n
		res.gatewaySwitches = float64(gw.switches()-sw0) / float64(n)
		mem1 := gw.memStats(ctx)
		res.gatewayAllocKB = (mem1.allocBytes - mem0.allocBytes) / 1024 / float64(n)
		res.gatewayGCs = (mem1.gcs - mem0.gcs) * 1000 / float64(n)
		if c := mem1.hookCalls - mem0.hookCalls; c > 0 {
			res.hookUS = (mem1.hookSeconds - mem0.hookSeconds) / c * 1e6
		}
		slices.Sort(lat)
		res.p50 = lat[(len(lat)-1)/2]
		res.p99 = lat[(len(lat)-1)*99/100]
		res.max = lat[len(lat)-1]
	}
	return res
}

// collector gathers latencies and errors from concurrent callers.
type collector struct {
	mu  sync.Mutex
	lat []time.Duration
	res result
}

func (c *collector) add(lat []time.Duration, errs int, first error, dropped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lat = append(c.lat, lat...)
	c.res.calls += len(lat) + errs
	c.res.errors += errs
	c.res.dropped += dropped
	if c.res.firstErr == nil {
		c.res.firstErr = first
	}
}

// callOnce makes one measured call, returning an error for a failure or a
// tool error result.
func callOnce(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) error {
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %s", mcpgate.ResultText(res))
	}
	return nil
}

// openLoop has each session send on its own fixed schedule, together rate
// calls per second, and counts latency from the scheduled send time.
func openLoop(ctx context.Context, t target, rate int, d time.Duration) ([]time.Duration, result) {
	n := len(t.sessions)
	period := time.Duration(float64(time.Second) * float64(n) / float64(rate)) // per session
	start := time.Now().Add(10 * time.Millisecond)
	end := start.Add(d)
	giveUp := end.Add(time.Second)
	params := &mcp.CallToolParams{Name: t.tool, Arguments: arguments}
	var c collector
	var wg sync.WaitGroup
	for i, cs := range t.sessions {
		wg.Go(func() {
			var lat []time.Duration
			errs, dropped := 0, 0
			var first error
			for at := start.Add(period * time.Duration(i) / time.Duration(n)); at.Before(end); at = at.Add(period) {
				if ctx.Err() != nil || time.Now().After(giveUp) {
					dropped++
					continue
				}
				if wait := time.Until(at); wait > 0 {
					time.Sleep(wait)
				}
				if err := callOnce(ctx, cs, params); err != nil {
					errs++
					first = cmpErr(first, err)
					continue
				}
				lat = append(lat, time.Since(at))
			}
			c.add(lat, errs, first, dropped)
		})
	}
	wg.Wait()
	return c.lat, c.res
}

// closedLoop has inflight workers call back to back for d, each rotating
// over the sessions.
func closedLoop(ctx context.Context, t target, inflight int, d time.Duration) ([]time.Duration, result) {
	end := time.Now().Add(d)
	params := &mcp.CallToolParams{Name: t.tool, Arguments: arguments}
	var c collector
	var wg sync.WaitGroup
	for w := range inflight {
		wg.Go(func() {
			var lat []time.Duration
			errs := 0
			var first error
			for next := w % len(t.sessions); ctx.Err() == nil && time.Now().Before(end); next = (next + inflight) % len(t.sessions) {
				sent := time.Now()
				if err := callOnce(ctx, t.sessions[next], params); err != nil {
					errs++
					first = cmpErr(first, err)
					continue
				}
				lat = append(lat, time.Since(sent))
			}
			c.add(lat, errs, first, 0)
		})
	}
	wg.Wait()
	return c.lat, c.res
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// checkGated checks that the gateway passes an allowed call through and
// denies a call on a forbidden path with its structured denial.
func checkGated(ctx context.Context, cs *mcp.ClientSession) error {
	if err := checkEcho(ctx, cs); err != nil {
		return err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gatedTool, Arguments: map[string]any{"text": "x", "path": "config/.env"}})
	if err != nil {
		return fmt.Errorf("check: gated echo of config/.env: %w", err)
	}
	if d, _ := res.Meta["toolhooks.dev/denial"].(map[string]any); !res.IsError || d["hook"] == nil {
		return fmt.Errorf("check: gated echo of config/.env was not denied with a structured denial: %q, _meta %v",
			mcpgate.ResultText(res), res.Meta)
	}
	return nil
}

// checkEcho checks that up_echo through cs echoes.
func checkEcho(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gatedTool, Arguments: arguments})
	if err != nil {
		return fmt.Errorf("check: echo through %s: %w", gatedTool, err)
	}
	if res.IsError || mcpgate.ResultText(res) != "echo: hello" {
		return fmt.Errorf("check: %s answered %q (isError %v), want %q", gatedTool, mcpgate.ResultText(res), res.IsError, "echo: hello")
	}
	return nil
}

// printRow prints the table header before the first row, then r. Columns
// for the sdk proxy show "-" when it was not measured.
func printRow(w io.Writer, rows []row, r row) {
	if len(rows) == 1 {
		_, _ = fmt.Fprintln(w, "| shape | calls d/p/g | direct p50/p99/max ms | sdk proxy p50/p99/max ms | gated p50/p99/max ms "+
			"| added by gated p50/p99 ms | added by toolhooks (gated - sdk proxy) p50/p99 ms "+
			"| CPU us/call sdk proxy/gateway (hook chain wall us/call) | gateway switches/call, KB/call, GCs/1000 calls, RSS MB "+
			"| upstream CPU us/call d/g | load d/g |")
		_, _ = fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	}
	proxied := r.proxy.calls > 0
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
	sms := func(d time.Duration) string { return fmt.Sprintf("%+.2f", float64(d)/float64(time.Millisecond)) }
	triple := func(r result) string { return ms(r.p50) + "/" + ms(r.p99) + "/" + ms(r.max) }
	calls := func(r result) string {
		if r.dropped > 0 {
			return fmt.Sprintf("%d (+%d dropped)", r.calls, r.dropped)
		}
		return strconv.Itoa(r.calls)
	}
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
	proxyCalls, proxyLat, overProxy, proxyCPU := "-", "-", "-", "-"
	if proxied {
		proxyCalls, proxyLat, proxyCPU = calls(r.proxy), triple(r.proxy), us(r.proxy.gatewayCPU)
		overProxy = sms(r.gated.p50-r.proxy.p50) + "/" + sms(r.gated.p99-r.proxy.p99)
	}
	_, _ = fmt.Fprintf(w, "| %s | %s/%s/%s | %s | %s | %s | %s/%s | %s | %s/%s (%.0f) | %.1f, %.0f, %.1f, %.0f | %s/%s | %s/%s |\n", r.shape,
		calls(r.direct), proxyCalls, calls(r.gated), triple(r.direct), proxyLat, triple(r.gated),
		sms(r.gated.p50-r.direct.p50), sms(r.gated.p99-r.direct.p99), overProxy,
		proxyCPU, us(r.gated.gatewayCPU), r.gated.hookUS,
		r.gated.gatewaySwitches, r.gated.gatewayAllocKB, r.gated.gatewayGCs, r.gated.gatewayRSSMB,
		us(r.direct.upstreamCPU), us(r.gated.upstreamCPU), r.direct.load, r.gated.load)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// proc is a child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string
	// metrics is the gateway's Prometheus endpoint ("" for the upstream).
	metrics string
	done    chan struct{}
}

// switches is the number of context switches of the process's threads so far.
func (p *proc) switches() int64 {
	if p == nil {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.cmd.Process.Pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// rssMB is the process's resident memory in MB (0 for nil).
func (p *proc) rssMB() float64 {
	if p == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// memStats are the Go runtime's counters the gateway exports.
type memStats struct{ allocBytes, gcs, hookSeconds, hookCalls float64 }

// memStats reads the gateway's allocation and GC counters from /metrics.
func (p *proc) memStats(ctx context.Context) memStats {
	var m memStats
	if p == nil || p.metrics == "" {
		return m
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	if err != nil {
		return m
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_memstats_alloc_bytes_total":
			m.allocBytes, _ = strconv.ParseFloat(val, 64)
		case "go_gc_duration_seconds_count":
			m.gcs, _ = strconv.ParseFloat(val, 64)
		case `toolhooks_decision_duration_seconds_sum{api="mcp"}`:
			m.hookSeconds, _ = strconv.ParseFloat(val, 64)
		case `toolhooks_decision_duration_seconds_count{api="mcp"}`:
			m.hookCalls, _ = strconv.ParseFloat(val, 64)
		}
	}
	return m
}

// cpu is the process's CPU time so far (0 for nil).
func (p *proc) cpu() time.Duration {
	if p == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) start() error {
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting the %s: %w", p.name, err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return nil
}

// startUpstream re-executes this binary as the upstream and reads its URL.
func startUpstream(tmp string) (*proc, error) {
	return startSelf(tmp, "upstream", upstreamEnv+"=1")
}

// startSelf re-executes this binary in the role env selects (see serveRole)
// and reads the URL it prints.
func startSelf(tmp, name, env string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: exec.Command(self)} //nolint:gosec // this binary
	p.cmd.Env = append(os.Environ(), env)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(tmp, name+".log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }()
	p.cmd.Stderr = logf
	if err := p.start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		p.stop()
		log, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("the %s did not print its address: %w: %s", name, err, log)
	}
	p.url = strings.TrimSpace(line)
	return p, nil
}

// serveRole runs this process as the upstream or the bare go-sdk proxy
// when its environment says so, returning false otherwise. It exits the
// process on failure.
func serveRole() bool {
	var err error
	switch {
	case os.Getenv(upstreamEnv) != "":
		err = serveUpstream()
	case os.Getenv(proxyEnv) != "":
		err = serveProxy(os.Getenv(proxyEnv))
	default:
		return false
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmcp:", err)
		os.Exit(1)
	}
	return true
}

// serveProxy serves up_echo over streamable HTTP, forwarding every call to
// the upstream echo at upstreamURL over one go-sdk client session, until
// SIGTERM: a proxy with nothing of toolhooks in it.
func serveProxy(upstreamURL string) error {
	ctx, stop := signalContext()
	defer stop()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-proxy", Version: "v1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)})
	up, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: upstreamURL, HTTPClient: &http.Client{Transport: tr},
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return fmt.Errorf("connecting to the upstream: %w", err)
	}
	defer func() { _ = up.Close() }()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-proxy", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: gatedTool, Description: "The upstream's echo.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Like the gateway: the call does not end with the caller's
			// request, so go-sdk reads the upstream's response to its end
			// and keeps the connection.
			return up.CallTool(context.WithoutCancel(ctx), &mcp.CallToolParams{Name: upstreamTool, Arguments: req.Params.Arguments})
		})
	return serveMCP(ctx, srv, &mcp.StreamableHTTPOptions{JSONResponse: true}) // as the gateway answers
}

// serveUpstream serves the echo tool over streamable HTTP on a loopback
// port, printing its URL on stdout, until SIGTERM.
func serveUpstream() error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v1"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
		Path string `json:"path,omitempty"`
	}
	type echoOut struct {
		Echoed string `json:"echoed"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: upstreamTool, Description: "Echo text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, echoOut, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, echoOut{Echoed: a.Text}, nil
		})
	ctx, stop := signalContext()
	defer stop()
	return serveMCP(ctx, srv, nil)
}

// serveMCP serves srv over streamable HTTP with opts on a loopback port,
// printing its URL on stdout, until ctx ends.
func serveMCP(ctx context.Context, srv *mcp.Server, opts *mcp.StreamableHTTPOptions) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts),
		ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	go func() { <-ctx.Done(); _ = hs.Close() }()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// gatewayPolicies are the policies in force: the coding-agent AutonomyPolicy
// and a ContractPolicy budget no run exhausts.
const gatewayPolicies = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: coding-agent}
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env"]
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget}
spec:
  maxToolCalls: 10000000 # the CRD maximum
`

// startGateway writes the gateway's workspace, policies, tokens and
// upstreams files, starts it and waits until it serves MCP calls.
func startGateway(ctx context.Context, o options, tmp, upstreamURL string) (*proc, error) {
	ws := filepath.Join(tmp, "ws")
	pol := filepath.Join(tmp, "policies")
	files := map[string]string{
		filepath.Join(ws, "README.md"):       "# bench\n",
		filepath.Join(ws, "config", ".env"):  "SECRET=1\n",
		filepath.Join(pol, "bench.yaml"):     strings.ReplaceAll(gatewayPolicies, "WORKSPACE", ws),
		filepath.Join(tmp, "tokens.yaml"):    "tokens:\n- {identity: bench, token: " + token + "}\n",
		filepath.Join(tmp, "upstreams.yaml"): "upstreams:\n- name: up\n  http: {url: " + upstreamURL + "}\n",
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &proc{name: "gateway", url: "http://" + addr + "/mcp", metrics: "http://" + addr + "/metrics"}
	p.cmd = exec.Command(o.gateway, "--workspace", ws, "--policies", pol, "--listen", addr, "--mcp", //nolint:gosec // the binary to measure
		"--auth-tokens-file", filepath.Join(tmp, "tokens.yaml"), "--mcp-upstreams", filepath.Join(tmp, "upstreams.yaml"))
	p.cmd.Env = append(os.Environ(), o.gatewayEnv...)
	audit, err := os.OpenFile(o.audit, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer func() { _ = audit.Close() }()
	logPath := filepath.Join(tmp, "gateway.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }()
	p.cmd.Stdout, p.cmd.Stderr = audit, logf
	if err := p.start(); err != nil {
		return nil, err
	}
	// Ready once it answers MCP calls with the policies in force (before,
	// every call is denied with NoPolicy).
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = readyGateway(ctx, p.url)
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("the gateway exited: %s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("the gateway is not ready after 30s: %w; its log:\n%s", err, log)
		}
	}
}

func readyGateway(ctx context.Context, url string) error {
	ss, err := connectAll(ctx, url, token, 1)
	if err != nil {
		return err
	}
	defer closeAll(ss)
	return checkGated(ctx, ss[0])
}

// freeAddr is a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// connectAll opens n sessions to url over one keep-alive transport.
func connectAll(ctx context.Context, url, bearer string, n int) ([]*mcp.ClientSession, error) {
	tr := &http.Transport{MaxIdleConns: 4 * n, MaxIdleConnsPerHost: 4 * n, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: authTransport{token: bearer, next: tr}}
	client := mcp.NewClient(&mcp.Implementation{Name: "benchmcp", Version: "v1"},
		&mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)})
	out := make([]*mcp.ClientSession, 0, n)
	for range n {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc,
			DisableStandaloneSSE: true, MaxRetries: -1}, nil)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

func closeAll(ss []*mcp.ClientSession) {
	for _, cs := range ss {
		_ = cs.Close()
	}
}

// authTransport adds a bearer token (when set).
type authTransport struct {
	token string
	next  http.RoundTripper
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if a.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+a.token)
	}
	return a.next.RoundTrip(r)
}

// signalContext ends on SIGTERM or an interrupt.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}
