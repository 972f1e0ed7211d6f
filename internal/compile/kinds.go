package compile

import (
	"cmp"
	"fmt"
	"slices"

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
// Each kind declares itself in one file of this package (autonomy.go,
// contract.go, plugin.go, result.go): its entry, its compile adapter and its
// lint. Nothing outside that file names the kind.
type Kind struct {
	// Kind is the API kind, also the hook entries' kind (the name the hook
	// package registers).
	Kind gatewayconfig.Kind
	// Resource is the plural resource name and Short the short name, as
	// kubectl accepts them.
	Resource, Short string
	// ReportsDegraded marks a kind whose gateways report its runtime failing
	// (a plugin's open circuit): its status carries the Degraded condition.
	ReportsDegraded bool
	// Is reports whether obj is of the kind.
	Is func(obj Object) bool
	// New returns an empty object of the kind, NewList an empty list.
	New     func() Object
	NewList func() List
	// ListObjects returns the items of list, a list of the kind (pointers into it).
	ListObjects func(list List) []Object
	// Lint returns the warnings of an object of the kind that compiles.
	Lint func(obj Object) []string
	// Paths returns pointers to obj's workspace roots and to the paths it
	// allows, for tools that move a policy to another workspace (the
	// offline CLI, the demo).
	Paths func(obj Object) (roots, paths []*string)
	// Endpoints returns obj's HTTP endpoints named by a Service, for tools
	// without cluster DNS (the demo) to point elsewhere; nil for kinds that
	// call nothing.
	Endpoints func(obj Object) []Endpoint
	// compile compiles obj, an object of the kind, into its hook spec and
	// the settings every entry has.
	compile func(ref hooks.PolicyRef, obj Object) (hooks.Spec, Common, error)
}

// Endpoint is an HTTP endpoint of a policy: a Service reference or a URL.
type Endpoint struct {
	Service **policyv1alpha1.ServiceReference
	URL     *string
}

// Common are the settings of a policy every kind has.
type Common struct {
	Action             policyv1alpha1.EnforcementAction
	RequireDecisionLog bool
}

// Kinds are the policy kinds, in the order their hooks are listed (by name).
var Kinds []Kind

// register adds a kind; each kind's file calls it from init.
func register(k Kind) {
	if _, dup := KindOf(string(k.Kind)); dup {
		panic(fmt.Sprintf("compile: kind %s registered twice", k.Kind))
	}
	if _, ok := hooks.LookupKind(string(k.Kind)); !ok {
		panic(fmt.Sprintf("compile: kind %s has no hook implementation registered", k.Kind))
	}
	Kinds = append(Kinds, k)
	slices.SortFunc(Kinds, func(a, b Kind) int { return cmp.Compare(a.Kind, b.Kind) })
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

// KindFor returns the Kind of obj, or false.
func KindFor(obj any) (Kind, bool) {
	if o, ok := obj.(Object); ok {
		for _, k := range Kinds {
			if k.Is(o) {
				return k, true
			}
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
// *L, items at items).
func kind[T any, P interface {
	*T
	Object
}, L any, LP interface {
	*L
	List
}](k Kind, items func(LP) []T, compile func(hooks.PolicyRef, P) (hooks.Spec, Common, error),
	lint func(P) []string, paths func(P) (roots, paths []*string)) Kind {
	k.Is = func(obj Object) bool { _, ok := obj.(P); return ok }
	k.New = func() Object { return P(new(T)) }
	k.NewList = func() List { return LP(new(L)) }
	k.ListObjects = func(list List) []Object { return ObjectsOf[T, P](items(list.(LP))...) }
	k.compile = func(ref hooks.PolicyRef, obj Object) (hooks.Spec, Common, error) { return compile(ref, obj.(P)) }
	k.Lint = func(obj Object) []string {
		if lint == nil {
			return nil
		}
		return lint(obj.(P))
	}
	k.Paths = func(obj Object) ([]*string, []*string) {
		if paths == nil {
			return nil, nil
		}
		return paths(obj.(P))
	}
	return k
}

// Policies is a set of policy objects, typically one namespace's, held by
// kind. The zero value is empty and ready to use.
type Policies struct {
	byKind map[gatewayconfig.Kind][]Object
}

// PoliciesOf returns the set of the objects of groups.
func PoliciesOf(groups ...[]Object) Policies {
	var p Policies
	for _, g := range groups {
		p.Add(g...)
	}
	return p
}

// ObjectsOf returns pointers to items, an API type's values, as Objects.
func ObjectsOf[T any, P interface {
	*T
	Object
}](items ...T) []Object {
	out := make([]Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// Of returns p's objects of kind k, in order (the set's own slice).
func (p *Policies) Of(k gatewayconfig.Kind) []Object { return p.byKind[k] }

// Add adds objs to p; an object of no policy kind panics.
func (p *Policies) Add(objs ...Object) {
	for _, o := range objs {
		k, ok := KindFor(o)
		if !ok {
			panic(fmt.Sprintf("compile: %T is not a policy kind", o))
		}
		if p.byKind == nil {
			p.byKind = map[gatewayconfig.Kind][]Object{}
		}
		p.byKind[k.Kind] = append(p.byKind[k.Kind], o)
	}
}

// SetItems replaces p's objects of kind k with the items of list.
func (p *Policies) SetItems(k Kind, list List) {
	if p.byKind == nil {
		p.byKind = map[gatewayconfig.Kind][]Object{}
	}
	p.byKind[k.Kind] = k.ListObjects(list)
}

// Len returns how many policy objects p holds.
func (p *Policies) Len() int {
	n := 0
	for _, objs := range p.byKind {
		n += len(objs)
	}
	return n
}

// All returns p's objects of every kind, kind by kind.
func (p *Policies) All() []Object {
	out := make([]Object, 0, p.Len())
	for _, k := range Kinds {
		out = append(out, p.byKind[k.Kind]...)
	}
	return out
}

// AppendAll adds other's objects to p.
func (p *Policies) AppendAll(other *Policies) { p.Add(other.All()...) }

// DeepCopy returns a copy of p that shares nothing with it.
func (p *Policies) DeepCopy() Policies {
	var out Policies
	for _, o := range p.All() {
		out.Add(o.DeepCopyObject().(Object))
	}
	return out
}
