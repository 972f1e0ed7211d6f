package compile

import (
	"fmt"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
)

func init() {
	register(kind(Kind{Kind: resultscan.KindName, Resource: "resultpolicies", Short: "rp"},
		func(l *policyv1alpha1.ResultPolicyList) []policyv1alpha1.ResultPolicy { return l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.ResultPolicy) (hooks.Spec, Common, error) {
			r, err := resultSpec(ref, &o.Spec)
			return r, Common{Action: o.Spec.EnforcementAction}, err
		}, nil, nil))
}

// resultSpec compiles a ResultPolicy spec into its hook's. An unset timeout
// or maxBytes is left zero, which the gateway reads as its default.
func resultSpec(ref hooks.PolicyRef, s *policyv1alpha1.ResultPolicySpec) (*resultscan.Spec, error) {
	r := &resultscan.Spec{
		Tools:       s.Tools,
		Subjects:    subjects(ref, s.Subjects),
		Action:      resultscan.Action(s.Action),
		MaxBytes:    int(s.MaxBytes),
		Patterns:    resultPatterns(s.Patterns),
		RemoveLines: resultPatterns(s.RemoveLines),
	}
	for _, p := range s.RemovePaths {
		r.RemovePaths = append(r.RemovePaths, resultscan.PathSpec{Name: p.Name, Path: p.Path, Action: resultscan.Action(p.Action)})
	}
	for _, d := range s.Detectors {
		r.Detectors = append(r.Detectors, string(d))
	}
	if s.Timeout != nil {
		if s.Timeout.Duration <= 0 { // zero would mean the default, not no time at all
			return nil, fmt.Errorf("spec.timeout: %s must be more than 0s: %w", s.Timeout.Duration, hooks.ErrInvalidSpec)
		}
		r.TimeoutMillis = s.Timeout.Milliseconds()
		if r.TimeoutMillis == 0 { // under a millisecond: keep it short, not the default
			r.TimeoutMillis = 1
		}
	}
	return r, nil
}

func resultPatterns(ps []policyv1alpha1.ResultPattern) []resultscan.PatternSpec {
	if len(ps) == 0 {
		return nil
	}
	out := make([]resultscan.PatternSpec, len(ps))
	for i, p := range ps {
		out[i] = resultscan.PatternSpec{Name: p.Name, Regex: p.Regex, Action: resultscan.Action(p.Action)}
	}
	return out
}
