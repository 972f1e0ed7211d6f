package resultscan

import (
	"fmt"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// MaxTimeout bounds a result policy's scan timeout.
const MaxTimeout = 30 * time.Second

// Spec is a result policy as it is pushed to a gateway: which calls' results
// are scanned, for what, and what happens to a match.
type Spec struct {
	// Tools are globs of the tools whose results are scanned (case-insensitive).
	Tools []string `json:"tools"`
	// Subjects narrows the calls scanned to some callers; empty lists match all.
	Subjects hooks.Subjects `json:"subjects,omitzero"`
	// Detectors name built-in rule sets or single rules.
	Detectors []string `json:"detectors,omitempty"`
	// Patterns are custom RE2 rules.
	Patterns []PatternSpec `json:"patterns,omitempty"`
	// RemoveLines are RE2 rules whose matching lines are removed.
	RemoveLines []PatternSpec `json:"removeLines,omitempty"`
	// RemovePaths are JSONPath rules whose selected values are removed.
	RemovePaths []PathSpec `json:"removePaths,omitempty"`
	// Action is the action of the detectors and of the rules that name
	// none: Redact (when empty), Withhold or Warn.
	Action Action `json:"action,omitempty"`
	// MaxBytes bounds the results scanned; a larger one is withheld. Zero
	// means DefaultMaxBytes.
	MaxBytes int `json:"maxBytes,omitempty"`
	// TimeoutMillis bounds each scan, in (0, MaxTimeout]; a scan that does
	// not finish in time withholds the result. Zero means DefaultTimeout.
	TimeoutMillis int64 `json:"timeoutMillis,omitempty"`
}

// PatternSpec is a custom rule of a Spec.
type PatternSpec struct {
	Name   string `json:"name"`
	Regex  string `json:"regex"`
	Action Action `json:"action,omitempty"`
}

// PathSpec is a JSONPath removal of a Spec.
type PathSpec struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Action Action `json:"action,omitempty"`
}

// Validate checks s as Build would, without building a hook for use.
// Errors wrap hooks.ErrInvalidGlob or hooks.ErrInvalidSpec.
func Validate(s *Spec) error {
	_, err := Build("validate", s)
	return err
}

// Build returns the result filter hook named name for s.
func Build(name string, s *Spec) (*Hook, error) {
	if s.TimeoutMillis < 0 || time.Duration(s.TimeoutMillis)*time.Millisecond > MaxTimeout {
		return nil, fmt.Errorf("result scan timeout %dms must be at least 0 (the default, %s) and at most %s: %w",
			s.TimeoutMillis, DefaultTimeout, MaxTimeout, hooks.ErrInvalidSpec)
	}
	if len(s.Detectors)+len(s.Patterns)+len(s.RemoveLines)+len(s.RemovePaths) == 0 {
		return nil, fmt.Errorf("result policy looks for nothing: name detectors, patterns, removeLines or removePaths: %w", hooks.ErrInvalidSpec)
	}
	if err := hooks.ValidateSubjects(s.Subjects); err != nil {
		return nil, err
	}
	h, err := NewHook(HookConfig{
		Name:     name,
		Tools:    s.Tools,
		Subjects: s.Subjects,
		Scan: Config{Detectors: s.Detectors, Patterns: patterns(s.Patterns), RemoveLines: patterns(s.RemoveLines),
			RemovePaths: paths(s.RemovePaths),
			Action:      s.Action, MaxBytes: s.MaxBytes},
		Timeout: time.Duration(s.TimeoutMillis) * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("result policy: %w: %w", err, hooks.ErrInvalidSpec)
	}
	return h, nil
}

func patterns(in []PatternSpec) []Pattern {
	out := make([]Pattern, len(in))
	for i, p := range in {
		out[i] = Pattern(p)
	}
	return out
}

func paths(in []PathSpec) []PathRule {
	out := make([]PathRule, len(in))
	for i, p := range in {
		out[i] = PathRule(p)
	}
	return out
}
