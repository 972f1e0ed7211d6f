// Package compile turns the policy objects that select one gateway into that
// gateway's ordered hook list (gatewayconfig.Config). It is pure and
// deterministic, and is shared by the controller, the gateway's standalone
// mode and the offline CLI. Validation reuses the executor's own checks, so
// anything the executor would reject is rejected here with the same message.
package compile

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/plugins"
)

// Policies is a set of policy objects, typically one namespace's.
type Policies struct {
	Autonomy  []policyv1alpha1.AutonomyPolicy
	Contracts []policyv1alpha1.ContractPolicy
	Plugins   []policyv1alpha1.PluginHook
	Results   []policyv1alpha1.ResultPolicy
}

// Gateway is what compile needs to know of one gateway pod.
type Gateway struct {
	Namespace string
	Labels    map[string]string
}

// Outcome is what compiling did with one policy object.
type Outcome struct {
	// Policy names the object.
	Policy hooks.PolicyRef
	// Selected is true when the policy's gatewaySelector matches the gateway.
	Selected bool
	// Err is nil when the policy compiled; otherwise it wraps one of
	// hooks.ErrInvalidGlob, hooks.ErrInvalidPath or hooks.ErrInvalidSpec.
	Err error
}

// Reason maps a compile error to a status condition reason.
func Reason(err error) string {
	switch {
	case err == nil:
		return policyv1alpha1.ReasonCompiled
	case errors.Is(err, hooks.ErrInvalidGlob):
		return policyv1alpha1.ReasonInvalidGlob
	case errors.Is(err, hooks.ErrInvalidPath):
		return policyv1alpha1.ReasonInvalidPath
	default:
		return policyv1alpha1.ReasonInvalidSpec
	}
}

// Compile returns the configuration of gw: AuditLog first, then the
// AutonomyPolicies, ContractPolicies, PluginHooks and ResultPolicies of gw's
// namespace that select it, each group ordered by creation time then name. Invalid policies
// are left out of the list and reported in the outcomes (one per policy of
// gw's namespace, in list order), so the valid ones still apply.
func Compile(gw Gateway, p Policies) (*gatewayconfig.Config, []Outcome) {
	return WithFallback(gw, p, nil)
}

// Fallback returns the last version of a policy (by UID) that compiled, if any.
type Fallback func(uid string) (gatewayconfig.Hook, bool)

// WithFallback is Compile, except that a policy which no longer
// compiles keeps its last good version (from lastGood) in the list instead of
// dropping out: an edit that breaks a policy must not silently remove the
// protection it gave. Its outcome still reports the error.
func WithFallback(gw Gateway, p Policies, lastGood Fallback) (*gatewayconfig.Config, []Outcome) {
	list := []gatewayconfig.Hook{{Name: string(gatewayconfig.KindAuditLog), Kind: gatewayconfig.KindAuditLog}}
	var outcomes []Outcome
	for _, k := range Kinds {
		group := slices.DeleteFunc(k.Objects(&p), func(o Object) bool { return o.GetNamespace() != gw.Namespace })
		slices.SortFunc(group, func(a, b Object) int {
			if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
				return c
			}
			return cmp.Compare(a.GetName(), b.GetName())
		})
		for _, o := range group {
			ref := RefOf(k.Kind, o)
			out := Outcome{Policy: ref}
			selected, err := Selects(o.GetGatewaySelector(), gw.Labels)
			out.Selected = selected
			var h gatewayconfig.Hook
			if err == nil {
				h, err = k.convert(ref, o)
			}
			out.Err = err
			outcomes = append(outcomes, out)
			if err != nil && lastGood != nil && ref.UID != "" {
				if prev, ok := lastGood(ref.UID); ok {
					h, err = prev, nil
				}
			}
			if err == nil && selected {
				list = append(list, h)
			}
		}
	}
	return &gatewayconfig.Config{Revision: gatewayconfig.ComputeRevision(list), Hooks: list}, outcomes
}

// Ref is the reference a compiled entry carries to its object.
func Ref(kind gatewayconfig.Kind, m metav1.ObjectMeta) hooks.PolicyRef {
	return hooks.PolicyRef{Kind: string(kind), Namespace: m.Namespace, Name: m.Name, UID: string(m.UID), Generation: m.Generation}
}

// RefOf is Ref for any policy object.
func RefOf(kind gatewayconfig.Kind, o metav1.Object) hooks.PolicyRef {
	return hooks.PolicyRef{Kind: string(kind), Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID()),
		Generation: o.GetGeneration()}
}

// HookName is the name a policy's hook carries in denials.
func HookName(ref hooks.PolicyRef) string {
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// Selects reports whether selector (nil or empty selects every gateway) matches
// a gateway's labels.
func Selects(selector *metav1.LabelSelector, gatewayLabels map[string]string) (bool, error) {
	if selector == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, fmt.Errorf("gatewaySelector: %w: %w", hooks.ErrInvalidSpec, err)
	}
	return s.Matches(labels.Set(gatewayLabels)), nil
}

