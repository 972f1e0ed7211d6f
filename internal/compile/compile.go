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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

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
		group := slices.DeleteFunc(slices.Clone(p.Of(k.Kind)), func(o Object) bool { return o.GetNamespace() != gw.Namespace })
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
				h, err = k.entry(ref, o)
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

// entry compiles obj, an object of kind k, into its hook entry, validating
// its spec as the gateway builds it, without a file system.
func (k *Kind) entry(ref hooks.PolicyRef, obj Object) (gatewayconfig.Hook, error) {
	spec, common, err := k.compile(ref, obj)
	if err != nil {
		return gatewayconfig.Hook{}, err
	}
	name := HookName(ref)
	if _, _, err := spec.Build(&hooks.EntryRef{Name: name, Policy: ref}, &hooks.BuildEnv{Validate: true}); err != nil {
		return gatewayconfig.Hook{}, hooks.UnderField("spec", err)
	}
	return gatewayconfig.Hook{Name: name, Kind: k.Kind, Policy: ref, Action: action(common.Action),
		RequireDecisionLog: common.RequireDecisionLog, Spec: gatewayconfig.MarshalSpec(spec)}, nil
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

// One compiles a single policy object of any kind into its hook entry, validating it as the executor would.
func One(obj metav1.Object) (gatewayconfig.Hook, error) {
	if k, ok := KindFor(obj); ok {
		o := obj.(Object)
		return k.entry(RefOf(k.Kind, o), o)
	}
	return gatewayconfig.Hook{}, fmt.Errorf("%T is not a policy kind: %w", obj, hooks.ErrInvalidSpec)
}

// Lint returns the warnings of a policy that compiles (its kind's Lint); nil
// for an object of no policy kind.
func Lint(obj any) []string {
	k, ok := KindFor(obj)
	if !ok {
		return nil
	}
	return k.Lint(obj.(Object))
}
