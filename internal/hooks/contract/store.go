package contract

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
)

// RuleStateStore denies a call whose contract's counters could not be
// reached (the shared state store failed or did not answer in time).
const RuleStateStore = "stateStore"

// StateFailurePolicy says what a contract does with a call when its state
// store cannot count it.
type StateFailurePolicy string

const (
	// StateFailureFail denies the call (the default).
	StateFailureFail StateFailurePolicy = "Fail"
	// StateFailureIgnore allows the call uncounted.
	StateFailureIgnore StateFailurePolicy = "Ignore"
)

// ErrNotSent is wrapped by a Reserve error when the store holds nothing of
// the reservation for the caller to give back: nothing reached it (it was
// known to be down), it refused the reservation as late, or it gives back
// itself whatever it took.
var ErrNotSent = errors.New("not sent to the state store")

// Store counts the calls of contracts: session budgets, per-caller windows
// and per-caller, per-tool rate limits. The in-process store (Budgets and
// ratelimit.Windows) is exact within one gateway; a shared store (Redis)
// makes the same counts exact across every gateway that uses it.
type Store interface {
	// Reserve takes one call from every limit r names, all or nothing, and
	// returns the denial of the first limit that has no room. Retrying a
	// Reserve with the same r.ID counts the call once. An error wrapping
	// ErrNotSent means there is nothing to give back.
	Reserve(ctx context.Context, r *Reservation) (hooks.Verdict, error)
	// Settle commits r's session slot (executed) or gives it back; settling
	// twice changes nothing.
	Settle(ctx context.Context, r *Reservation, executed bool) error
	// Name names the store in denials ("redis 10.0.0.7:6379").
	Name() string
}

// Reservation is one call's claim on a contract's counters.
type Reservation struct {
	// ID is unique to the call.
	ID string
	// Call is the call being counted.
	Call *hooks.Call
	// Policy identifies the contract's policy across configuration pushes
	// (its uid); every counter is namespaced by it.
	Policy string
	// Session is the session budget's key (the verified caller and the
	// session id) and Owner the caller a new session counts against.
	Session, Owner string
	// MaxToolCalls is the session budget; 0 means none.
	MaxToolCalls int
	// Caller is whom the per-caller window counts; CallerCalls (0: none)
	// calls are allowed per CallerWindow.
	Caller       string
	CallerCalls  int
	CallerWindow time.Duration
	// RateRules identifies the policy's rate-limit rules; RatePerMinute is
	// the limit that applies to the call's tool (0: none), counted per
	// (Call.SenderID, Call.Tool).
	RateRules     string
	RatePerMinute int

	// Nth is set by a Reserve that allows the call and takes a session slot:
	// the call's place among the session's calls, counting those in flight.
	Nth int
}

// newReservationID returns 128 random bits in hex.
func newReservationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DenyOverBudget is the denial of a call beyond its session's budget.
func DenyOverBudget(r *Reservation) hooks.Verdict {
	return hooks.Deny(RuleMaxToolCalls, fmt.Sprintf(
		"Session %q has used its budget of %d tool calls", r.Call.SessionID, r.MaxToolCalls))
}

// DenyOverCallerQuota is the denial of a call beyond its caller's calls per window.
func DenyOverCallerQuota(r *Reservation) hooks.Verdict {
	return hooks.Deny(RuleMaxToolCallsPerSender, fmt.Sprintf(
		"Caller %q has made its %d tool calls allowed per %s, across all its sessions", r.Caller, r.CallerCalls, r.CallerWindow))
}

// DenyOverRateLimit is the denial of a call beyond its tool's rate limit.
func DenyOverRateLimit(r *Reservation) hooks.Verdict {
	return ratelimit.Denial(r.Call.SenderID, r.Call.Tool, r.RatePerMinute)
}

// localStore is the in-process Store of one policy: its Budgets and, when
// it has rate limits, its rate-limit hook.
type localStore struct {
	budgets *Budgets
	rate    *ratelimit.RateLimit // nil without rate limits
}

var _ Store = (*localStore)(nil)

func (s *localStore) Name() string { return "in-process counters" }

// Reserve counts the call against its caller's window, reserves a slot of
// its session budget and counts it against its rate limit, in that order;
// a rate-limit denial gives the budget slot back at once.
func (s *localStore) Reserve(ctx context.Context, r *Reservation) (hooks.Verdict, error) {
	call := r.Call
	b := s.budgets
	if r.CallerCalls > 0 {
		ok, full := b.senders(r.CallerWindow).Take(r.Caller, b.now(), r.CallerCalls)
		switch {
		case full:
			return hooks.Deny(RuleMaxToolCallsPerSender, fmt.Sprintf(
				"The per-caller budget table is full (%d callers within their window); caller %q cannot start one until others go idle",
				b.maxSess, r.Caller)), nil
		case !ok:
			return DenyOverCallerQuota(r), nil
		}
	}
	if r.MaxToolCalls > 0 {
		var res reserveResult
		res, r.Nth = b.reserve(call, r.MaxToolCalls)
		switch res {
		case overBudget:
			return DenyOverBudget(r), nil
		case tableFull:
			return hooks.Deny(RuleMaxToolCalls, fmt.Sprintf(
				"The call budget table is full (%d sessions within their idle timeout) and caller %q has its fair share of it; "+
					"session %q cannot start a budget until others expire",
				b.maxSess, r.Owner, call.SessionID)), nil
		case senderFull:
			return hooks.Deny(RuleMaxToolCalls, fmt.Sprintf(
				"Caller %q has %d sessions with a budget within their idle timeout, its limit; session %q cannot start one until some expire",
				r.Owner, b.maxPerSend, call.SessionID)), nil
		}
	}
	if s.rate != nil && r.RatePerMinute > 0 {
		v, err := s.rate.Before(ctx, call)
		if err != nil || !v.Allowed {
			b.settle(call, true)
			return v, err
		}
	}
	return hooks.Allow, nil
}

func (s *localStore) Settle(_ context.Context, r *Reservation, executed bool) error {
	s.budgets.settle(r.Call, !executed)
	return nil
}

// pendingTable remembers the reservations a shared store holds for calls
// whose after phase has not run yet. Entries older than ttl (calls decided
// without an after phase) are dropped: the store commits such a
// reservation itself when it expires.
type pendingTable struct {
	ttl       time.Duration
	mu        sync.Mutex
	calls     map[*hooks.Call]pendingEntry
	lastSweep time.Time
}

type pendingEntry struct {
	r  *Reservation
	at time.Time
}

func (p *pendingTable) put(r *Reservation) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[*hooks.Call]pendingEntry{}
		p.lastSweep = now
	}
	if now.Sub(p.lastSweep) >= p.ttl/4 {
		for c, e := range p.calls {
			if now.Sub(e.at) >= p.ttl {
				delete(p.calls, c)
			}
		}
		p.lastSweep = now
	}
	p.calls[r.Call] = pendingEntry{r: r, at: now}
}

func (p *pendingTable) take(call *hooks.Call) *Reservation {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.calls[call]
	if !ok {
		return nil
	}
	delete(p.calls, call)
	return e.r
}