func action(a policyv1alpha1.EnforcementAction) hooks.EnforcementAction {
	if a == policyv1alpha1.EnforcementWarn {
		return hooks.ActionWarn
	}
	return hooks.ActionDeny
}

// validated runs the executor's validation on h.
func validated(h gatewayconfig.Hook) (gatewayconfig.Hook, error) {
	if err := h.Validate(); err != nil {
		return gatewayconfig.Hook{}, err
	}
	return h, nil
}

// Autonomy compiles an AutonomyPolicy spec into its hook entry.
func Autonomy(ref hooks.PolicyRef, s *policyv1alpha1.AutonomyPolicySpec) (gatewayconfig.Hook, error) {
	a := &autonomy.Config{
		Mode:               strings.ToLower(string(s.Mode)),
		ForbiddenPathGlobs: s.ForbiddenPathGlobs,
		Subjects:           subjects(ref, s.Subjects),
	}
	if s.Workspace != nil {
		a.WorkspaceRoot, a.WorkspaceOnly = s.Workspace.Root, s.Workspace.Only
	}
	if s.Shell != nil {
		a.AllowShell, a.AllowedShellCommands = s.Shell.Allow, s.Shell.AllowedCommands
		for _, d := range s.Shell.Dialects {
			a.ShellDialects = append(a.ShellDialects, string(d))
		}
	}
	if pp := s.ProtectedPaths; pp != nil {
		a.ProtectedPaths = &autonomy.ProtectedConfig{Add: pp.Add, Lift: pp.Lift, AllowGitPrograms: pp.AllowGitPrograms}
	}
	if k := s.Ask; k != nil {
		a.Ask = &autonomy.AskConfig{Tools: k.Tools, PathGlobs: k.PathGlobs, Commands: k.Commands}
		if k.Expiry != nil {
			a.Ask.ExpirySeconds = int64(k.Expiry.Seconds())
		}
	}
	if t := s.Tools; t != nil {
		a.ToolAllow, a.ToolDeny, a.ReadOnlyTools = t.Allow, t.Deny, t.ReadOnly
		if len(t.PathArguments) > 0 {
			a.PathArgs = make(map[string][]string, len(t.PathArguments))
			for _, pa := range t.PathArguments {
				a.PathArgs[pa.Tool] = pa.Keys
			}
		}
	}
	return validated(gatewayconfig.Hook{Name: HookName(ref), Kind: gatewayconfig.KindAutonomyPolicy, Policy: ref,
		Action: action(s.EnforcementAction), RequireDecisionLog: s.RequireDecisionLog, Autonomy: a})
}

// subjects compiles a policy's subjects. A ServiceAccount without a
// namespace is one of the policy's own namespace, as in a RoleBinding.
func subjects(ref hooks.PolicyRef, s *policyv1alpha1.Subjects) hooks.Subjects {
	if s == nil {
		return hooks.Subjects{}
	}
	out := hooks.Subjects{Sessions: s.Sessions, Channels: s.Channels, Senders: s.Senders}
	for _, c := range s.Callers {
		cs := hooks.CallerSubject{Kind: string(c.Kind), Name: c.Name, Namespace: c.Namespace}
		if c.Kind == policyv1alpha1.CallerServiceAccount && cs.Namespace == "" {
			cs.Namespace = ref.Namespace
		}
		out.Callers = append(out.Callers, cs)
	}
	return out
}

// Contract compiles a ContractPolicy spec into its hook entry.
func Contract(ref hooks.PolicyRef, s *policyv1alpha1.ContractPolicySpec) (gatewayconfig.Hook, error) {
	c := &contract.Spec{Contract: contract.Contract{MaxToolCalls: int(s.MaxToolCalls), AllowedPaths: s.AllowedPaths},
		StateFailurePolicy: contract.StateFailurePolicy(s.StateFailurePolicy)}
	if k := s.Ask; k != nil {
		c.Ask = &contract.Ask{Tools: k.Tools}
		if k.AfterCalls != nil {
			c.Ask.AfterCalls = int(*k.AfterCalls)
		}
		if k.Expiry != nil {
			c.Ask.ExpirySeconds = int64(k.Expiry.Seconds())
		}
	}
	if ps := s.MaxToolCallsPerSender; ps != nil {
		c.PerSender = &contract.SenderLimit{Calls: int(ps.Calls), WindowMillis: ps.Window.Milliseconds()}
	}
	c.Subjects = subjects(ref, s.Subjects)
	for _, cp := range s.ScopedCapabilities {
		c.ScopedCapabilities = append(c.ScopedCapabilities, contract.Capability{Tool: cp.Tool, AllowedPaths: cp.AllowedPaths})
	}
	for _, r := range s.RateLimits {
		c.RateLimits = append(c.RateLimits, ratelimit.Rule{Tools: r.Tools, PerSenderPerMinute: int(r.PerSenderPerMinute)})
	}
	return validated(gatewayconfig.Hook{Name: HookName(ref), Kind: gatewayconfig.KindContractPolicy, Policy: ref,
		Action: action(s.EnforcementAction), RequireDecisionLog: s.RequireDecisionLog, Contract: c})
}

