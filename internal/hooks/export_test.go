package hooks

import "time"

// WithClock makes the executor read time from now, so tests can check what
// Duration measures without timing anything.
func WithClock(now func() time.Time) Option {
	return func(e *Executor) { e.now = now }
}
