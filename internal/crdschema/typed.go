package crdschema

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// scheme knows the Go types of the policy kinds.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("registering the policy types: %v", err))
	}
	return s
}()

// Default sets the CRD's defaults in obj, a typed policy object such as
// *v1alpha1.PluginHook, in place, as the API server would on create: a
// PluginHook without a timeout, for example, gets the CRD's default timeout.
// Only defaults change; obj's TypeMeta is left as it is.
func Default(obj runtime.Object) error {
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return fmt.Errorf("%T is not a policy kind: %w", obj, err)
	}
	s, err := For(gvks[0].Kind)
	if err != nil {
		return err
	}
	if gvks[0] != s.gvk {
		return fmt.Errorf("%T is %s, the CRD serves %s", obj, gvks[0], s.gvk)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %T: %w", obj, err)
	}
	s.Default(u)
	fresh := reflect.New(reflect.TypeOf(obj).Elem())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, fresh.Interface()); err != nil {
		return fmt.Errorf("converting back to %T: %w", obj, err)
	}
	reflect.ValueOf(obj).Elem().Set(fresh.Elem())
	return nil
}
