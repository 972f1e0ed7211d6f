// Package statestore keeps the counters of contract policies (session
// budgets, per-caller windows, rate limits) in Redis, or any server that
// speaks its protocol and runs its Lua scripts (Valkey, managed Redis), so
// that they are exact across every gateway replica that shares it and
// survive a gateway's restart.
//
// # Exactness
//
// One call's reservation is one Lua script, which Redis runs atomically:
// it checks the session budget, the caller's window and the tool's rate
// limit, and takes a slot of each only when all have room. The slot counts
// as executed from then on: a call that runs costs one round trip. A call
// that does not run after all (a later hook denied it) is released by a
// second script that gives its budget slot back. A gateway killed between
// the two leaves the call counted, so a crash errs strict. Windows are
// rings of one-sixtieth-of-the-window buckets, like the in-process
// limiter's, timed by the server's clock so that replicas with skewed
// clocks agree.
//
// Every reservation carries an id, and the script records an allowed one
// under it for a short while, so a retry (the client resends a script
// whose reply was lost) is answered from the record and never counts
// twice, and a release gives a slot back at most once. Releasing a
// reservation the server has not seen records it as cancelled, so one that
// reaches the server after its caller gave up on it takes nothing. A
// release that comes after the record expired changes nothing (strict).
//
// # Deadlines
//
// A call waits for its reservation at most Timeout from the moment it is
// written to the server while the server sends nothing (see pipeline.go):
// the time the gateway's own goroutines take to send it or to read the
// reply is not the store's. Each reservation carries its deadline on the
// server's clock (measured by the health checks, at the earliest it may
// be), and the script refuses to reserve after it: a reservation that
// reaches a stalled server and runs when it continues takes nothing, so a
// call that was denied never spends a budget. One that the server ran in
// time but whose reply came after its caller gave up is released.
//
// # Keys
//
// Keys are prefix{policy}:kind:..., with the policy's uid as the hash tag
// so that one script's keys are in one slot of a Redis Cluster. Session
// keys expire after the session TTL of idleness, window keys once the
// window has passed. The server must not evict keys (maxmemory-policy
// noeviction): an evicted counter restarts a budget.
package statestore

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
)

// Defaults of Options.
const (
	// DefaultTimeout is how long a call waits for a server that sends
	// nothing after its reservation was written. Only a stalled server
	// costs it: a call to one that answers returns with the reply. It is
	// sized for a busy host: on two cores shared ten times over, a
	// loopback redis-server was descheduled for up to 95 ms in the middle
	// of a script (LATENCY LATEST), and a shorter deadline would deny such
	// a server's calls; 250 ms keeps a wide margin over that and is still
	// short next to the tool calls it gates, and a server that stays
	// stalled is found down by the health check within half a second,
	// after which calls fail at once.
	DefaultTimeout = 250 * time.Millisecond
	// DefaultKeyPrefix starts every key.
	DefaultKeyPrefix = "toolhooks:"
	// minReleaseTimeout bounds a release at least this long: a release
	// that fails leaves the slot counted, and most releases are retried
	// in the background, off any call's path.
	minReleaseTimeout = 100 * time.Millisecond
	// recordTTL is how long an allowed reservation is recorded for retries
	// and its release: longer than a call's deadline, and than the minute a
	// gateway keeps retrying the release of a reservation whose outcome it
	// did not learn.
	recordTTL = 2 * time.Minute
	// lateRetries is how many times a reservation that the server ran
	// after its deadline (taking nothing) is sent again.
	lateRetries = 2
	// rateWindow is the window of the per-minute rate limits.
	rateWindow = time.Minute
)

// Options configure a Redis store.
type Options struct {
	// Address is host:port of the server.
	Address string
	// Username and Password authenticate (ACL user; Password alone for
	// requirepass); empty for none.
	Username, Password string
	// DB is the database number.
	DB int
	// TLS, when set, connects over TLS.
	TLS *tls.Config
	// KeyPrefix starts every key; DefaultKeyPrefix when empty.
	KeyPrefix string
	// Timeout bounds each operation of a call (the reservation, the
	// settle); DefaultTimeout when 0. A call the store cannot count in
	// time is decided by its policy's stateFailurePolicy.
	Timeout time.Duration
	// SessionTTL is how long an idle session's counter is kept
	// (contract.DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// Observe, when set, is told the duration and error of each operation
	// ("reserve", "release", "ping").
	Observe func(op string, d time.Duration, err error)
}

