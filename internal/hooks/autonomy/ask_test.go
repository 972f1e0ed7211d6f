package autonomy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// askConfig is the fixture's policy with ask rules for deploy tools, the
// src/pkg tree and destructive git commands.
func (f fixture) askConfig() Config {
	cfg := f.config()
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "git *", "rm *", "kubectl *")
	cfg.ToolDeny = []string{"drop_*"}
	cfg.Ask = &AskConfig{
		Tools:         []string{"deploy_*"},
		PathGlobs:     []string{"src/pkg/**"},
		Commands:      []string{"git push *", "rm *", "kubectl delete *"},
		ExpirySeconds: 300,
	}
	return cfg
}

func args(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestAskRulesAskOnlyForCallsEveryRuleAllows(t *testing.T) {
	f := newFixture(t)
	if err := os.Symlink("src/pkg", filepath.Join(f.ws, "alias")); err != nil {
		t.Fatal(err)
	}
	h := newHook(t, f.askConfig())
	open := f.askConfig()
	open.AllowedShellCommands = []string{"*"}
	// With an allow-list of ["*"] the deny rules let through what cannot be
	// read; the ask rules must still ask.
	hOpen := newHook(t, open)
	for _, tc := range []struct {
		name, tool, args string
		want             string // "allow", "ask:<rule>" or "deny:<rule>"
		open             bool   // decided by hOpen
	}{
		{"a tool that asks", "deploy_prod", `{}`, "ask:" + RuleAskTools, false},
		{"tool names fold case", "Deploy_Prod", `{}`, "ask:" + RuleAskTools, false},
		{"another tool", "read_file", args("path", "src/a.go"), "allow", false},
		{"a path under the glob", "write_file", args("path", "src/pkg/new.go"), "ask:" + RuleAskPathGlobs, false},
		{"the same path through a symlink", "write_file", args("path", "alias/sub/x.go"), "ask:" + RuleAskPathGlobs, false},
		{"the same path spelled with dot-dot", "write_file", args("path", "notes/../src/pkg/sub/x.go"), "ask:" + RuleAskPathGlobs, false},
		{"an absolute path", "read_file", args("path", f.ws+"/src/pkg/sub/x.go"), "ask:" + RuleAskPathGlobs, false},
		{"a shell word naming the path", "shell", args("command", "cat src/pkg/sub/x.go"), "ask:" + RuleAskPathGlobs, false},
		{"a shell glob that expands into it", "shell", args("command", "cat src/p*/sub/x.go"), "ask:" + RuleAskPathGlobs, false},
		{"a redirection into it", "shell", args("command", "echo x > alias/y"), "ask:" + RuleAskPathGlobs, false},
		{"a cd into it", "shell", args("command", "cd src && cat pkg/sub/x.go"), "ask:" + RuleAskPathGlobs, false},
		{"the shell's working directory", "shell", args("command", "cat sub/x.go", "cwd", "src/pkg"), "ask:" + RuleAskPathGlobs, false},
		{"a command that asks", "shell", args("command", "git push origin main"), "ask:" + RuleAskCommands, false},
		{"a command after another", "shell", args("command", "git status; rm notes.txt"), "ask:" + RuleAskCommands, false},
		{"a wrapped command", "shell", args("command", "sudo kubectl delete pod x"), "ask:" + RuleAskCommands, true},
		{"a command in a nested shell", "shell", args("command", "bash -c 'rm notes.txt'"), "ask:" + RuleAskCommands, false},
		{"a command in a substitution", "shell", args("command", "echo $(git push origin x)"), "ask:" + RuleAskCommands, true},
		{"a command read only at run time", "shell", args("command", "$CMD notes.txt"), "ask:" + RuleAskCommands, true},
		{"code that cannot be read", "code_exec", args("code", "import os"), "ask:" + RuleAskCommands, true},
		{"a command that does not ask", "shell", args("command", "git status"), "allow", false},
		{"a command that does not ask, allow-all", "shell", args("command", "git log --oneline"), "allow", true},
		{"the closed policy denies what cannot be read", "shell", args("command", "$CMD notes.txt"), "deny:" + RuleShellAllowList, false},
		{"deny wins over ask: a forbidden path", "write_file", args("path", "src/pkg/.env"), "deny:" + RuleForbiddenPaths, false},
		{"deny wins over ask: a denied tool", "drop_tables", `{}`, "deny:" + RuleToolDeny, false},
		{"deny wins over ask: a command off the allow-list", "shell", args("command", "kubectl delete pod x; python3 x"), "deny:" + RuleShellAllowList, false},
		{"deny wins over ask: outside the workspace", "write_file", args("path", "out/secret"), "deny:" + RuleWorkspaceOnly, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := h
			if tc.open {
				hook = hOpen
			}
			v := decide(t, hook, tc.tool, tc.args)
			got := "allow"
			switch {
			case v.Ask:
				got = "ask:" + v.Rule
				if v.Expiry != 300*time.Second {
					t.Errorf("expiry %s, want 5m", v.Expiry)
				}
			case !v.Allowed:
				got = "deny:" + v.Rule
			}
			if got != tc.want {
				t.Fatalf("%s %s: got %s (%s), want %s", tc.tool, tc.args, got, v.Reason, tc.want)
			}
			if v.Ask && v.Allowed {
				t.Fatalf("an ask verdict must not allow: %+v", v)
			}
		})
	}
}

func TestAskRulesOfAPolicyThatDoesNotBindTheCallDoNotAsk(t *testing.T) {
	f := newFixture(t)
	cfg := f.askConfig()
	cfg.Subjects = hooks.Subjects{Senders: []string{"alice"}}
	h := newHook(t, cfg)
	call := hooks.NewCall("deploy_prod", `{}`)
	call.SenderID = "bob"
	if v, _ := h.Before(t.Context(), call); !v.Allowed || v.Ask {
		t.Fatalf("unbound call: %+v", v)
	}
	call.SenderID = "alice"
	if v, _ := h.Before(t.Context(), call); !v.Ask {
		t.Fatalf("bound call: %+v", v)
	}
}

func TestAskRulesAreValidated(t *testing.T) {
	f := newFixture(t)
	for name, ask := range map[string]*AskConfig{
		"bad tool glob":         {Tools: []string{"a[b"}},
		"bad path glob":         {PathGlobs: []string{"src/[x"}},
		"lone backslash":        {Commands: []string{`rm \`}},
		"negative expiry":       {Tools: []string{"x"}, ExpirySeconds: -1},
		"expiry over a day":     {Tools: []string{"x"}, ExpirySeconds: 86401},
		"expiry that overflows": {Tools: []string{"x"}, ExpirySeconds: 1 << 40},
	} {
		cfg := f.config()
		cfg.Ask = ask
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, ask)
		}
		if err := Validate(cfg); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, ask)
		}
	}
	// Path and command rules need a workspace to resolve against.
	if _, err := New(Config{Ask: &AskConfig{PathGlobs: []string{"x/**"}}}); !errors.Is(err, hooks.ErrInvalidPath) {
		t.Errorf("ask path globs without a workspace: %v", err)
	}
}
