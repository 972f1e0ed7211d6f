package compile

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Object is a policy object of any kind.
type Object interface {
	metav1.Object
	runtime.Object
	GetGatewaySelector() *metav1.LabelSelector
	GetPolicyStatus() *policyv1alpha1.PolicyStatus
}

// List is a list of policy objects of one kind.
type List interface {
	metav1.ListInterface
	runtime.Object
}

// Kind is what the Kubernetes side of toolhooks (compile, the controller,
// the policy file loader, the CLI and the demo) knows of one policy kind.
// Adding a kind is one entry in Kinds, one field of Policies and the
// kind's compile adapter.
type Kind struct {
	// Kind is the API kind, also the hook entries' kind.
	Kind gatewayconfig.Kind
	// Resource is the plural resource name and Short the short name, as
	// kubectl accepts them.
	Resource, Short string
	// Is reports whether obj is of the kind.
	Is func(obj Object) bool
	// New returns an empty object of the kind, NewList an empty list.
	New     func() Object
	NewList func() List
	// Objects returns p's objects of the kind, in order (pointers into p).
	Objects func(p *Policies) []Object
	// Len returns how many objects of the kind p holds.
	Len func(p *Policies) int
	// Append adds obj, an object of the kind, to p.
	Append func(p *Policies, obj Object)
	// SetItems replaces p's objects of the kind with the items of list.
	SetItems func(p *Policies, list List)
	// ListObjects returns the items of list, a list of the kind.
	ListObjects func(list List) []Object
	// convert compiles obj, an object of the kind, into its hook entry.
	convert func(ref hooks.PolicyRef, obj Object) (gatewayconfig.Hook, error)
}

// Kinds are the policy kinds, in the order their hooks are listed.
var Kinds = []Kind{
	kind(gatewayconfig.KindAutonomyPolicy, "autonomypolicies", "ap",
		func(p *Policies) *[]policyv1alpha1.AutonomyPolicy { return &p.Autonomy },
		func(l *policyv1alpha1.AutonomyPolicyList) *[]policyv1alpha1.AutonomyPolicy { return &l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.AutonomyPolicy) (gatewayconfig.Hook, error) {
			return Autonomy(ref, &o.Spec)
		}),
	kind(gatewayconfig.KindContractPolicy, "contractpolicies", "ctp",
		func(p *Policies) *[]policyv1alpha1.ContractPolicy { return &p.Contracts },
		func(l *policyv1alpha1.ContractPolicyList) *[]policyv1alpha1.ContractPolicy { return &l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.ContractPolicy) (gatewayconfig.Hook, error) {
			return Contract(ref, &o.Spec)
		}),
	kind(gatewayconfig.KindPluginHook, "pluginhooks", "ph",
		func(p *Policies) *[]policyv1alpha1.PluginHook { return &p.Plugins },
		func(l *policyv1alpha1.PluginHookList) *[]policyv1alpha1.PluginHook { return &l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.PluginHook) (gatewayconfig.Hook, error) {
			return Plugin(ref, &o.Spec)
		}),
	kind(gatewayconfig.KindResultPolicy, "resultpolicies", "rp",
		func(p *Policies) *[]policyv1alpha1.ResultPolicy { return &p.Results },
		func(l *policyv1alpha1.ResultPolicyList) *[]policyv1alpha1.ResultPolicy { return &l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.ResultPolicy) (gatewayconfig.Hook, error) {
			return Result(ref, &o.Spec)
		}),
}

// KindOf returns the Kind named name, or false.
func KindOf(name string) (Kind, bool) {
	for _, k := range Kinds {
		if string(k.Kind) == name {
			return k, true
		}
	}
	return Kind{}, false
}

// KindNames returns the kinds' names, in order.
func KindNames() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k.Kind)
	}
	return out
}

// kind builds the Kind of the API type T (objects *T) listed by L (lists
// *L), kept in Policies at field.
func kind[T any, P interface {
	*T
	Object
}, L any, LP interface {
	*L
	List
}](k gatewayconfig.Kind, resource, short string, field func(*Policies) *[]T, items func(LP) *[]T,
	convert func(hooks.PolicyRef, P) (gatewayconfig.Hook, error)) Kind {
	objects := func(s []T) []Object {
		out := make([]Object, len(s))
		for i := range s {
			out[i] = P(&s[i])
		}
		return out
	}
	return Kind{
		Kind: k, Resource: resource, Short: short,
		Is:          func(obj Object) bool { _, ok := obj.(P); return ok },
		New:         func() Object { return P(new(T)) },
		NewList:     func() List { return LP(new(L)) },
		Objects:     func(p *Policies) []Object { return objects(*field(p)) },
		Len:         func(p *Policies) int { return len(*field(p)) },
		Append:      func(p *Policies, obj Object) { *field(p) = append(*field(p), *obj.(P)) },
		SetItems:    func(p *Policies, list List) { *field(p) = *items(list.(LP)) },
		ListObjects: func(list List) []Object { return objects(*items(list.(LP))) },
		convert:     func(ref hooks.PolicyRef, obj Object) (gatewayconfig.Hook, error) { return convert(ref, obj.(P)) },
	}
}

// Len returns how many policy objects p holds.
func (p *Policies) Len() int {
	n := 0
	for _, k := range Kinds {
		n += k.Len(p)
	}
	return n
}

// All returns p's objects of every kind, kind by kind.
func (p *Policies) All() []Object {
	out := make([]Object, 0, p.Len())
	for _, k := range Kinds {
		out = append(out, k.Objects(p)...)
	}
	return out
}

// AppendAll adds other's objects to p.
func (p *Policies) AppendAll(other *Policies) {
	for _, k := range Kinds {
		for _, o := range k.Objects(other) {
			k.Append(p, o)
		}
	}
}

// DeepCopy returns a copy of p that shares nothing with it.
func (p *Policies) DeepCopy() Policies {
	var out Policies
	for _, k := range Kinds {
		for _, o := range k.Objects(p) {
			k.Append(&out, o.DeepCopyObject().(Object))
		}
	}
	return out
}