// Redis is a contract.Store in Redis. It is safe for concurrent use.
type Redis struct {
	client     *redis.Client
	name       string
	prefix     string
	timeout    time.Duration
	sessionTTL int64 // milliseconds
	observe    func(string, time.Duration, error)

	health health
	pipes  *pipelines
	// releasing counts the releases of releaseLater in flight.
	releasing atomic.Int64
}

var _ contract.Store = (*Redis)(nil)

//go:embed reserve.lua
var reserveLua string

//go:embed release.lua
var releaseLua string

var (
	reserveScript = redis.NewScript(reserveLua)
	releaseScript = redis.NewScript(releaseLua)
)

// New returns a store for opts and starts watching the server's health. It
// does not wait for the server: a store that cannot be reached fails the
// calls that need it and reports itself unhealthy until it answers.
func New(opts Options) (*Redis, error) {
	if opts.Address == "" {
		return nil, errors.New("state store: the Redis address is empty")
	}
	if opts.Timeout < 0 || opts.SessionTTL < 0 || opts.DB < 0 {
		return nil, errors.New("state store: the timeout, TTLs and database must not be negative")
	}
	s := &Redis{
		prefix:     opts.KeyPrefix,
		timeout:    opts.Timeout,
		sessionTTL: orDefault(opts.SessionTTL, contract.DefaultSessionTTL).Milliseconds(),
		observe:    opts.Observe,
	}
	if s.prefix == "" {
		s.prefix = DefaultKeyPrefix
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	scheme := "redis"
	if opts.TLS != nil {
		scheme = "rediss"
	}
	s.name = fmt.Sprintf("%s://%s/%d", scheme, opts.Address, opts.DB)
	s.client = redis.NewClient(&redis.Options{
		Addr:      opts.Address,
		Username:  opts.Username,
		Password:  opts.Password,
		DB:        opts.DB,
		TLSConfig: opts.TLS,
		// Each call bounds its own operations by its context.
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		// Reservations are idempotent, so resending one whose reply was lost
		// is safe; the call's deadline bounds the retries.
		MaxRetries:      2,
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 4 * time.Millisecond,
		PoolSize:        64,
		MinIdleConns:    4,
		// The client reports no library name: managed services may refuse CLIENT SETINFO.
		DisableIdentity: true,
	})
	s.pipes = newPipelines(dialer{addr: opts.Address, username: opts.Username, password: opts.Password, db: opts.DB, tls: opts.TLS},
		s.timeout, reserveScript.Hash(), s.evalReserve, s.health.suspect, s.health.serverClock,
		func(op *reserveOp) { s.releaseLater(op.keys[1], op.keys[0]) })
	s.health.start(s)
	return s, nil
}

func orDefault(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

// Name names the store: its scheme, address and database.
func (s *Redis) Name() string { return "redis " + s.name }

// Close stops watching the server and closes the connections.
func (s *Redis) Close() error {
	s.health.stop()
	s.pipes.stop()
	return s.client.Close()
}

// key returns prefix{policy}:parts..., joined by ':'.
func (s *Redis) key(policy string, parts ...string) string {
	n := len(s.prefix) + len(policy) + 2
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, s.prefix...)
	b = append(b, '{')
	b = append(b, policy...)
	b = append(b, '}')
	for _, p := range parts {
		b = append(b, ':')
		b = append(b, p...)
	}
	return string(b)
}

// Reserve runs the reservation script for r.
func (s *Redis) Reserve(ctx context.Context, r *contract.Reservation) (hooks.Verdict, error) {
	if err := s.health.failFast(); err != nil {
		return hooks.Verdict{}, err
	}
	keys := []string{
		s.key(r.Policy, "rsv", r.ID),
		s.key(r.Policy, "s", r.Session),
		s.key(r.Policy, "w", strconv.FormatInt(r.CallerWindow.Milliseconds(), 10), r.Caller),
		s.key(r.Policy, "r", r.RateRules, r.Call.SenderID+"\x00"+r.Call.Tool),
	}
	start := time.Now()
	args := []string{
		strconv.Itoa(r.MaxToolCalls), strconv.FormatInt(s.sessionTTL, 10),
		strconv.Itoa(r.CallerCalls), strconv.FormatInt(r.CallerWindow.Milliseconds(), 10),
		strconv.Itoa(r.RatePerMinute), strconv.FormatInt(rateWindow.Milliseconds(), 10),
		strconv.FormatInt(recordTTL.Milliseconds(), 10)}
	out, err := s.pipes.reserve(ctx, &reserveOp{keys: keys, args: args, budget: r.MaxToolCalls > 0})
	for try := 0; err == nil && out == "late" && try < lateRetries; try++ {
		// The server answers, but ran the reservation after its deadline (a
		// busy host): it took nothing, so sending it again cannot count twice.
		out, err = s.pipes.reserve(ctx, &reserveOp{keys: keys, args: args, budget: r.MaxToolCalls > 0})
	}
	if err == nil && out == "late" {
		// The server ran it after the call gave up waiting: nothing was taken.
		err = notSent{fmt.Errorf("the state store ran the reservation after its deadline (%s) and took nothing", s.timeout)}
	}
	s.done(ctx, "reserve", start, err)
	if err != nil {
		return hooks.Verdict{}, err
	}
	if n, ok := strings.CutPrefix(out, "ok:"); ok {
		if r.Nth, err = strconv.Atoi(n); err != nil || r.Nth < 1 {
			return hooks.Verdict{}, fmt.Errorf("the reservation script answered %q", out)
		}
		return hooks.Allow, nil
	}
	switch out {
	case "ok":
		if r.MaxToolCalls > 0 {
			// A session slot was asked for, so the script names the call's place.
			break
		}
		return hooks.Allow, nil
	case "budget":
		return contract.DenyOverBudget(r), nil
	case "caller":
		return contract.DenyOverCallerQuota(r), nil
	case "rate":
		return contract.DenyOverRateLimit(r), nil
	case "cancelled", "released":
		return hooks.Verdict{}, errors.New("the reservation was " + out)
	}
	return hooks.Verdict{}, fmt.Errorf("the reservation script answered %q", out)
}

// evalReserve runs op by the script's text, for a server that lost it.
func (s *Redis) evalReserve(ctx context.Context, op *reserveOp) (string, error) {
	args := make([]any, 0, len(op.args)+1)
	for _, a := range op.args {
		args = append(args, a)
	}
	return reserveScript.Eval(ctx, s.client, op.keys, append(args, op.deadline)...).Text()
}

// Settle does nothing for an executed call, which its reservation already
// counted, and releases the budget slot of one that did not execute.
func (s *Redis) Settle(ctx context.Context, r *contract.Reservation, executed bool) error {
	if executed || r.MaxToolCalls == 0 {
		return nil
	}
	session, record := s.key(r.Policy, "s", r.Session), s.key(r.Policy, "rsv", r.ID)
	err := s.release(ctx, session, record)
	if err != nil {
		// The slot must not stay taken by a call that did not run.
		s.releaseLater(session, record)
	}
	return err
}

// release runs the release script for the reservation recorded under
// record in session.
func (s *Redis) release(ctx context.Context, session, record string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(s.timeout, minReleaseTimeout))
	defer cancel()
	start := time.Now()
	err := releaseScript.Run(ctx, s.client, []string{session, record}, recordTTL.Milliseconds()).Err()
	s.done(ctx, "release", start, err)
	return err
}

