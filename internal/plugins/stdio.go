package plugins

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolhooks/toolhooks/internal/strictjson"
	"golang.org/x/time/rate"
)

// bridgeSource is the Node.js bridge that runs JavaScript plugin modules
// (a default export registering api.on handlers).
//
//go:embed js/bridge.mjs
var bridgeSource string

// ProtocolEnv is the environment variable that, set to "raw" in a stdio
// transport's env, stops the gateway from inserting the Node.js bridge: the
// script then speaks the protocol itself.
const ProtocolEnv = "TOOLHOOKS_PLUGIN_PROTOCOL"

// Limits of a plugin's stderr as it is copied to the gateway log.
const (
	maxStderrLine  = 1024
	stderrTailSize = 2048
	stderrPerSec   = 20
	stderrBurst    = 50
)

// Argv returns the command line the gateway runs for a stdio transport. When
// the command is node (or nodejs) and its first argument is a .js, .mjs or
// .cjs file, the plugin is taken to be a JavaScript plugin module: the
// embedded bridge is inserted, as
//
//	node --input-type=module -e <bridge> -- <plugin file> [args...]
//
// unless env sets ProtocolEnv to "raw". Any other command runs as given.
func Argv(s *StdioSpec) []string {
	argv := append([]string{s.Command}, s.Args...)
	if !isNodeScript(s) {
		return argv
	}
	return append([]string{s.Command, "--input-type=module", "-e", bridgeSource, "--"}, s.Args...)
}

func isNodeScript(s *StdioSpec) bool {
	base := filepath.Base(s.Command)
	if (base != "node" && base != "nodejs") || len(s.Args) == 0 || s.Env[ProtocolEnv] == "raw" {
		return false
	}
	switch strings.ToLower(filepath.Ext(s.Args[0])) {
	case ".js", ".mjs", ".cjs":
		return true
	}
	return false
}

// environ is the plugin's environment: a minimal one (PATH, HOME, TMPDIR, TZ
// and LANG from the gateway when set) plus the transport's env, which wins.
// Nothing else of the gateway's environment (credentials, service links)
// reaches the plugin.
func environ(extra map[string]string) []string {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, extra)
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// restartPolicy bounds how a crashed plugin process is restarted.
type restartPolicy struct {
	maxRestarts int           // consecutive unhealthy exits before giving up
	maxTimeouts int           // consecutive timed-out calls before the process is killed as wedged
	backoff     time.Duration // first restart delay, doubled per attempt
	maxBackoff  time.Duration
	giveUpDelay time.Duration // after giving up, a call may try again this long after
	stopGrace   time.Duration // time between closing stdin and killing on shutdown
}

// stdioTransport runs a plugin process and talks to it over its stdin and
// stdout. It restarts the process when it exits: proactively with backoff
// while attempts remain, and otherwise lazily on a call once giveUpDelay has
// passed. A process that answered at least one request counts as healthy and
// resets the attempts.
type stdioTransport struct {
	name   string
	argv   []string
	env    []string
	policy restartPolicy
	log    *slog.Logger
	m      *metrics
	now    func() time.Time

	nextID atomic.Uint64
	cur    atomic.Pointer[process]

	mu        sync.Mutex
	proc      *process
	closed    bool
	failures  int // consecutive unhealthy exits or failed starts
	attempts  int // starts attempted
	nextStart time.Time
	lastExit  string
	timer     *time.Timer
}

func newStdioTransport(name string, s *StdioSpec, policy restartPolicy, log *slog.Logger, m *metrics,
	now func() time.Time) *stdioTransport {
	t := &stdioTransport{name: name, argv: Argv(s), env: environ(s.Env), policy: policy, log: log, m: m, now: now}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.startLocked(); err != nil {
		log.Warn("Plugin process did not start", "hook", name, "error", err)
	}
	return t
}

