package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestEvaluateRejectsInvalidUTF8 checks that the CLI, like the gateway,
// never decides a call whose strings would become U+FFFD.
func TestEvaluateRejectsInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	policy := "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: AutonomyPolicy\nmetadata: {name: p}\n" +
		"spec: {workspace: {root: /workspace}, shell: {allow: true, allowedCommands: ['*']}}\n"
	if err := os.WriteFile(p, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := LoadPolicies([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEvaluator(l, Options{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Call{
		{Tool: "shell\xff", Args: `{"command":"ls"}`},
		{Tool: "shell", Args: "{\"command\":\"ls \xfe\"}"},
		{Tool: "read_file", Session: "s\xff"},
	} {
		if d, err := e.Evaluate(context.Background(), c); !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: decision %+v, error %v; want ErrBadInput", c.Tool, d, err)
		}
	}
	if _, err := decodeSuite([]byte("apiVersion: x\xff\n")); err == nil {
		t.Error("a suite with invalid UTF-8 decoded")
	}
}