// maxReleasesInFlight bounds the releases of releaseLater; beyond it a
// reservation stays counted (strict) rather than add load to a store that
// is failing.
const maxReleasesInFlight = 1024

// releaseLater gives back, in the background, the session slot of a
// reservation recorded under record for a call that did not run: one whose
// caller gave up on it (and denied the call) but that the server may have
// taken (its reply came after the caller gave up, or its connection failed
// before the reply), or one whose release failed. Releasing a reservation
// the server has not run records it cancelled, so that it takes nothing if
// it runs later; so the release is retried, with backoff, until the server
// answers or a minute has passed.
func (s *Redis) releaseLater(session, record string) {
	if s.releasing.Add(1) > maxReleasesInFlight {
		s.releasing.Add(-1)
		return
	}
	go func() {
		defer s.releasing.Add(-1)
		wait := 50 * time.Millisecond
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); wait = min(2*wait, 2*time.Second) {
			if s.release(context.Background(), session, record) == nil {
				return
			}
			select {
			case <-s.health.stopped:
				return
			case <-time.After(wait):
			}
		}
	}()
}

// done reports an operation to Observe and tells the health watcher about
// a failure that is the server's (not the caller giving up).
func (s *Redis) done(ctx context.Context, op string, start time.Time, err error) {
	if s.observe != nil {
		s.observe(op, time.Since(start), err)
	}
	if err != nil && !errors.Is(context.Cause(ctx), context.Canceled) {
		s.health.suspect()
	}
}

