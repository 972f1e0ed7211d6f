package compile

import (
	"slices"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/crdschema"
)

// Every policy CRD has an entry in Kinds (ToolCallApproval is not a
// policy), and each entry's accessors agree: an object made by New is of
// the kind, is kept in Policies by Add, read back by Of, replaced
// by SetItems and compiled by One under the kind's name.
func TestKindsCoverEveryPolicyCRD(t *testing.T) {
	crds, err := crdschema.Kinds()
	if err != nil {
		t.Fatal(err)
	}
	crds = slices.DeleteFunc(crds, func(k string) bool { return k == "ToolCallApproval" })
	names := KindNames()
	slices.Sort(crds)
	sorted := slices.Sorted(slices.Values(names))
	if !slices.Equal(sorted, crds) {
		t.Fatalf("Kinds = %v, policy CRDs = %v: add the kind to Kinds", names, crds)
	}
	var p Policies
	for i, k := range Kinds {
		if _, ok := hooks.LookupKind(string(k.Kind)); !ok {
			t.Errorf("%s: no hook package registers the kind", k.Kind)
		}
		o := k.New()
		if !k.Is(o) || (i > 0 && Kinds[i-1].Is(o)) {
			t.Errorf("%s: Is does not tell its own objects from others", k.Kind)
		}
		o.SetNamespace("ns")
		o.SetName("x")
		p.Add(o)
		if got := p.Of(k.Kind); len(got) != 1 || got[0].GetName() != "x" || len(p.Of(k.Kind)) != 1 {
			t.Errorf("%s: Of after Add = %v", k.Kind, got)
		}
		l := k.NewList()
		p.SetItems(k, l)
		if len(p.Of(k.Kind)) != 0 || len(k.ListObjects(l)) != 0 {
			t.Errorf("%s: SetItems of an empty list left %d objects", k.Kind, len(p.Of(k.Kind)))
		}
		p.Add(o)
	}
	if p.Len() != len(Kinds) || len(p.All()) != len(Kinds) {
		t.Errorf("Len %d, All %d, want %d", p.Len(), len(p.All()), len(Kinds))
	}
	c := p.DeepCopy()
	c.All()[0].SetName("changed")
	if p.All()[0].GetName() != "x" {
		t.Error("DeepCopy shares objects with the original")
	}
	// One names each kind's hook after the kind.
	ap := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	if h, err := One(ap); err != nil || h.Name != "AutonomyPolicy/ns/a" {
		t.Errorf("One(AutonomyPolicy) = %+v, %v", h, err)
	}
	if _, err := One(&policyv1alpha1.ToolCallApproval{}); err == nil {
		t.Error("One compiled a ToolCallApproval")
	}
}
