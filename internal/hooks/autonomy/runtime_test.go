package autonomy

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestRuntimeChecksApplyTheShellRulesToTheFinalArgv(t *testing.T) {
	f := newFixture(t)
	h, err := New(Config{WorkspaceRoot: f.ws, WorkspaceOnly: true, ForbiddenPathGlobs: []string{"**/.env", "secret-*"},
		AllowShell: true, AllowedShellCommands: []string{"cat *", "ls *", "ls", "git *", "sh *"}})
	if err != nil {
		t.Fatal(err)
	}
	call := hooks.NewCall("shell", `{"command":"cat *"}`)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		dir  string
		env  []string
		argv []string
		rule string
	}{
		{"an allowed command", f.ws, nil, []string{"cat", "notes.txt"}, ""},
		{"a glob expanded to a forbidden file", f.ws, nil, []string{"cat", "notes.txt", ".env"}, RuleForbiddenPaths},
		{"a POSIX class expanded to .env", f.ws, nil, []string{"cat", ".env"}, RuleForbiddenPaths},
		{"a substitution that produced a path outside", f.ws, nil, []string{"cat", filepath.Join(f.outside, "secret")}, RuleWorkspaceOnly},
		{"a symlink out", f.ws, nil, []string{"cat", "out/secret"}, RuleWorkspaceOnly},
		{"a command off the allow-list", f.ws, nil, []string{"rm", "-rf", "src"}, RuleShellAllowList},
		{"a word that looks like an operator is only a word", f.ws, nil, []string{"cat", ";", "rm", "x"}, ""},
		{"a nested shell is unwrapped", f.ws, nil, []string{"sh", "-c", "rm -rf src"}, RuleShellAllowList},
		{"a working directory outside", f.outside, nil, []string{"ls"}, RuleWorkspaceOnly},
		{"an exported variable is shown to the check", f.ws, []string{"LD_PRELOAD=./x.so"}, []string{"ls"}, RuleShellUnverifiable},
		{"a NUL byte cannot be quoted", f.ws, nil, []string{"cat", "a\x00b"}, RuleShellUnverifiable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := h.CheckExec(ctx, call, tc.dir, tc.env, tc.argv)
			if tc.rule == "" && !v.Allowed || tc.rule != "" && (v.Allowed || v.Rule != tc.rule) {
				t.Errorf("CheckExec(%q, %q) = %+v, want rule %q", tc.env, tc.argv, v, tc.rule)
			}
		})
	}
	for p, rule := range map[string]string{
		filepath.Join(f.ws, "notes.txt"):   "",
		filepath.Join(f.ws, ".env"):        RuleForbiddenPaths,
		filepath.Join(f.ws, "up", "x"):     RuleWorkspaceOnly,
		filepath.Join(f.outside, "secret"): RuleWorkspaceOnly,
		filepath.Join(f.ws, "passwd"):      RuleWorkspaceOnly,
		filepath.Join(f.ws, "secret-data"): RuleForbiddenPaths,
	} {
		if v := h.CheckOpen(ctx, call, p, true); rule == "" && !v.Allowed || rule != "" && v.Rule != rule {
			t.Errorf("CheckOpen(%s) = %+v, want %q", p, v, rule)
		}
	}
	ro, err := New(Config{Mode: ModeReadOnly, WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := ro.CheckOpen(ctx, call, filepath.Join(f.ws, "notes.txt"), true); v.Allowed || v.Rule != RuleReadOnly {
		t.Errorf("a write in readonly mode: %+v", v)
	}
	off, err := New(Config{WorkspaceRoot: f.ws})
	if err != nil {
		t.Fatal(err)
	}
	if v := off.CheckExec(ctx, call, f.ws, nil, []string{"ls"}); v.Rule != RuleShellDisabled {
		t.Errorf("shell disabled: %+v", v)
	}
}