// Ready reports whether the server answered its last health check, and
// the error of the last failed one.
func (s *Redis) Ready() error { return s.health.err() }

// health watches the server with PING (and loads the scripts): every
// second while it answers,
// backing off from 50 ms to 2 s while it does not. While it is down, calls
// fail at once instead of each waiting for its deadline.
type health struct {
	mu      sync.Mutex
	checked bool
	down    error // nil while the server answers
	since   time.Time
	wake    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// offset is the server's clock minus this host's (microseconds), at
	// the least that the most precise of the last checks allows; clockKnown
	// is set once one has measured it precisely enough.
	offset     atomic.Int64
	clockKnown atomic.Bool
	clock      clockSamples // the watcher's own
}

// clockSamples are the last checks' measures of the server's clock. The
// server read its clock between the check's start and its reply: taking
// the middle errs by at most half the round trip, so the sample of the
// shortest round trip is the most precise.
type clockSamples struct {
	offset [16]int64
	rtt    [16]time.Duration
	n      int
}

func (c *clockSamples) add(offset int64, rtt time.Duration) {
	c.offset[c.n%len(c.offset)], c.rtt[c.n%len(c.rtt)] = offset, rtt
	c.n++
}

// best returns the sample of the shortest round trip.
func (c *clockSamples) best() (int64, time.Duration) {
	b := 0
	for i := 1; i < min(c.n, len(c.rtt)); i++ {
		if c.rtt[i] < c.rtt[b] {
			b = i
		}
	}
	return c.offset[b], c.rtt[b]
}

// serverClock returns the server's clock minus this host's, in
// microseconds, once a health check has measured it.
func (h *health) serverClock() (int64, bool) {
	return h.offset.Load(), h.clockKnown.Load()
}

func (h *health) start(s *Redis) {
	h.wake = make(chan struct{}, 1)
	h.stopped = make(chan struct{})
	go h.watch(s)
}

func (h *health) stop() { h.once.Do(func() { close(h.stopped) }) }

// suspect asks for a check now.
func (h *health) suspect() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *health) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked {
		return errors.New("not checked yet")
	}
	return h.down
}

// failFast returns an error while the server is known to be down.
func (h *health) failFast() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		return nil
	}
	return notSent{fmt.Errorf("unreachable since %s: %w", h.since.UTC().Format(time.RFC3339), h.down)}
}

// notSent is the error of a reservation that took nothing: not sent (to a
// server known to be down, say), or refused by the server as late. It wraps
// contract.ErrNotSent as well as the cause.
type notSent struct{ error }

func (e notSent) Unwrap() []error { return []error{e.error, contract.ErrNotSent} }

func (h *health) watch(s *Redis) {
	const (
		every   = time.Second
		backoff = 50 * time.Millisecond
		maxWait = 2 * time.Second
	)
	wait := time.Duration(0)
	for {
		select {
		case <-h.stopped:
			return
		case <-h.wake:
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(s.timeout, 500*time.Millisecond))
		start := time.Now()
		// The scripts are loaded with each check, so that a call's first
		// reservation (after a start, a server restart or a SCRIPT FLUSH)
		// does not spend its deadline on loading one.
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Ping(ctx)
			// SCRIPT LOAD itself: Script.Load would take the pipelined
			// command's empty reply, before it ran, for the script's hash.
			p.ScriptLoad(ctx, reserveLua)
			p.ScriptLoad(ctx, releaseLua)
			return nil
		})
		if err == nil {
			// The server's clock, in a round trip of its own, as short as
			// can be.
			t0 := time.Now()
			if now, err := s.client.Time(ctx).Result(); err == nil {
				rtt := time.Since(t0)
				h.clock.add(now.UnixMicro()-t0.Add(rtt/2).UnixMicro(), rtt)
				if offset, rtt := h.clock.best(); rtt < s.timeout/2 {
					// The earliest the server's clock may be: the scripts
					// then refuse a reservation no later than its caller
					// gives up on it.
					h.offset.Store(offset - (rtt / 2).Microseconds() - 1)
					h.clockKnown.Store(true)
				}
			}
		}
		cancel()
		if s.observe != nil {
			s.observe("ping", time.Since(start), err)
		}
		h.mu.Lock()
		switch {
		case err == nil:
			h.down = nil
			wait = every
		case h.down == nil:
			h.down, h.since = err, time.Now()
			wait = backoff
		default:
			h.down = err
			wait = min(wait*2, maxWait)
		}
		h.checked = true
		h.mu.Unlock()
	}
}
