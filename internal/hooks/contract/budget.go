package contract

import (
	"container/heap"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
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
	// DefaultMaxSessionsPerSender caps the live sessions of one caller, so
	// that one caller cannot fill the table for everyone.
	DefaultMaxSessionsPerSender = 10_000
)

// BudgetConfig configures Budgets.
type BudgetConfig struct {
	// SessionTTL: a session with no call for this long is forgotten, and its
	// budget restarts if it calls again. DefaultSessionTTL when 0.
	SessionTTL time.Duration
	// MaxSessions caps the tracked sessions. When the table is full of
	// sessions that have not expired, a NEW session of a caller below its
	// fair share (MaxSessions divided by the callers with sessions, the new
	// one included) takes the place of the idlest session of a caller above
	// its share; any other new session is denied (fail closed). A caller
	// within its share never loses a session. An evicted session's count is
	// remembered (the last MaxSessions evictions), so that it resumes, not
	// restarts, its budget if it comes back. DefaultMaxSessions when 0.
	MaxSessions int
	// PendingTTL bounds how long a reservation waits for its after-callback
	// (Decide runs no after phase); older ones are committed. DefaultPendingTTL when 0.
	PendingTTL time.Duration
	// MaxPending caps reservations awaiting their after-callback. DefaultMaxPending when 0.
	MaxPending int
	// MaxSessionsPerSender caps the live sessions of one caller (the
	// authenticated identity; calls without one share a single quota); a
	// new session over it is denied. DefaultMaxSessionsPerSender when 0,
	// and never more than MaxSessions.
	MaxSessionsPerSender int
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
//
// Sessions expire through a min-heap ordered by when each was last seen
// to be used, so that finding the expired ones costs O(log n) each and a
// full table with none expired answers in O(1). Each caller's sessions are
// in a heap of the same order too, so that a full table finds a caller's
// idlest session in O(log n) (and the callers above their share in
// O(callers)).
type Budgets struct {
	ttl        time.Duration
	maxSess    int
	maxPerSend int
	pendingTTL time.Duration
	maxPending int
	now        func() time.Time

	mu        sync.RWMutex
	sessions  map[string]*session
	expiry    expiryHeap                // every session, by at
	owners    map[string]*ownerHeap     // each sender's live sessions, by at
	evicted   map[string]evictedSession // the last maxSess evicted sessions, by key
	evictRing []evictedKey              // evicted's keys, oldest first
	evictions uint64                    // evictions so far
	lastSweep atomic.Int64              // unix nanoseconds

	pmu     sync.Mutex
	pending map[*hooks.Call]reservation

	smu          sync.Mutex
	senderCounts map[time.Duration]*ratelimit.SenderWindows // by window
}

// senders returns the per-caller counters of window, kept for as long as
// the Budgets (across configuration changes, like the session counters).
func (b *Budgets) senders(window time.Duration) *ratelimit.SenderWindows {
	b.smu.Lock()
	defer b.smu.Unlock()
	w, ok := b.senderCounts[window]
	if !ok {
		if b.senderCounts == nil {
			b.senderCounts = map[time.Duration]*ratelimit.SenderWindows{}
		}
		w = ratelimit.NewSenderWindows(window, b.maxSess)
		b.senderCounts[window] = w
	}
	return w
}

// callerOf is whom a per-caller budget counts a call against: the verified
// identity, or the sender the call names where there is none (offline checks).
func callerOf(call *hooks.Call) string {
	if call.Caller != nil {
		return call.Caller.Username
	}
	return call.SenderID
}

// session is one session's counter: committed<<32 | inflight.
type session struct {
	state    atomic.Uint64
	lastUsed atomic.Int64 // unix nanoseconds

	// Under Budgets.mu: the table key, the sender whose quota it counts
	// against, its places in the expiry heap and in its sender's heap, and
	// the lastUsed it is ordered by there (never after lastUsed).
	key, sender string
	index       int
	ownerIndex  int
	at          int64
}

// ownerHeap orders one sender's sessions by at (container/heap).
type ownerHeap []*session

func (h ownerHeap) Len() int           { return len(h) }
func (h ownerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h ownerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].ownerIndex, h[j].ownerIndex = i, j
}
func (h *ownerHeap) Push(x any) {
	s := x.(*session)
	s.ownerIndex = len(*h)
	*h = append(*h, s)
}
func (h *ownerHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}

