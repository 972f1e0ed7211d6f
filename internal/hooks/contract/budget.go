package contract

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Budget defaults.
const (
	// DefaultSessionTTL is how long an idle session's counter is kept.
	DefaultSessionTTL = 24 * time.Hour
	// DefaultMaxSessions caps the sessions whose counters are kept.
	DefaultMaxSessions = 100_000
	// DefaultPendingTTL is how long a reservation waits for its after-callback
	// before it is committed as executed.
	DefaultPendingTTL = time.Hour
	// DefaultMaxPending caps reservations awaiting their after-callback;
	// beyond it reservations are committed at once (never released).
	DefaultMaxPending = 1 << 16
)

// BudgetConfig configures Budgets.
type BudgetConfig struct {
	// SessionTTL: a session with no call for this long is forgotten, and its
	// budget restarts if it calls again. DefaultSessionTTL when 0.
	SessionTTL time.Duration
	// MaxSessions caps the tracked sessions. When the table is full of
	// sessions that have not expired, calls from NEW sessions with a budget
	// are denied (fail closed): evicting a live session would restart its
	// budget. DefaultMaxSessions when 0.
	MaxSessions int
	// PendingTTL bounds how long a reservation waits for its after-callback
	// (Decide runs no after phase); older ones are committed. DefaultPendingTTL when 0.
	PendingTTL time.Duration
	// MaxPending caps reservations awaiting their after-callback. DefaultMaxPending when 0.
	MaxPending int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Budgets holds exact per-session call counters. It is safe for concurrent
// use. Give each ContractScope hook its own Budgets, and hand the same one to
// the hook that replaces it when the configuration changes, so counters
// survive a push; never share one between two hooks in the same list, or
// every call counts twice.
//
// Each session's counter is one atomic word holding the committed count
// (calls that passed the whole before phase: executed calls; it never
// decreases) and the in-flight reservations (calls this hook allowed whose
// outcome is not known yet). Before reserves with a compare-and-swap loop, so
// committed+inflight never exceeds the budget, whatever the concurrency;
// After commits the reservation, or releases it when a later hook denied the
// call.
type Budgets struct {
	ttl        time.Duration
	maxSess    int
	pendingTTL time.Duration
	maxPending int
	now        func() time.Time

	mu        sync.RWMutex
	sessions  map[string]*session
	lastSweep atomic.Int64 // unix nanoseconds

	pmu     sync.Mutex
	pending map[*hooks.Call]reservation
}

// session is one session's counter: committed<<32 | inflight.
type session struct {
	state    atomic.Uint64
	lastUsed atomic.Int64 // unix nanoseconds
}

// reservation is a slot taken in Before and awaiting After.
type reservation struct {
	s  *session
	at int64 // unix nanoseconds
}

const (
	inflightMask = 1<<32 - 1
	committedOne = 1 << 32
)

// NewBudgets returns empty Budgets.
func NewBudgets(cfg BudgetConfig) (*Budgets, error) {
	if cfg.SessionTTL < 0 || cfg.MaxSessions < 0 || cfg.PendingTTL < 0 || cfg.MaxPending < 0 {
		return nil, fmt.Errorf("budget configuration: durations and caps must not be negative")
	}
	b := &Budgets{
		ttl:        orDefault(cfg.SessionTTL, DefaultSessionTTL),
		maxSess:    orDefault(cfg.MaxSessions, DefaultMaxSessions),
		pendingTTL: orDefault(cfg.PendingTTL, DefaultPendingTTL),
		maxPending: orDefault(cfg.MaxPending, DefaultMaxPending),
		now:        cfg.Now,
		sessions:   make(map[string]*session),
		pending:    make(map[*hooks.Call]reservation),
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.lastSweep.Store(b.now().UnixNano())
	return b, nil
}

func orDefault[T time.Duration | int](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// Used returns the session's executed (committed) and in-flight calls.
func (b *Budgets) Used(sessionID string) (committed, inflight int) {
	b.mu.RLock()
	s := b.sessions[sessionID]
	b.mu.RUnlock()
	if s == nil {
		return 0, 0
	}
	st := s.state.Load()
	return int(st >> 32), int(st & inflightMask)
}

// Sessions returns the number of tracked sessions.
func (b *Budgets) Sessions() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.sessions)
}

// exhausted reports whether the session has no slot left under max, without
// reserving one. A denied attempt still counts as activity, so a session that
// keeps calling after its budget is spent never idles out.
func (b *Budgets) exhausted(sessionID string, max int) bool {
	b.mu.RLock()
	s := b.sessions[sessionID]
	b.mu.RUnlock()
	if s == nil {
		return false
	}
	st := s.state.Load()
	if int64(st>>32)+int64(st&inflightMask) < int64(max) {
		return false
	}
	s.lastUsed.Store(b.now().UnixNano())
	return true
}

// reserveResult is the outcome of reserve.
type reserveResult int

const (
	reserved reserveResult = iota
	overBudget
	tableFull
)

// reserve takes one slot of sessionID's budget max for call. The lookup and
// the compare-and-swap happen under the read lock so that a concurrent sweep
// cannot remove the session between them (which would lose the count).
func (b *Budgets) reserve(call *hooks.Call, max int) reserveResult {
	now := b.now().UnixNano()
	b.maybeSweep(now)

	b.mu.RLock()
	s := b.sessions[budgetKey(call)]
	if s != nil {
		ok := s.tryReserve(max, now)
		b.mu.RUnlock()
		if !ok {
			return overBudget
		}
		b.track(call, s, now)
		return reserved
	}
	b.mu.RUnlock()

	b.mu.Lock()
	s = b.sessions[budgetKey(call)]
	if s == nil {
		if len(b.sessions) >= b.maxSess {
			b.sweepSessionsLocked(now)
		}
		if len(b.sessions) >= b.maxSess {
			b.mu.Unlock()
			return tableFull
		}
		s = &session{}
		b.sessions[budgetKey(call)] = s
	}
	ok := s.tryReserve(max, now)
	b.mu.Unlock()
	if !ok {
		return overBudget
	}
	b.track(call, s, now)
	return reserved
}

// tryReserve adds one in-flight call if committed+inflight < max.
func (s *session) tryReserve(max int, now int64) bool {
	s.lastUsed.Store(now)
	for {
		st := s.state.Load()
		if int64(st>>32)+int64(st&inflightMask) >= int64(max) {
			return false
		}
		if s.state.CompareAndSwap(st, st+1) {
			return true
		}
	}
}

// commit turns one in-flight reservation into an executed call.
func (s *session) commit() { s.state.Add(committedOne - 1) }

// release gives one in-flight reservation back.
func (s *session) release() { s.state.Add(^uint64(0)) }

// track remembers call's reservation until After. When the pending table is
// full the reservation is committed at once: the call counts as executed
// even if a later hook denies it, which errs on the strict side.
func (b *Budgets) track(call *hooks.Call, s *session, now int64) {
	b.pmu.Lock()
	if old, dup := b.pending[call]; dup {
		// The same *Call is in two before phases at once; keep the first
		// reservation pending and count the older one as executed.
		old.s.commit()
	}
	if len(b.pending) >= b.maxPending {
		b.pmu.Unlock()
		s.commit()
		return
	}
	b.pending[call] = reservation{s: s, at: now}
	b.pmu.Unlock()
}

// settle commits or releases call's reservation, if it has one: released
// when the call was denied (by a later hook, or the before phase was
// cancelled), committed for every other outcome.
func (b *Budgets) settle(call *hooks.Call, denied bool) {
	b.pmu.Lock()
	r, ok := b.pending[call]
	if ok {
		delete(b.pending, call)
	}
	b.pmu.Unlock()
	if !ok {
		return
	}
	if denied {
		r.s.release()
	} else {
		r.s.commit()
	}
}

// maybeSweep expires idle sessions and stale reservations, at most once per
// min(ttl, pendingTTL)/4.
func (b *Budgets) maybeSweep(now int64) {
	every := int64(min(b.ttl, b.pendingTTL) / 4)
	last := b.lastSweep.Load()
	if now-last < every || !b.lastSweep.CompareAndSwap(last, now) {
		return
	}
	b.pmu.Lock()
	for c, r := range b.pending {
		if now-r.at >= int64(b.pendingTTL) {
			r.s.commit()
			delete(b.pending, c)
		}
	}
	b.pmu.Unlock()
	b.mu.Lock()
	b.sweepSessionsLocked(now)
	b.mu.Unlock()
}

// sweepSessionsLocked forgets sessions idle for the TTL with nothing in flight.
func (b *Budgets) sweepSessionsLocked(now int64) {
	for id, s := range b.sessions {
		if now-s.lastUsed.Load() >= int64(b.ttl) && s.state.Load()&inflightMask == 0 {
			delete(b.sessions, id)
		}
	}
}
