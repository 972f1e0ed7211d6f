package compile

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	crdbases "github.com/toolhooks/toolhooks/config/crd/bases"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
)

// TestTheCRDBoundsAreTheHooks holds the ContractPolicy CRD's count bounds
// (kubebuilder markers, which take only literals) to the contract hook's
// constants: a policy the API server admits is one the gateway builds, and
// the other way round. Change both together.
func TestTheCRDBoundsAreTheHooks(t *testing.T) {
	data, err := crdbases.FS.ReadFile("policy.toolhooks.dev_contractpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for path, want := range map[string]float64{
		"maxToolCalls":                contract.MaxToolCallsLimit,
		"maxToolCallsPerSender.calls": contract.MaxToolCallsLimit,
		"ask.afterCalls":              contract.MaxAfterCalls,
	} {
		s := spec
		for f := range strings.SplitSeq(path, ".") {
			s = s.Properties[f]
		}
		if s.Maximum == nil || *s.Maximum != want {
			t.Errorf("spec.%s: the CRD's maximum is %v, the hook's %v", path, s.Maximum, want)
		}
	}
}

// TestACompileErrorNamesTheFieldPath compiles a contract over its bound: the
// error names the field in the object, as the API server would.
func TestACompileErrorNamesTheFieldPath(t *testing.T) {
	p := ctp("big", 0)
	p.Spec.MaxToolCalls = contract.MaxToolCallsLimit + 1
	_, err := One(&p)
	if !errors.Is(err, hooks.ErrInvalidSpec) || !strings.HasPrefix(err.Error(), "spec.maxToolCalls: must be ≥ 0 and ≤ 10000000") {
		t.Fatalf("err = %v, want spec.maxToolCalls: must be ≥ 0 and ≤ 10000000", err)
	}
	if Reason(err) != policyv1alpha1.ReasonInvalidSpec {
		t.Errorf("reason %s", Reason(err))
	}
}