// expiryHeap orders sessions by at (container/heap).
type expiryHeap []*session

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	s := x.(*session)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *expiryHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
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
	if cfg.MaxSessionsPerSender < 0 {
		return nil, fmt.Errorf("budget configuration: the per-sender session cap must not be negative")
	}
	b := &Budgets{
		ttl:        orDefault(cfg.SessionTTL, DefaultSessionTTL),
		maxSess:    orDefault(cfg.MaxSessions, DefaultMaxSessions),
		maxPerSend: orDefault(cfg.MaxSessionsPerSender, DefaultMaxSessionsPerSender),
		pendingTTL: orDefault(cfg.PendingTTL, DefaultPendingTTL),
		maxPending: orDefault(cfg.MaxPending, DefaultMaxPending),
		now:        cfg.Now,
		sessions:   make(map[string]*session),
		owners:     make(map[string]*ownerHeap),
		evicted:    make(map[string]evictedSession),
		pending:    make(map[*hooks.Call]reservation),
	}
	b.maxPerSend = min(b.maxPerSend, b.maxSess)
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
	senderFull
)

// reserve takes one slot of sessionID's budget max for call and, once
// reserved, returns the call's place among the session's calls (in-flight
// ones included). The lookup and the compare-and-swap happen under the read
// lock so that a concurrent sweep cannot remove the session between them
// (which would lose the count).
func (b *Budgets) reserve(call *hooks.Call, max int) (reserveResult, int) {
	now := b.now().UnixNano()
	b.maybeSweep(now)

	b.mu.RLock()
	s := b.sessions[budgetKey(call)]
	if s != nil {
		nth, ok := s.tryReserve(max, now)
		b.mu.RUnlock()
		if !ok {
			return overBudget, 0
		}
		b.track(call, s, now)
		return reserved, nth
	}
	b.mu.RUnlock()

	b.mu.Lock()
	key := budgetKey(call)
	s = b.sessions[key]
	if s == nil {
		sender := senderOf(call)
		if len(b.sessions) >= b.maxSess || b.ownedBy(sender) >= b.maxPerSend {
			b.expireLocked(now)
		}
		switch {
		case len(b.sessions) >= b.maxSess && (b.ownedBy(sender) >= b.maxPerSend || !b.evictForLocked(sender)):
			b.mu.Unlock()
			return tableFull, 0
		case b.ownedBy(sender) >= b.maxPerSend:
			b.mu.Unlock()
			return senderFull, 0
		}
		s = &session{key: key, sender: sender, at: now}
		s.lastUsed.Store(now)
		if e, ok := b.evicted[key]; ok {
			if now-e.lastUsed < int64(b.ttl) { // else it would have expired
				s.state.Store(e.committed << 32)
			}
			delete(b.evicted, key)
		}
		b.sessions[key] = s
		heap.Push(&b.expiry, s)
		o := b.owners[sender]
		if o == nil {
			o = &ownerHeap{}
			b.owners[sender] = o
		}
		heap.Push(o, s)
	}
	nth, ok := s.tryReserve(max, now)
	b.mu.Unlock()
	if !ok {
		return overBudget, 0
	}
	b.track(call, s, now)
	return reserved, nth
}

// ownedBy returns the number of live sessions of sender.
func (b *Budgets) ownedBy(sender string) int {
	if o := b.owners[sender]; o != nil {
		return o.Len()
	}
	return 0
}

// fairShare is the sessions each caller may keep when the table is full,
// with sender among the callers.
func (b *Budgets) fairShare(sender string) int {
	n := len(b.owners)
	if b.owners[sender] == nil {
		n++
	}
	return b.maxSess / n
}