// running returns the live process, starting one if none runs and a start is due.
func (t *stdioTransport) running() (*process, error) {
	if p := t.cur.Load(); p != nil {
		return p, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fail(KindUnavailable, "the plugin was removed")
	}
	if t.proc != nil {
		return t.proc, nil
	}
	if wait := t.nextStart.Sub(t.now()); wait > 0 {
		return nil, fail(KindUnavailable, "the plugin process is not running (%s); next start in %s", t.lastExit, wait.Round(time.Millisecond))
	}
	if err := t.startLocked(); err != nil {
		return nil, fail(KindUnavailable, "%w", err)
	}
	return t.proc, nil
}

// startLocked starts a process; on failure it schedules the next attempt.
func (t *stdioTransport) startLocked() error {
	if t.attempts > 0 {
		t.m.restarts.WithLabelValues(t.name).Inc()
	}
	t.attempts++
	p, err := t.spawn()
	if err != nil {
		t.lastExit = "start failed: " + err.Error()
		t.backoffLocked()
		return err
	}
	t.proc = p
	t.cur.Store(p)
	return nil
}

// backoffLocked counts an unhealthy exit or failed start and schedules the next start.
func (t *stdioTransport) backoffLocked() {
	t.failures++
	if t.failures > t.policy.maxRestarts {
		t.nextStart = t.now().Add(t.policy.giveUpDelay)
		t.log.Error("Plugin process keeps failing; not restarting it until a call arrives after the delay",
			"hook", t.name, "attempts", t.failures, "delay", t.policy.giveUpDelay, "lastExit", t.lastExit)
		return
	}
	d := t.policy.backoff << (t.failures - 1)
	if d > t.policy.maxBackoff || d <= 0 {
		d = t.policy.maxBackoff
	}
	t.nextStart = t.now().Add(d)
	t.timer = time.AfterFunc(d, t.restart)
}

// restart is the proactive restart after a backoff.
func (t *stdioTransport) restart() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.proc != nil {
		return
	}
	if err := t.startLocked(); err != nil {
		t.log.Warn("Plugin process did not restart", "hook", t.name, "error", err)
		return
	}
	t.log.Info("Plugin process restarted", "hook", t.name, "attempt", t.failures)
}

// exited is called once the process p has exited and its output is drained:
// it fails the calls still waiting (pluginCrashed, or pluginUnavailable when
// the gateway stopped it) and schedules a restart.
func (t *stdioTransport) exited(p *process, waitErr error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proc != p { // stopped by close
		p.failAll(fail(KindUnavailable, "the plugin was stopped"))
		return
	}
	status := "exited"
	if waitErr != nil {
		status = waitErr.Error()
	}
	if tail := p.stderr.String(); tail != "" {
		status += "; stderr: " + tail
	}
	t.proc = nil
	t.cur.Store(nil)
	t.lastExit = status
	p.failAll(fail(KindCrashed, "the plugin process exited while the call was waiting: %s", status))
	if p.replied.Load() {
		t.failures = 0
	}
	t.log.Warn("Plugin process exited", "hook", t.name, "status", status)
	t.backoffLocked()
}

// call sends a request and waits for its reply or ctx's end.
func (t *stdioTransport) call(ctx context.Context, method string, pr *params) (json.RawMessage, error) {
	p, err := t.running()
	if err != nil {
		return nil, err
	}
	id := t.nextID.Add(1)
	line, err := encodeRequest(method, id, pr)
	if err != nil {
		return nil, fail(KindUnavailable, "encoding the request: %w", err)
	}
	ch := make(chan outcome, 1)
	if err := p.await(id, ch); err != nil {
		return nil, err
	}
	if err := p.send(ctx, line); err != nil {
		p.forget(id)
		return nil, err
	}
	select {
	case o := <-ch:
		return o.result, o.err
	case <-ctx.Done():
		p.forget(id)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if n := p.timeouts.Add(1); t.policy.maxTimeouts > 0 && int(n) >= t.policy.maxTimeouts {
				t.log.Warn("Killing a wedged plugin process: its calls keep timing out", "hook", t.name,
					"timeouts", n, "pid", p.cmd.Process.Pid)
				p.kill() // the exit restarts it with the usual backoff
			}
		}
		return nil, context.Cause(ctx)
	}
}

