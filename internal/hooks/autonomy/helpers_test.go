package autonomy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// fixture is a real workspace in a temp dir:
//
//	<tmp>/ws/src/a.go, ws/secret-data, ws/.env, ws/notes.txt
//	ws/in -> src                 symlink inside
//	ws/out -> <tmp>/outside      symlink escaping
//	ws/esc -> <tmp>/outside      symlinked parent that escapes
//	ws/passwd -> <tmp>/outside/secret  file symlink escaping
//	ws/loop1 <-> ws/loop2        cycle
//	ws/up -> ..                  relative escape
//	<tmp>/outside/secret
type fixture struct {
	tmp, ws, outside string
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir())
}

// newFixtureIn is newFixture in the directory dir.
func newFixtureIn(t testing.TB, dir string) fixture {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{tmp: tmp, ws: filepath.Join(tmp, "ws"), outside: filepath.Join(tmp, "outside")}
	mk := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mk(os.MkdirAll(filepath.Join(f.ws, "src", "pkg", "sub"), 0o755))
	mk(os.MkdirAll(f.outside, 0o755))
	for _, p := range []string{"src/a.go", "src/pkg/sub/x.go", "secret-data", ".env", "notes.txt"} {
		mk(os.WriteFile(filepath.Join(f.ws, p), []byte("x"), 0o644))
	}
	mk(os.WriteFile(filepath.Join(f.outside, "secret"), []byte("s"), 0o644))
	mk(os.Symlink("src", filepath.Join(f.ws, "in")))
	mk(os.Symlink(f.outside, filepath.Join(f.ws, "out")))
	mk(os.Symlink(f.outside, filepath.Join(f.ws, "esc")))
	mk(os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.ws, "passwd")))
	mk(os.Symlink("loop2", filepath.Join(f.ws, "loop1")))
	mk(os.Symlink("loop1", filepath.Join(f.ws, "loop2")))
	mk(os.Symlink("..", filepath.Join(f.ws, "up")))
	return f
}

// config is the policy most tests use.
func (f fixture) config() Config {
	return Config{
		Mode:               "full",
		WorkspaceRoot:      f.ws,
		WorkspaceOnly:      true,
		ForbiddenPathGlobs: []string{f.ws + "/secret*", "**/.env", "*.pem"},
		AllowShell:         true,
		AllowedShellCommands: []string{
			"ls", "ls *", "cat", "cat *", "git status", "git log *", "echo *", "grep *",
			"wc *", "head *", "sort *", "diff *", "tee *", "find *", "xargs *", "env *",
			"nohup *", "timeout *", "sudo *", "bash *", "sh *", "cd *", "touch *", "curl *", "tar *",
		},
	}
}

func newHook(t testing.TB, cfg Config) *Hook {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

func decide(t testing.TB, h *Hook, tool, args string) hooks.Verdict {
	t.Helper()
	v, err := h.Before(context.Background(), hooks.NewCall(tool, args))
	if err != nil {
		t.Fatalf("Before returned error %v", err)
	}
	if !v.Allowed && (v.Rule == "" || v.Reason == "") {
		t.Fatalf("denial without rule or reason: %+v", v)
	}
	return v
}

// obj marshals args as the call's JSON text.
func obj(t testing.TB, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sh is the JSON arguments of a shell call.
func sh(cmd string) map[string]any { return map[string]any{"command": cmd} }

// requireShellDenied fails for each command line h allows.
func requireShellDenied(t testing.TB, h *Hook, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); v.Allowed {
			t.Errorf("%q was allowed", cmd)
		}
	}
}

// requireShellAllowed fails for each command line h denies.
func requireShellAllowed(t testing.TB, h *Hook, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); !v.Allowed {
			t.Errorf("%q was denied: %s", cmd, v.Reason)
		}
	}
}
