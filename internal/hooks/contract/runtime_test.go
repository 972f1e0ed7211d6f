package contract

import (
	"context"
	"path/filepath"
	"testing"
)

func TestRuntimeChecksApplyTheContractScopeToWhatRuns(t *testing.T) {
	ws := newWorkspace(t)
	h := newHook(t, ws.root, &Contract{ScopedCapabilities: []Capability{{Tool: "shell", AllowedPaths: []string{"allowed"}}}})
	call := newCall(t, "shell", `{"command":"cat allowed/*"}`)
	in := filepath.Join(ws.root, "allowed")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		dir  string
		env  []string
		argv []string
		ok   bool
	}{
		{"an expanded path inside the scope", in, nil, []string{"cat", "file.txt"}, true},
		{"a glob that expanded to a file outside it", ws.root, nil, []string{"cat", "other/x", "allowed/file.txt"}, false},
		{"a working directory outside it", filepath.Join(ws.root, "other"), nil, []string{"ls"}, false},
		{"a symlink out of the scope", in, nil, []string{"cat", "escape/x"}, false},
		{"a path outside the workspace", in, nil, []string{"cat", filepath.Join(ws.outside, "secret")}, false},
		{"a nested shell", in, nil, []string{"sh", "-c", "cat ../other/x"}, false},
		{"a variable naming a path outside", in, []string{"GIT_DIR=" + filepath.Join(ws.root, "other")}, []string{"git", "status"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := h.CheckExec(ctx, call, tc.dir, tc.env, tc.argv); v.Allowed != tc.ok {
				t.Errorf("CheckExec(%s, %q, %q) = %+v, want allowed=%v", tc.dir, tc.env, tc.argv, v, tc.ok)
			}
		})
	}
	if v := h.CheckOpen(ctx, call, filepath.Join(in, "file.txt"), true); !v.Allowed {
		t.Errorf("open inside: %+v", v)
	}
	for _, p := range []string{filepath.Join(ws.root, "other", "x"), filepath.Join(in, "escape", "x"), filepath.Join(ws.outside, "secret")} {
		if v := h.CheckOpen(ctx, call, p, false); v.Allowed || v.Rule != RuleScopedCapabilities {
			t.Errorf("open %s: %+v", p, v)
		}
	}
	// A call no contract governs is not restricted at run time either.
	free := newHook(t, ws.root, nil)
	if v := free.CheckExec(ctx, call, ws.root, nil, []string{"cat", filepath.Join(ws.outside, "secret")}); !v.Allowed {
		t.Errorf("ungoverned call: %+v", v)
	}
}