// notify sends a request without waiting for its reply (hook_after: the
// reply, if any, is read and discarded).
func (t *stdioTransport) notify(ctx context.Context, method string, pr *params) error {
	p, err := t.running()
	if err != nil {
		return err
	}
	line, err := encodeRequest(method, t.nextID.Add(1), pr)
	if err != nil {
		return fail(KindUnavailable, "encoding the request: %w", err)
	}
	return p.send(ctx, line)
}

// close stops the process: it closes its stdin, waits stopGrace for it to
// exit, then kills it.
func (t *stdioTransport) close() {
	t.mu.Lock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
	p := t.proc
	t.proc = nil
	t.cur.Store(nil)
	t.mu.Unlock()
	if p != nil {
		p.stop(t.policy.stopGrace)
	}
}

// outcome is a call's reply or failure.
type outcome struct {
	result json.RawMessage
	err    error
}

// process is one run of a plugin process.
type process struct {
	t       *stdioTransport
	cmd     *exec.Cmd
	stdin   *os.File      // pollable, so writes honour deadlines
	wsem    chan struct{} // one writer at a time
	done    chan struct{} // closed when the process has exited
	replied atomic.Bool
	// timeouts counts calls in a row that timed out without a reply.
	timeouts atomic.Int32
	stderr   *tail
	stopped  sync.Once

	mu      sync.Mutex
	pending map[uint64]chan<- outcome
	dead    error
}

func (t *stdioTransport) spawn() (*process, error) {
	cmd := exec.Command(t.argv[0], t.argv[1:]...) //nolint:gosec // the command is the PluginHook's configuration
	cmd.Env = t.env
	// Its own process group, so that killing it kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("plugin stdin: %w", err)
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		closeAll(stdinR, stdin)
		return nil, fmt.Errorf("plugin stdout: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		closeAll(stdinR, stdin)
		return nil, fmt.Errorf("plugin stderr: %w", err)
	}
	err = cmd.Start()
	closeAll(stdinR) // the child has its copy
	if err != nil {
		closeAll(stdin)
		return nil, fmt.Errorf("starting %s: %w", t.argv[0], err)
	}
	p := &process{
		t: t, cmd: cmd, stdin: stdin,
		wsem:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stderr:  &tail{max: stderrTailSize},
		pending: map[uint64]chan<- outcome{},
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.readReplies(stdout) }()
	go func() { defer readers.Done(); p.copyStderr(stderr) }()
	go func() {
		readers.Wait()
		t.exited(p, cmd.Wait())
		p.stopped.Do(func() { closeAll(p.stdin) })
		close(p.done)
	}()
	return p, nil
}

// await registers ch for the reply to id.
func (p *process) await(id uint64, ch chan<- outcome) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return p.dead
	}
	p.pending[id] = ch
	return nil
}

