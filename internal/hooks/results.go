package hooks

import (
	"context"
	"fmt"
	"runtime/debug"
)

// WithheldText starts the text the caller receives in place of a result
// that a result filter withheld; the filter's hook name follows.
const WithheldText = "Tool result withheld by hook: "

// RuleResultScanFailed is the rule of a result a filter could not scan (it
// returned an error or panicked): the result is withheld, never passed on
// unscanned.
const RuleResultScanFailed = "ResultScanFailed"

// ResultFilter is an optional interface for hooks that police what a tool
// returned before the caller sees it: the executor runs the filters of an
// executed call's output (succeeded or failed) in hook order, each on what
// the previous one left, before the after phase. An error or panic
// withholds the result (RuleResultScanFailed), whatever the entry's action
// and fail-open setting; so does a filter that withholds. A warn-mode
// entry's filter only records: the caller sees what it would have changed.
type ResultFilter interface {
	Hook
	FilterResult(ctx context.Context, call *Call, output string) (Filtered, error)
}

// Filtered is what a ResultFilter made of an output.
type Filtered struct {
	// Output is what the caller may see (ignored when Withhold is set).
	Output string
	// Withhold replaces the whole result with the withheld text.
	Withhold bool
	// Rule and Reason explain a withheld result.
	Rule, Reason string
	// Findings are the filter's rules that matched: never the values.
	Findings []ResultFinding
	// Scanned is true when the filter looked at the output (it selects the
	// call); the executor then records its work even when nothing matched.
	Scanned bool
}

// ResultFinding is what one rule of a result filter found.
type ResultFinding struct {
	Rule string `json:"rule"`
	// Action is what the rule did: Redact, Withhold or Warn.
	Action string `json:"action"`
	Count  int    `json:"count"`
	// Bytes is how many bytes the rule matched (for Redact, redacted).
	Bytes int `json:"bytes"`
}

// ResultFiltering records one result filter's work on a call: a call's
// result was scanned when its Result holds one.
type ResultFiltering struct {
	Hook   string    `json:"hook"`
	Policy PolicyRef `json:"policy,omitzero"`
	// Warn is true for a warn-mode entry, whose changes were not applied.
	Warn     bool            `json:"warn,omitempty"`
	Findings []ResultFinding `json:"findings,omitempty"`
}

// FilterResult runs the result filters on the output of a tool the caller
// ran itself (the /v1/results API), then the after phase, which audits it.
// The result's Status is StatusSucceeded (StatusFailed when failed) or
// StatusWithheld, and its Output what the caller may pass on.
func (e *Executor) FilterResult(ctx context.Context, call *Call, output string, failed bool) Result {
	res := Result{Status: StatusSucceeded, Output: output}
	if failed {
		res.Status, res.Failed = StatusFailed, true
	}
	e.filterResult(ctx, call, &res)
	e.after(ctx, call, res)
	return res
}

// resultFilter is an entry whose hook is a ResultFilter.
type resultFilter struct {
	*entry
	filter ResultFilter
}

// resultDecision is en's decision on a tool's result: it belongs to no
// layer that decides whether the call runs.
func (f resultFilter) resultDecision(rule, reason string) Decision {
	d := f.decision(rule, reason)
	d.Layer = ""
	return d
}

// filterResult runs the result filters on the output of a tool that ran.
func (e *Executor) filterResult(ctx context.Context, call *Call, res *Result) {
	if len(e.filters) == 0 || (res.Status != StatusSucceeded && res.Status != StatusFailed) {
		return
	}
	for _, f := range e.filters {
		out, err := callFilter(ctx, f.filter, call, res.Output)
		if err != nil {
			e.log.WarnContext(ctx, "Result filter failed; the result is withheld", "hook", f.name, "tool", call.Tool,
				"correlationId", call.CorrelationID, "error", err)
			withhold(res, f, f.resultDecision(RuleResultScanFailed, "The result could not be scanned, so it is withheld: "+err.Error()))
			return
		}
		warn := f.action == ActionWarn
		if out.Scanned || len(out.Findings) > 0 || out.Withhold {
			res.Filtering = append(res.Filtering, ResultFiltering{Hook: f.name, Policy: f.policy, Warn: warn, Findings: out.Findings})
		}
		switch {
		case warn:
			if out.Withhold {
				res.Warnings = append(res.Warnings, f.resultDecision(out.Rule, out.Reason))
			}
		case out.Withhold:
			withhold(res, f, f.resultDecision(out.Rule, out.Reason))
			return
		default:
			res.Output = out.Output
		}
	}
}

// withhold replaces res's output with the withheld text of f's hook.
func withhold(res *Result, f resultFilter, d Decision) {
	res.Status = StatusWithheld
	res.Output = WithheldText + f.name
	res.Withheld = &d
}

// callFilter runs one result filter, turning a panic into an error.
func callFilter(ctx context.Context, f ResultFilter, call *Call, output string) (out Filtered, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("result filter panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return f.FilterResult(ctx, call, output)
}
