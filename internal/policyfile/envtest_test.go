package policyfile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolhooks/toolhooks/internal/crdschema"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// TestTheLoaderAgreesWithTheAPIServer creates the same documents in a real
// API server (strict field validation, as kubectl apply --validate=strict)
// and through the loader: every sample and every default case must be
// stored with the spec the loader returns, and every rejected case must be
// refused by both with the same field errors.
func TestTheLoaderAgreesWithTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	env := testenv.Start(t)

	var accepted []string
	for _, f := range sampleFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		accepted = append(accepted, string(data))
	}
	for _, tc := range defaultCases {
		accepted = append(accepted, tc.doc)
	}
	for i, doc := range accepted {
		t.Run(fmt.Sprintf("accepted %d", i+1), func(t *testing.T) {
			loaded := onlyObject(t, doc)
			u := unstructuredOf(t, doc)
			if err := env.Client.Create(t.Context(), u, client.FieldValidation("Strict")); err != nil {
				t.Fatalf("the API server refused what the loader accepts: %v\n%s", err, doc)
			}
			t.Cleanup(func() {
				// t.Context is done by the time cleanups run.
				if err := env.Client.Delete(context.Background(), u); err != nil {
					t.Error(err)
				}
			})
			stored, err := env.Scheme.New(u.GroupVersionKind())
			if err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(u), stored.(client.Object)); err != nil {
				t.Fatal(err)
			}
			if got, want := specOf(t, loaded), specOf(t, stored); !reflect.DeepEqual(got, want) {
				t.Errorf("loaded spec %v\nstored spec %v", got, want)
			}
		})
	}

	var rejected []rejectCase
	for _, cases := range [][]rejectCase{enumCases, celCases, unknownFieldCases, otherRejectCases} {
		rejected = append(rejected, cases...)
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			_, loadErr := policyfile.Parse([]byte(tc.doc), "bad.yaml")
			var ours *crdschema.Error
			if !errors.As(loadErr, &ours) {
				t.Fatalf("the loader's error %v is not a schema error", loadErr)
			}
			u := unstructuredOf(t, tc.doc)
			err := env.Client.Create(t.Context(), u, client.FieldValidation("Strict"))
			if err == nil {
				_ = env.Client.Delete(t.Context(), u)
				t.Fatalf("the API server accepted what the loader refuses with %v", loadErr)
			}
			if len(ours.UnknownFields) > 0 {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("the API server answered %v, want a strict decoding error", err)
				}
				for _, f := range ours.UnknownFields {
					if !strings.Contains(err.Error(), fmt.Sprintf("unknown field %q", f)) {
						t.Errorf("the API server's error %q does not name the unknown field %q", err, f)
					}
				}
				return
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
				t.Fatalf("the API server answered %v, want an Invalid error", err)
			}
			var got, want []string
			for _, e := range ours.Fields {
				got = append(got, e.Field+": "+e.ErrorBody())
			}
			for _, c := range status.Status().Details.Causes {
				want = append(want, c.Field+": "+c.Message)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("the loader's errors\n  %s\nthe API server's\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// onlyObject parses doc, which must hold one policy object.
func onlyObject(t *testing.T, doc string) runtime.Object {
	t.Helper()
	p, err := policyfile.Parse([]byte(doc), "doc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if all := p.All(); len(all) == 1 {
		return all[0]
	}
	t.Fatalf("got %+v, want one object", p)
	return nil
}

// unstructuredOf is doc as kubectl sends it, in namespace default.
func unstructuredOf(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(policyfile.DefaultNamespace)
	}
	return u
}

// specOf is obj's spec as JSON values.
func specOf(t *testing.T, obj runtime.Object) any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u["spec"]
}
