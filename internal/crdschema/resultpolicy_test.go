package crdschema_test

import (
	"encoding/json"
	"io/fs"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	crdbases "github.com/toolhooks/toolhooks/config/crd/bases"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
)

// TestResultPolicyDetectorsEnumIsTheRuleTable fails when the ResultPolicy
// CRD's detectors enum (the ResultDetector marker) and the gateway's rule
// sets and rules differ: a name the CRD admits would fail to compile, a new
// rule would be refused by the API server.
func TestResultPolicyDetectorsEnumIsTheRuleTable(t *testing.T) {
	data, err := fs.ReadFile(crdbases.FS, "policy.toolhooks.dev_resultpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	detectors, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["detectors"]
	if !ok || detectors.Items == nil || detectors.Items.Schema == nil {
		t.Fatal("spec.detectors has no items schema")
	}
	var got []string
	for _, v := range detectors.Items.Schema.Enum {
		var s string
		if err := json.Unmarshal(v.Raw, &s); err != nil {
			t.Fatalf("enum value %s: %v", v.Raw, err)
		}
		got = append(got, s)
	}
	want := append(resultscan.RuleSets(), resultscan.RuleNames()...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ResultPolicy detectors enum = %v,\nresultscan rule sets and rules = %v\n"+
			"update the ResultDetector enum marker in api/v1alpha1/resultpolicy_types.go and run make manifests", got, want)
	}
}