// forget drops the registration of id (the caller gave up).
func (p *process) forget(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// deliver hands a reply to its caller; replies nobody waits for are dropped.
func (p *process) deliver(id uint64, o outcome) {
	p.mu.Lock()
	ch, ok := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if ok {
		ch <- o
	}
}

// failAll fails every waiting call with err; the first call of a dead process
// also makes later registrations fail with it.
func (p *process) failAll(err *Error) {
	p.mu.Lock()
	pending := p.pending
	p.pending = map[uint64]chan<- outcome{}
	if err.Kind != KindBadReply && p.dead == nil {
		p.dead = err
	}
	p.mu.Unlock()
	for _, ch := range pending {
		ch <- outcome{err: err}
	}
}

// send writes one request line to the plugin's stdin, one writer at a time,
// giving up when ctx ends. A write cut short by the deadline leaves half a
// line in the pipe, so the process, which has not read its input for the
// whole timeout anyway, is killed and will be restarted.
func (p *process) send(ctx context.Context, line []byte) error {
	select {
	case p.wsem <- struct{}{}:
	case <-p.done:
		return fail(KindUnavailable, "the plugin process stopped")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-p.wsem }()
	dl, _ := ctx.Deadline()
	if err := p.stdin.SetWriteDeadline(dl); err != nil {
		return fail(KindUnavailable, "writing to the plugin: %w", err)
	}
	n, err := p.stdin.Write(append(line, '\n'))
	if err == nil {
		return nil
	}
	if n > 0 {
		p.t.log.Warn("Killing a plugin process that stopped reading its input", "hook", p.t.name, "error", err)
		p.kill()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		<-ctx.Done() // its deadline is the write's
		return context.Cause(ctx)
	}
	return fail(KindUnavailable, "writing to the plugin: %w", err)
}

// readReplies reads reply lines from the plugin's stdout until it closes. A
// line that is not a reply (garbage, or a plugin logging to stdout) fails
// every call waiting at that moment with pluginBadReply: the stream can no
// longer be trusted to pair replies with requests.
func (p *process) readReplies(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, tooLong, err := readLine(r, maxReplyBytes)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			p.handleLine(line, tooLong)
		}
		if err != nil {
			return
		}
	}
}

func (p *process) handleLine(line []byte, tooLong bool) {
	var rep reply
	if tooLong {
		p.failAll(fail(KindBadReply, "the plugin wrote a line longer than %d bytes", maxReplyBytes))
		return
	}
	if err := strictjson.UnmarshalOpen(line, &rep); err != nil || rep.ID == nil {
		p.failAll(fail(KindBadReply, "the plugin wrote a line that is not a JSON reply: %q", clip(string(line), 80)))
		return
	}
	id, ok := parseID(rep.ID)
	if !ok {
		p.failAll(fail(KindBadReply, "the plugin replied with the unknown id %s", clip(string(rep.ID), 40)))
		return
	}
	p.replied.Store(true)
	res, err := rep.outcome()
	p.timeouts.Store(0)
	p.deliver(id, outcome{result: res, err: err})
}

// readLine reads one line of at most limit bytes; longer lines are consumed
// and reported as tooLong.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong, line = true, nil
			} else if line == nil && err == nil {
				return bytes.Clone(chunk), false, nil // the common case: one chunk
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// copyStderr copies the plugin's stderr to the gateway log, line by line,
// clipped and rate-limited, and keeps its tail for exit messages.
func (p *process) copyStderr(stderr io.Reader) {
	r := bufio.NewReaderSize(stderr, 16<<10)
	lim := rate.NewLimiter(stderrPerSec, stderrBurst)
	suppressed := 0
	for {
		line, tooLong, err := readLine(r, maxStderrLine)
		text := strings.TrimRight(string(line), "\r\n")
		if tooLong {
			text = "(a line longer than the limit was dropped)"
		}
		if text != "" {
			p.stderr.add(text)
			if lim.Allow() {
				p.t.log.Info("Plugin stderr", "hook", p.t.name, "line", text, "suppressedLines", suppressed)
				suppressed = 0
			} else {
				suppressed++
			}
		}
		if err != nil {
			return
		}
	}
}

// stop closes stdin, waits up to grace for the process to exit, then kills it.
func (p *process) stop(grace time.Duration) {
	p.stopped.Do(func() { closeAll(p.stdin) })
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.kill()
	<-p.done
}

// kill kills the process and its process group.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.log.Warn("Killing the plugin process failed", "hook", p.t.name, "error", err)
	}
}

// closeAll closes files whose close errors have no consequence (pipe ends).
func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// tail keeps the last bytes of a plugin's stderr.
type tail struct {
	max int
	mu  sync.Mutex
	buf []string
	n   int
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, line)
	t.n += len(line)
	for len(t.buf) > 1 && t.n > t.max {
		t.n -= len(t.buf[0])
		t.buf = t.buf[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return clip(strings.Join(t.buf, " | "), t.max)
}
