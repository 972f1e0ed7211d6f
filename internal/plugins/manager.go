// Package plugins is the PluginHook kind: its spec (Spec, Validate) and the
// gateway's plugin runtime. It runs plugins over the stdio JSON-RPC protocol
// (with a Node.js bridge for JavaScript plugins) or over HTTP, applies each
// plugin's timeout, failure policy and tool filter, guards it with a circuit
// breaker, and delivers after-phase events through a bounded queue that never
// delays a tool call.
//
// A Manager builds the hooks of PluginHook entries (Build). Build is called
// on every configuration push, so plugins are shared across pushes: a plugin is
// keyed by its policy's UID (or hook name) and a hash of its transport, and a
// push that keeps them reuses the running process or HTTP client. Timeout,
// failure policy, events and tool filter are per build and never restart
// anything. A plugin stops when Retain is called with a configuration that no
// longer has it, when every hook built for it has become unreachable (the
// executors holding them were replaced and their calls finished), or on Close.
//
// JavaScript plugins: a stdio transport whose command is node and whose first
// argument is a .js, .mjs or .cjs file runs that file through the embedded
// bridge (see Argv and js/bridge.mjs), so a plugin file written for the
// bridge's hook API runs unchanged:
//
//	stdio: {command: node, args: ["/plugins/deny-shell.mjs"]}
package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Defaults of Options.
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 10 * time.Second
	DefaultAfterQueueSize   = 256
	DefaultMaxRestarts      = 5
	DefaultRestartBackoff   = 100 * time.Millisecond
	DefaultMaxRestartDelay  = 10 * time.Second
	DefaultGiveUpDelay      = 30 * time.Second
	// DefaultMaxTimeouts is how many calls in a row a stdio plugin may let
	// time out before its process is taken for wedged and killed.
	DefaultMaxTimeouts = 3
	DefaultStopGrace   = 2 * time.Second
)