// evictForLocked makes room in the full table for a new session of sender
// when sender is below its fair share: it forgets the idlest session of
// the callers above their share (there is one, or the table would not be
// full), remembering its committed count. It reports whether it did.
func (b *Budgets) evictForLocked(sender string) bool {
	share := b.fairShare(sender)
	if b.ownedBy(sender) >= share {
		return false
	}
	var victim *session
	for _, o := range b.owners {
		if o.Len() <= share {
			continue
		}
		if s := b.idlestLocked(o); victim == nil || s.at < victim.at || (s.at == victim.at && s.key < victim.key) {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	b.forgetLocked(victim)
	if len(b.evictRing) >= b.maxSess {
		if old := b.evictRing[0]; b.evicted[old.key].seq == old.seq {
			delete(b.evicted, old.key)
		}
		b.evictRing = b.evictRing[1:]
	}
	b.evictions++
	st := victim.state.Load()
	b.evicted[victim.key] = evictedSession{committed: st>>32 + st&inflightMask, lastUsed: victim.lastUsed.Load(), seq: b.evictions}
	b.evictRing = append(b.evictRing, evictedKey{victim.key, b.evictions})
	return true
}

// evictedSession is what is kept of an evicted session: its committed
// calls (its calls in flight are committed as executed), when it was last
// used, and which eviction it was.
type evictedSession struct {
	committed uint64
	lastUsed  int64
	seq       uint64
}

// evictedKey is an entry of the eviction ring.
type evictedKey struct {
	key string
	seq uint64
}

// idlestLocked returns the session of o used least recently, moving the
// sessions used since they were ordered to their places first.
func (b *Budgets) idlestLocked(o *ownerHeap) *session {
	for {
		s := (*o)[0]
		last := s.lastUsed.Load()
		if last <= s.at {
			return s
		}
		b.reorderLocked(s, last)
	}
}

// reorderLocked moves s to its place in both heaps for at.
func (b *Budgets) reorderLocked(s *session, at int64) {
	s.at = at
	heap.Fix(&b.expiry, s.index)
	heap.Fix(b.owners[s.sender], s.ownerIndex)
}

// forgetLocked removes s from the table and both heaps.
func (b *Budgets) forgetLocked(s *session) {
	heap.Remove(&b.expiry, s.index)
	o := b.owners[s.sender]
	heap.Remove(o, s.ownerIndex)
	if o.Len() == 0 {
		delete(b.owners, s.sender)
	}
	delete(b.sessions, s.key)
}

// senderOf is the caller a new session counts against.
func senderOf(call *hooks.Call) string {
	if call.Caller == nil {
		return ""
	}
	return call.Caller.Username
}

// tryReserve adds one in-flight call if committed+inflight < max and
// returns committed+inflight with it.
func (s *session) tryReserve(max int, now int64) (int, bool) {
	s.lastUsed.Store(now)
	for {
		st := s.state.Load()
		used := int64(st>>32) + int64(st&inflightMask)
		if used >= int64(max) {
			return 0, false
		}
		if s.state.CompareAndSwap(st, st+1) {
			return int(used) + 1, true
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
	b.expireLocked(now)
	b.mu.Unlock()
}

// expireLocked forgets the sessions idle for the TTL with nothing in
// flight, oldest first, stopping at the first that is not idle that long.
// A session used since it was ordered moves to its place; one with a call
// in flight waits another TTL.
func (b *Budgets) expireLocked(now int64) {
	ttl := int64(b.ttl)
	for len(b.expiry) > 0 {
		s := b.expiry[0]
		if now-s.at < ttl {
			return
		}
		switch last := s.lastUsed.Load(); {
		case last > s.at:
			b.reorderLocked(s, last)
		case s.state.Load()&inflightMask != 0:
			b.reorderLocked(s, now)
		default:
			b.forgetLocked(s)
		}
	}
}
