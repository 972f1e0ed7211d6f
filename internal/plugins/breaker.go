package plugins

import (
	"sync"
	"time"
)

// State is a circuit breaker's state.
type State string

// Circuit breaker states.
const (
	// StateClosed: the plugin is called normally.
	StateClosed State = "closed"
	// StateOpen: the plugin failed too often and is not called until the cool-down ends.
	StateOpen State = "open"
	// StateHalfOpen: the cool-down ended; one probe call is let through.
	StateHalfOpen State = "half-open"
)

// breaker is a consecutive-failure circuit breaker. threshold <= 0 disables it.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	state    State
	failures int
	openedAt time.Time
	probing  bool
}

func newBreaker(threshold int, cooldown time.Duration, now func() time.Time) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: now, state: StateClosed}
}

// allow reports whether a before-call may go to the plugin, and whether it is
// the half-open probe (whose outcome decides the next state).
func (b *breaker) allow() (probe, ok bool) {
	if b.threshold <= 0 {
		return false, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case StateClosed:
		return false, true
	case StateOpen:
		if b.now().Sub(b.openedAt) < b.cooldown {
			return false, false
		}
		b.state = StateHalfOpen
	}
	if b.probing {
		return false, false
	}
	b.probing = true
	return true, true
}

// success records a call that got a valid reply: the breaker closes.
func (b *breaker) success(probe bool) {
	if b.threshold <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	b.failures = 0
	b.state = StateClosed
}

// failure records a failed call; it reports whether the breaker opened.
func (b *breaker) failure(probe bool) bool {
	if b.threshold <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch b.state {
	case StateHalfOpen:
		if !probe {
			return false
		}
	case StateOpen:
		return false
	default:
		b.failures++
		if b.failures < b.threshold {
			return false
		}
	}
	b.state = StateOpen
	b.openedAt = b.now()
	return true
}

// release ends a probe whose outcome says nothing about the plugin (the
// caller gave up), so another call may probe.
func (b *breaker) release(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// current returns the state, reporting an open breaker whose cool-down has
// ended as half-open.
func (b *breaker) current() State {
	if b.threshold <= 0 {
		return StateClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateOpen && b.now().Sub(b.openedAt) >= b.cooldown {
		return StateHalfOpen
	}
	return b.state
}
