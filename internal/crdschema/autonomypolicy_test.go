package crdschema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/crdschema"
)

// The protectedPaths rules, as the API server applies them (the envtest
// suite sends the same objects to a real one).
func TestAutonomyPolicyProtectedPathsSchema(t *testing.T) {
	s, err := crdschema.For("AutonomyPolicy")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		pp      map[string]any
		wantErr string
	}{
		{"add, lift and allowGitPrograms", map[string]any{"add": []any{"deploy/**"}, "lift": []any{".envrc"}, "allowGitPrograms": true}, ""},
		{"an empty object", map[string]any{}, ""},
		{"the same path added and lifted", map[string]any{"add": []any{".envrc"}, "lift": []any{".envrc", ".npmrc"}},
			"protectedPaths names the same path in add and lift"},
		{"an empty glob", map[string]any{"add": []any{""}}, "spec.protectedPaths.add[0]"},
		{"a duplicate name", map[string]any{"lift": []any{".envrc", ".envrc"}}, "spec.protectedPaths.lift[1]: Duplicate value"},
		{"allowGitPrograms not a boolean", map[string]any{"allowGitPrograms": "yes"}, "spec.protectedPaths.allowGitPrograms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "policy.toolhooks.dev/v1alpha1", "kind": "AutonomyPolicy",
				"metadata": map[string]any{"name": "a", "namespace": "default"},
				"spec":     map[string]any{"protectedPaths": tc.pp},
			}
			err := s.Admit(context.Background(), obj)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Admit = %v, want accepted", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Admit = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
