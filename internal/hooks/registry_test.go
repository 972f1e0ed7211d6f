package hooks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

func TestRegistry(t *testing.T) {
	a := hooks.HookFuncs{HookName: "a"}
	b := hooks.HookFuncs{HookName: "b"}
	tests := []struct {
		name      string
		register  func(r *hooks.Registry) error
		wantErr   string
		wantNames []string
	}{
		{
			name: "hooks come back in registration order",
			register: func(r *hooks.Registry) error {
				if err := r.Register(b); err != nil {
					return err
				}
				return r.RegisterEntry(hooks.Entry{Hook: a, Action: hooks.ActionWarn})
			},
			wantNames: []string{"b", "a"},
		},
		{
			name: "a second hook with the same name is rejected and the first is kept",
			register: func(r *hooks.Registry) error {
				if err := r.Register(a); err != nil {
					return err
				}
				return r.Register(hooks.HookFuncs{HookName: "a"})
			},
			wantErr:   `hook "a" is already registered`,
			wantNames: []string{"a"},
		},
		{
			name:     "a nil hook is rejected",
			register: func(r *hooks.Registry) error { return r.Register(nil) },
			wantErr:  "hook is nil",
		},
		{
			name:     "a hook without a name is rejected",
			register: func(r *hooks.Registry) error { return r.Register(hooks.HookFuncs{}) },
			wantErr:  "empty name",
		},
		{
			name: "an unknown action is rejected",
			register: func(r *hooks.Registry) error {
				return r.RegisterEntry(hooks.Entry{Hook: a, Action: "Maybe"})
			},
			wantErr: "unknown enforcement action",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r hooks.Registry
			err := tt.register(&r)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("register: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("register = %v, want an error containing %q", err, tt.wantErr)
			}
			entries := r.Entries()
			names := make([]string, 0, len(entries))
			for _, e := range entries {
				names = append(names, e.Hook.Name())
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.wantNames) {
				t.Errorf("Entries() names = %q, want %q", names, tt.wantNames)
			}
		})
	}
}

func TestRegistryEntriesIsACopy(t *testing.T) {
	var r hooks.Registry
	if err := r.Register(hooks.HookFuncs{HookName: "a"}); err != nil {
		t.Fatal(err)
	}
	got := r.Entries()
	got[0] = hooks.Entry{Hook: hooks.HookFuncs{HookName: "changed"}}
	if name := r.Entries()[0].Hook.Name(); name != "a" {
		t.Errorf("changing the returned slice changed the registry: first hook is %q", name)
	}
}

func TestRegistryIsSafeForConcurrentUse(t *testing.T) {
	var r hooks.Registry
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			if err := r.Register(hooks.HookFuncs{HookName: fmt.Sprint(i)}); err != nil {
				t.Error(err)
			}
			_ = r.Entries()
		})
	}
	wg.Wait()
	if n := len(r.Entries()); n != 100 {
		t.Errorf("registered %d hooks, want 100", n)
	}
}

// A custom gateway build registers its own Go hooks in an injected Registry
// and appends them after the built-in hooks.
func ExampleRegistry() {
	var native hooks.Registry
	err := native.Register(hooks.HookFuncs{
		HookName: "no-deletes",
		BeforeFunc: func(_ context.Context, call *hooks.Call) (hooks.Verdict, error) {
			if call.Tool == "delete_file" {
				return hooks.Deny("NoDeletes", "This build never deletes files"), nil
			}
			return hooks.Allow, nil
		},
	})
	if err != nil {
		panic(err)
	}

	// Outcomes only, to keep the example's output stable.
	sink := audit.SinkFunc(func(_ context.Context, r audit.Record) error {
		fmt.Println("audit:", r.Tool, r.Outcome)
		return nil
	})
	builtins := []hooks.Entry{{Hook: audit.New(sink)}}
	tools := []hooks.Tool{
		hooks.ToolFunc{ToolName: "delete_file", Func: func(context.Context, map[string]any) (string, error) {
			return "deleted", nil
		}},
	}
	exec, err := hooks.NewExecutor(append(builtins, native.Entries()...), tools)
	if err != nil {
		panic(err)
	}

	res := exec.Execute(context.Background(), hooks.NewCall("delete_file", `{"path":"notes.txt"}`))
	fmt.Println(res.Output)
	fmt.Println(res.Denial.Rule+":", res.Denial.Reason)
	// Output:
	// audit: delete_file denied
	// Tool execution denied by hook: no-deletes
	// NoDeletes: This build never deletes files
}
