package hooks

import "time"

// WithClock makes the executor read time from now, so tests can check what
// Duration measures without timing anything.
func WithClock(now func() time.Time) Option {
	return func(e *Executor) { e.now = now }
}

// ParseArgsStrict is the token-by-token argument parser alone, without the
// fast path ParseArgs tries first.
func ParseArgsStrict(s string) (map[string]any, error) { return parseArgsStrict(s) }

// ParseArgsFlat is the flat-object parser ParseArgs tries first.
func ParseArgsFlat(s string) (map[string]any, bool) { return parseArgsFlat(s) }