// Plugin compiles a PluginHook spec into its hook entry.
func Plugin(ref hooks.PolicyRef, s *policyv1alpha1.PluginHookSpec) (gatewayconfig.Hook, error) {
	if s.Timeout == nil { // the API server and the file loader apply the CRD's default
		return gatewayconfig.Hook{}, fmt.Errorf("timeout is not set: %w", hooks.ErrInvalidSpec)
	}
	p := &plugins.Spec{
		TimeoutMillis: s.Timeout.Milliseconds(),
		FailOpen:      s.FailurePolicy == policyv1alpha1.FailurePolicyIgnore, // only when said explicitly
		Tools:         s.Tools,
	}
	for _, e := range s.Events {
		switch e {
		case policyv1alpha1.EventToolBefore:
			p.Before = true
		case policyv1alpha1.EventToolAfter:
			p.After = true
		case policyv1alpha1.EventToolAll:
			p.Before, p.After = true, true
		default:
			return gatewayconfig.Hook{}, fmt.Errorf("unknown event %q: %w", e, hooks.ErrInvalidSpec)
		}
	}
	if h := s.Transport.HTTP; h != nil {
		p.HTTP = &plugins.HTTPSpec{URL: h.URL, CABundle: h.CABundle}
		if svc := h.Service; svc != nil {
			scheme := "http"
			if h.CABundle != "" {
				scheme = "https"
			}
			p.HTTP.URL = fmt.Sprintf("%s://%s.%s.svc:%d%s", scheme, svc.Name, cmp.Or(svc.Namespace, ref.Namespace),
				cmp.Or(svc.Port, 80), svc.Path)
		}
	}
	if st := s.Transport.Stdio; st != nil {
		p.Stdio = &plugins.StdioSpec{Command: st.Command, Args: st.Args}
		if len(st.Env) > 0 {
			p.Stdio.Env = make(map[string]string, len(st.Env))
			for _, e := range st.Env {
				p.Stdio.Env[e.Name] = e.Value
			}
		}
	}
	return validated(gatewayconfig.Hook{Name: HookName(ref), Kind: gatewayconfig.KindPluginHook, Policy: ref,
		Action: action(s.EnforcementAction), Plugin: p})
}

// Result compiles a ResultPolicy spec into its hook entry. An unset timeout
// or maxBytes is left zero, which the gateway reads as its default.
func Result(ref hooks.PolicyRef, s *policyv1alpha1.ResultPolicySpec) (gatewayconfig.Hook, error) {
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
			return gatewayconfig.Hook{}, fmt.Errorf("timeout %s must be more than 0s: %w", s.Timeout.Duration, hooks.ErrInvalidSpec)
		}
		r.TimeoutMillis = s.Timeout.Milliseconds()
		if r.TimeoutMillis == 0 { // under a millisecond: keep it short, not the default
			r.TimeoutMillis = 1
		}
	}
	return validated(gatewayconfig.Hook{Name: HookName(ref), Kind: gatewayconfig.KindResultPolicy, Policy: ref,
		Action: action(s.EnforcementAction), Result: r})
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

// One compiles a single policy object (an AutonomyPolicy, ContractPolicy,
// PluginHook or ResultPolicy) into its hook entry, validating it as the executor would.
func One(obj metav1.Object) (gatewayconfig.Hook, error) {
	if o, ok := obj.(Object); ok {
		for _, k := range Kinds {
			if k.Is(o) {
				return k.convert(RefOf(k.Kind, o), o)
			}
		}
	}
	return gatewayconfig.Hook{}, fmt.Errorf("%T is not a policy kind: %w", obj, hooks.ErrInvalidSpec)
}

// Lint returns the warnings of a policy that compiles: for an
// AutonomyPolicy, each shell allow-list entry that lets an agent run
// arbitrary programs (autonomy.Lint); for a ContractPolicy, an
// ask.afterCalls its maxToolCalls never lets a session reach. Nil for other
// kinds.
func Lint(obj any) []string {
	if c, ok := obj.(*policyv1alpha1.ContractPolicy); ok {
		if k := c.Spec.Ask; k != nil && k.AfterCalls != nil && c.Spec.MaxToolCalls > 0 && *k.AfterCalls >= c.Spec.MaxToolCalls {
			return []string{fmt.Sprintf("ask.afterCalls (%d) is not below maxToolCalls (%d): the budget denies before any call is asked about",
				*k.AfterCalls, c.Spec.MaxToolCalls)}
		}
		return nil
	}
	p, ok := obj.(*policyv1alpha1.AutonomyPolicy)
	if !ok || p.Spec.Shell == nil || !p.Spec.Shell.Allow {
		return nil
	}
	var out []string
	for _, f := range autonomy.Lint(p.Spec.Shell.AllowedCommands) {
		out = append(out, f.String())
	}
	return out
}
