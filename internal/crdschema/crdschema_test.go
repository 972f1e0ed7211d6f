package crdschema_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/crdschema"
)

func TestKindsAreTheCRDKinds(t *testing.T) {
	kinds, err := crdschema.Kinds()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"AutonomyPolicy", "ContractPolicy", "PluginHook", "ResultPolicy", "ToolCallApproval"}; !slices.Equal(kinds, want) {
		t.Errorf("Kinds() = %v, want %v", kinds, want)
	}
	for _, k := range kinds {
		s, err := crdschema.For(k)
		if err != nil {
			t.Fatal(err)
		}
		if gvk := s.GroupVersionKind(); gvk.GroupVersion() != policyv1alpha1.GroupVersion || gvk.Kind != k || !s.Namespaced() {
			t.Errorf("For(%s) serves %s, namespaced %t", k, gvk, s.Namespaced())
		}
	}
	if _, err := crdschema.For("Deployment"); !errors.Is(err, crdschema.ErrUnknownKind) {
		t.Errorf("For(Deployment) = %v, want ErrUnknownKind", err)
	}
}

func TestDefaultSetsTheCRDDefaultsOnATypedObject(t *testing.T) {
	p := &policyv1alpha1.PluginHook{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a"},
		Spec: policyv1alpha1.PluginHookSpec{
			Events:    []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Transport: policyv1alpha1.PluginTransport{HTTP: &policyv1alpha1.HTTPTransport{Service: &policyv1alpha1.ServiceReference{Name: "s"}}},
			Tools:     []string{"write_file"},
		},
	}
	if err := crdschema.Default(p); err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	if s.Timeout == nil || s.Timeout.Duration != 5*time.Second || s.FailurePolicy != policyv1alpha1.FailurePolicyFail ||
		s.EnforcementAction != policyv1alpha1.EnforcementDeny || s.Transport.HTTP.Service.Port != 80 {
		t.Errorf("defaulted spec = %+v", s)
	}
	if p.Name != "p" || p.Namespace != "team-a" || !slices.Equal(s.Tools, []string{"write_file"}) || p.Kind != "" {
		t.Errorf("Default changed more than the defaults: %+v", p)
	}

	set := &policyv1alpha1.AutonomyPolicy{Spec: policyv1alpha1.AutonomyPolicySpec{Mode: policyv1alpha1.AutonomyReadOnly}}
	if err := crdschema.Default(set); err != nil {
		t.Fatal(err)
	}
	if set.Spec.Mode != policyv1alpha1.AutonomyReadOnly || set.Spec.EnforcementAction != policyv1alpha1.EnforcementDeny {
		t.Errorf("defaulted autonomy spec = %+v", set.Spec)
	}
	if err := crdschema.Default(&metav1.Status{}); err == nil {
		t.Error("Default accepted a type that is no policy kind")
	}
}

func TestAdmitReportsUnknownFieldsBeforeValidating(t *testing.T) {
	s, err := crdschema.For("ContractPolicy")
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{
		"apiVersion": "policy.toolhooks.dev/v1alpha1", "kind": "ContractPolicy",
		"metadata": map[string]any{"name": "c", "namespace": "default"},
		"spec":     map[string]any{"maxToolCals": int64(1)},
	}
	err = s.Admit(context.Background(), obj)
	var e *crdschema.Error
	if !errors.As(err, &e) || !slices.Equal(e.UnknownFields, []string{"spec.maxToolCals"}) || len(e.Fields) != 0 {
		t.Fatalf("Admit = %v, want the unknown field alone", err)
	}

	obj["spec"] = map[string]any{"maxToolCalls": int64(1)}
	obj["status"] = map[string]any{"observedGeneration": int64(-1)}
	if err := s.Admit(context.Background(), obj); err != nil {
		t.Fatalf("Admit = %v", err)
	}
	if _, ok := obj["status"]; ok {
		t.Error("Admit kept status, which create ignores")
	}
	if got := obj["spec"].(map[string]any)["enforcementAction"]; got != "Deny" {
		t.Errorf("enforcementAction = %v, want the CRD default", got)
	}

	obj["kind"] = "PluginHook"
	err = s.Admit(context.Background(), obj)
	if err == nil || !strings.Contains(err.Error(), `kind: Invalid value: "PluginHook": must be ContractPolicy`) {
		t.Errorf("Admit of the wrong kind = %v", err)
	}
}
