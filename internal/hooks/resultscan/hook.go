package resultscan

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// DefaultTimeout bounds a result's scan when HookConfig.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// RuleWithheld names the decision of a result withheld by a Withhold rule.
const RuleWithheld = "resultWithheld"

// HookConfig configures a result filter hook.
type HookConfig struct {
	// Name is the hook's name (the policy's).
	Name string
	// Tools are the globs of the tools whose results are scanned, matched
	// without regard to case (so a policy never misses a tool for its
	// spelling). At least one is required.
	Tools []string
	// Subjects narrows the calls scanned to some callers; zero means all.
	Subjects hooks.Subjects
	// Scan is what to look for and what to do with it.
	Scan Config
	// Timeout bounds each scan; a scan that does not finish in time
	// withholds the result. Zero means DefaultTimeout.
	Timeout time.Duration
}

// Hook is a hooks.ResultFilter that scans the results of the tools it selects.
type Hook struct {
	name     string
	tools    []string
	subjects *hooks.SubjectMatcher
	scanner  *Scanner
	timeout  time.Duration
}

var _ hooks.ResultFilter = (*Hook)(nil)

// NewHook checks cfg and builds its hook.
func NewHook(cfg HookConfig) (*Hook, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("a result filter needs a name")
	}
	if len(cfg.Tools) == 0 {
		return nil, fmt.Errorf("tools: at least one tool glob is required")
	}
	tools := make([]string, len(cfg.Tools))
	for i, g := range cfg.Tools {
		tools[i] = strings.ToLower(g)
		if g == "" || !doublestar.ValidatePattern(tools[i]) {
			return nil, fmt.Errorf("tools[%d]: %q is not a valid glob: %w", i, g, hooks.ErrInvalidGlob)
		}
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("timeout %s: want zero (the default, %s) or more", cfg.Timeout, DefaultTimeout)
	}
	subjects, err := hooks.NewSubjectMatcher(cfg.Subjects)
	if err != nil {
		return nil, fmt.Errorf("subjects: %w", err)
	}
	s, err := New(cfg.Scan)
	if err != nil {
		return nil, err
	}
	h := &Hook{name: cfg.Name, tools: tools, subjects: subjects, scanner: s, timeout: cfg.Timeout}
	if h.timeout == 0 {
		h.timeout = DefaultTimeout
	}
	return h, nil
}

// Name returns the hook's name.
func (h *Hook) Name() string { return h.name }

// Before allows: a result filter decides nothing before the tool runs.
func (h *Hook) Before(context.Context, *hooks.Call) (hooks.Verdict, error) { return hooks.Allow, nil }

// After does nothing: the executor records the filter's findings.
func (h *Hook) After(context.Context, *hooks.Call, *hooks.Result) {}

// Selects reports whether the hook scans call's result.
func (h *Hook) Selects(call *hooks.Call) bool {
	lower := strings.ToLower(call.Tool)
	for _, g := range h.tools {
		if doublestar.MatchUnvalidated(g, lower) {
			return h.subjects.Matches(call)
		}
	}
	return false
}

// FilterResult scans output when the hook selects call, within the
// hook's timeout: a scan that does not finish is an error (the executor
// withholds the result).
func (h *Hook) FilterResult(ctx context.Context, call *hooks.Call, output string) (hooks.Filtered, error) {
	if !h.Selects(call) {
		return hooks.Filtered{Output: output}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	o, err := h.scanner.Scan(ctx, output)
	if err != nil {
		return hooks.Filtered{}, err
	}
	f := hooks.Filtered{Output: o.Text, Withhold: o.Withheld, Scanned: true, Findings: make([]hooks.ResultFinding, len(o.Findings))}
	var withheldBy []string
	for i, x := range o.Findings {
		f.Findings[i] = hooks.ResultFinding{Rule: x.Rule, Action: string(x.Action), Count: x.Count, Bytes: x.Bytes}
		if x.Action == Withhold {
			withheldBy = append(withheldBy, x.Rule)
		}
	}
	if o.Withheld {
		f.Rule = RuleWithheld
		if len(withheldBy) == 1 && withheldBy[0] == RuleTooLarge {
			f.Rule = RuleTooLarge
		}
		f.Reason = fmt.Sprintf("The result of %q matched %s, whose action is Withhold.", call.Tool, strings.Join(withheldBy, ", "))
	}
	return f, nil
}