// Options configure a Manager. The zero value is usable.
type Options struct {
	// Logger logs plugin processes' lifecycle, their stderr and swallowed
	// after-phase failures; nil means slog.Default().
	Logger *slog.Logger
	// Registry receives the plugin metrics; nil registers them nowhere.
	Registry prometheus.Registerer
	// BreakerThreshold is how many consecutive before-call failures open a
	// plugin's circuit (default DefaultBreakerThreshold; negative disables the breaker).
	BreakerThreshold int
	// BreakerCooldown is how long an open circuit fails fast before a probe
	// call is let through (default DefaultBreakerCooldown).
	BreakerCooldown time.Duration
	// AfterQueueSize bounds each plugin's queue of after-phase events
	// (default DefaultAfterQueueSize); events beyond it are dropped and counted.
	AfterQueueSize int
	// MaxRestarts is how many times in a row a stdio plugin that exits
	// without having answered a request is restarted before the gateway gives
	// up for GiveUpDelay (default DefaultMaxRestarts).
	MaxRestarts int
	// RestartBackoff is the delay before the first restart, doubled for each
	// further one up to DefaultMaxRestartDelay (default DefaultRestartBackoff).
	RestartBackoff time.Duration
	// GiveUpDelay is how long after giving up a call may start the plugin
	// again (default DefaultGiveUpDelay).
	GiveUpDelay time.Duration
	// MaxTimeouts is how many calls in a row a stdio plugin process may let
	// time out before it is taken for wedged (a busy loop that never
	// replies): its process group is killed and it is restarted with the
	// usual backoff (default DefaultMaxTimeouts).
	MaxTimeouts int
	// StopGrace is how long a stopping plugin process has to exit after its
	// stdin is closed before it is killed (default DefaultStopGrace).
	StopGrace time.Duration
	// Now is the clock of the circuit breakers and restarts; nil means time.Now.
	Now func() time.Time
	// Token, when set, is the gateway's credential for HTTP plugins: every
	// request carries it as "Authorization: Bearer <token>". When it fails,
	// the call fails (pluginUnavailable) and the failure policy applies.
	// Stdio plugins never see it.
	Token TokenSource
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BreakerThreshold == 0 {
		o.BreakerThreshold = DefaultBreakerThreshold
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = DefaultBreakerCooldown
	}
	if o.AfterQueueSize <= 0 {
		o.AfterQueueSize = DefaultAfterQueueSize
	}
	if o.MaxRestarts <= 0 {
		o.MaxRestarts = DefaultMaxRestarts
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = DefaultRestartBackoff
	}
	if o.GiveUpDelay <= 0 {
		o.GiveUpDelay = DefaultGiveUpDelay
	}
	if o.MaxTimeouts <= 0 {
		o.MaxTimeouts = DefaultMaxTimeouts
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Manager runs the plugins of the configurations in force. It is safe for
// concurrent use; create it with New and release it with Close.
type Manager struct {
	opts Options
	log  *slog.Logger
	m    *metrics

	mu      sync.Mutex
	closed  bool
	plugins map[string]*plugin // by key
	byName  map[string]*plugin // the latest plugin built for each hook name
	stops   sync.WaitGroup     // plugins being stopped in the background
}

// ErrClosed is returned by Build after Close.
var ErrClosed = errors.New("plugin manager is closed")

// New returns a Manager and registers its metrics on opts.Registry.
func New(opts Options) (*Manager, error) {
	opts.defaults()
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	return &Manager{opts: opts, log: opts.Logger, m: m, plugins: map[string]*plugin{}, byName: map[string]*plugin{}}, nil
}

// Build returns the runtime hook of a PluginHook entry, starting its plugin
// or reusing the running one. An error (an unusable CA bundle, say) makes the
// entry deny as unenforceable. r.Spec must have passed Validate.
func (m *Manager) Build(r Ref) (hooks.Hook, error) {
	if r.Spec == nil {
		return nil, fmt.Errorf("hook %s has no plugin spec: %w", r.Name, hooks.ErrInvalidSpec)
	}
	key := pluginKey(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	p := m.plugins[key]
	if p == nil {
		var err error
		if p, err = m.newPlugin(r, key); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", r.Name, err)
		}
		m.plugins[key] = p
	}
	p.refs++
	m.byName[r.Name] = p
	hk := &pluginHook{p: p, name: r.Name, before: r.Spec.Before, after: r.Spec.After, timeout: r.Spec.Timeout(),
		spec: *r.Spec}
	runtime.AddCleanup(hk, m.release, p)
	return hk, nil
}

// release drops one reference to p, made by a hook that became unreachable,
// and stops p when it was the last.
func (m *Manager) release(p *plugin) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p.refs--
	if p.refs > 0 || m.plugins[p.key] != p {
		return
	}
	m.log.Info("Stopping plugin no hook uses any more", "hook", p.name)
	m.removeLocked(p)
}

// Retain stops the plugins not in live (by policy and transport), for a
// gateway to call after a configuration was applied with the PluginHook
// entries it holds. Calls still running on hooks of an earlier configuration
// fail with pluginUnavailable.
func (m *Manager) Retain(live []Ref) {
	keep := map[string]bool{}
	for _, r := range live {
		if r.Spec != nil {
			keep[pluginKey(r)] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, p := range m.plugins {
		if !keep[key] {
			m.log.Info("Stopping plugin removed from the configuration", "hook", p.name)
			m.removeLocked(p)
		}
	}
}

// removeLocked forgets p and stops it in the background.
func (m *Manager) removeLocked(p *plugin) {
	delete(m.plugins, p.key)
	if m.byName[p.name] == p {
		delete(m.byName, p.name)
	}
	m.stops.Go(p.close)
}

// States returns each plugin hook's circuit breaker state by hook name.
func (m *Manager) States() map[string]State {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]State, len(m.byName))
	for name, p := range m.byName {
		out[name] = p.br.current()
	}
	return out
}

// Degraded returns, sorted, the names of the plugin hooks whose circuit is not
// closed (open, or half-open waiting for a probe), for the gateway to report.
func (m *Manager) Degraded() []string {
	var out []string
	for name, st := range m.States() {
		if st != StateClosed {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Close stops every plugin and waits for them; later Builds fail with ErrClosed.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for _, p := range m.plugins {
		m.removeLocked(p)
	}
	m.mu.Unlock()
	m.stops.Wait()
}

// pluginKey identifies a plugin across configurations: its policy and transport.
func pluginKey(r Ref) string {
	id := r.Policy.UID
	if id == "" {
		id = r.Name
	}
	b, err := json.Marshal(struct {
		HTTP  *HTTPSpec  `json:"http,omitempty"`
		Stdio *StdioSpec `json:"stdio,omitempty"`
	}{r.Spec.HTTP, r.Spec.Stdio})
	if err != nil { // plain data types: cannot happen
		panic(fmt.Sprintf("marshal plugin transport: %v", err))
	}
	sum := sha256.Sum256(b)
	return id + "/" + hex.EncodeToString(sum[:8])
}

// plugin is one running plugin: its transport, breaker and after-phase queue,
// shared by the hooks built for it.
type plugin struct {
	key, name string
	tr        transport
	br        *breaker
	m         *metrics
	log       *slog.Logger
	logLimit  *rate.Limiter // for swallowed after-phase failures and drops
	after     chan afterEvent
	quit      chan struct{}
	worker    sync.WaitGroup
	refs      int // guarded by Manager.mu
}

// afterEvent is one queued hook_after call.
type afterEvent struct {
	params  *params
	timeout time.Duration
}

func (m *Manager) newPlugin(r Ref, key string) (*plugin, error) {
	var tr transport
	switch {
	case r.Spec.HTTP != nil:
		t, err := newHTTPTransport(r.Spec.HTTP, m.opts.Token)
		if err != nil {
			return nil, err
		}
		tr = t
	case r.Spec.Stdio != nil:
		tr = newStdioTransport(r.Name, r.Spec.Stdio, restartPolicy{
			maxRestarts: m.opts.MaxRestarts,
			maxTimeouts: m.opts.MaxTimeouts,
			backoff:     m.opts.RestartBackoff,
			maxBackoff:  DefaultMaxRestartDelay,
			giveUpDelay: m.opts.GiveUpDelay,
			stopGrace:   m.opts.StopGrace,
		}, m.log, m.m, m.opts.Now)
	default:
		return nil, errNoTransport
	}
	p := &plugin{
		key: key, name: r.Name, tr: tr, m: m.m, log: m.log,
		br:       newBreaker(m.opts.BreakerThreshold, m.opts.BreakerCooldown, m.opts.Now),
		logLimit: rate.NewLimiter(1, 5),
		after:    make(chan afterEvent, m.opts.AfterQueueSize),
		quit:     make(chan struct{}),
	}
	p.worker.Go(p.deliverAfter)
	return p, nil
}

// close stops the after-phase worker (queued events are discarded) and the transport.
func (p *plugin) close() {
	close(p.quit)
	p.worker.Wait()
	p.tr.close()
}

// deliverAfter sends queued after-phase events, one at a time and in order.
func (p *plugin) deliverAfter() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.quit
		cancel()
	}()
	for {
		select {
		case ev := <-p.after:
			p.sendAfter(ctx, ev)
		case <-p.quit:
			return
		}
	}
}

func (p *plugin) sendAfter(ctx context.Context, ev afterEvent) {
	if p.br.current() != StateClosed {
		p.m.failed(p.name, KindCircuitOpen)
		return
	}
	cctx, cancel := context.WithTimeoutCause(ctx, ev.timeout, errTimedOut)
	defer cancel()
	err := p.tr.notify(cctx, methodAfter, ev.params)
	if err == nil || ctx.Err() != nil {
		return
	}
	k := FailureKind(err)
	if errors.Is(err, errTimedOut) {
		k, err = KindTimeout, &Error{Kind: KindTimeout, Err: err}
	}
	if k == "" {
		k = KindUnavailable
	}
	p.m.failed(p.name, k)
	if p.logLimit.Allow() {
		p.log.Warn("Plugin after-phase call failed", "hook", p.name, "kind", string(k), "error", err)
	}
}
