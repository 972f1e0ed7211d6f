package hooks_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// TestPathMemoIsSharedWithinACallOnly checks the executor's per-decision
// pathguard.Memo: the hooks after Autonomy see the lookups Autonomy made for
// the same call, every decision starts with an empty memo, and so a symlink
// retargeted between two decisions of the very same Call is seen by both
// Autonomy and ContractScope (a memo kept across calls would be a bypass).
func TestPathMemoIsSharedWithinACallOnly(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(ws, "link")
	if err := os.Symlink("src", link); err != nil {
		t.Fatal(err)
	}
	auto, err := autonomy.New(autonomy.Config{Name: "autonomy", WorkspaceRoot: ws, WorkspaceOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := contract.New(contract.Config{Name: "scope", Contract: &contract.Contract{
		ScopedCapabilities: []contract.Capability{{Tool: "read_file", AllowedPaths: []string{filepath.Join(ws, "src")}}},
	}, WorkspaceRoot: ws})
	if err != nil {
		t.Fatal(err)
	}
	var seen []int // memo sizes observed after Autonomy, one per decision
	probe := hooks.HookFuncs{HookName: "probe", BeforeFunc: func(ctx context.Context, _ *hooks.Call) (hooks.Verdict, error) {
		seen = append(seen, pathguard.MemoFrom(ctx).Len())
		return hooks.Allow, nil
	}}
	entries := []hooks.Entry{{Hook: auto}, {Hook: probe}, {Hook: scope}}
	e := mustExecutor(t, entries, nil)
	call := hooks.NewCall("read_file", `{"path":"link/a.go"}`)

	if res := e.Evaluate(context.Background(), call); res.Status != hooks.StatusAllowed {
		t.Fatalf("link -> src: %+v", res.Denial)
	}
	if len(seen) != 1 || seen[0] == 0 {
		t.Fatalf("the hook after Autonomy saw memo sizes %v; want Autonomy's lookups", seen)
	}

	// Retarget the link outside the workspace: Autonomy denies.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	res := e.Evaluate(context.Background(), call)
	if res.Status != hooks.StatusDenied || res.Denial.Hook != "autonomy" || res.Denial.Rule != autonomy.RuleWorkspaceOnly {
		t.Fatalf("link -> outside: got %s %+v, want an autonomy %s denial", res.Status, res.Denial, autonomy.RuleWorkspaceOnly)
	}

	// Retarget it inside the workspace but outside the contract's scope:
	// ContractScope denies, on its own fresh lookups.
	if err := os.MkdirAll(filepath.Join(ws, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", link); err != nil {
		t.Fatal(err)
	}
	res = e.Evaluate(context.Background(), call)
	if res.Status != hooks.StatusDenied || res.Denial.Hook != "scope" || res.Denial.Rule != contract.RuleScopedCapabilities {
		t.Fatalf("link -> other: got %s %+v, want a scope %s denial", res.Status, res.Denial, contract.RuleScopedCapabilities)
	}
	if len(seen) != 2 { // not when Autonomy denied
		t.Fatalf("the probe ran %d times, want 2", len(seen))
	}
}
