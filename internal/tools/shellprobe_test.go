package tools_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// probeLayout returns a directory holding a workspace (with a forbidden
// .env, a forbidden secrets directory and symlinks to both, in and out) and,
// beside it, a file and a directory outside the workspace.
func probeLayout(t *testing.T) (dir, ws string) {
	t.Helper()
	dir = mustReal(t, t.TempDir())
	ws = filepath.Join(dir, "ws")
	for p, body := range map[string]string{
		"ws/.env":          "SECRET=env\n",
		"ws/config/.env":   "SECRET=config\n",
		"ws/secrets/key":   "SECRET=key\n",
		"ws/src/main.go":   "package main\n",
		"ws/.editorconfig": "root = true\n",
		"ws/full.txt":      "full\n",
		"ws/empty.txt":     "",
		"outside.txt":      "SECRET=outside\n",
		"outdir/f.txt":     "SECRET=outdir\n",
	} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"in-link":      "src/main.go",
		"env-link":     ".env",
		"out-link":     "../outside.txt",
		"out-dir-link": "../outdir",
		"abs-out-link": filepath.Join(dir, "outside.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, ws
}

// shellUnder returns a function running a command with the shell tool of ws
// under a runtime guard made of an Autonomy hook with cfg (its workspace,
// the shell and every command allowed), as the executor attaches one.
func shellUnder(t *testing.T, ws string, cfg autonomy.Config) func(cmd string) (string, error) {
	t.Helper()
	cfg.WorkspaceRoot, cfg.AllowShell, cfg.AllowedShellCommands = ws, true, []string{"*"}
	auto, err := autonomy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sh := shellOf(t, ws)
	return func(cmd string) (string, error) {
		g, err := hooks.NewGuard(&hooks.Call{Tool: tools.Shell}, hooks.Entry{Hook: auto})
		if err != nil {
			t.Fatal(err)
		}
		return sh.Execute(hooks.WithGuard(context.Background(), g), map[string]any{"command": cmd})
	}
}

var forbidden = []string{"**/.env", "secrets/**"}

// defaultSandbox is the default sandbox, made once: making one probes the
// kernel with a supervisor process, which a test running hundreds of
// commands should not pay for each (as the gateway makes one for all).
var defaultSandbox = sync.OnceValues(func() (*sandbox.Sandbox, error) { return sandbox.New(sandbox.Config{}) })

// shellOf returns the shell tool of the built-in tools over ws.
func shellOf(t *testing.T, ws string) hooks.Tool {
	t.Helper()
	sb, err := defaultSandbox()
	if err != nil {
		t.Fatal(err)
	}
	list, err := tools.Builtins(ws, tools.Options{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list {
		if tl.Name() == tools.Shell {
			return tl
		}
	}
	t.Fatal("no shell tool among the built-ins")
	return nil
}

// The interpreter's own file tests and cd answer nothing about a forbidden
// path or one outside the workspace: the whole command is denied, and
// nothing after the probe (nor the probe's own branch) runs.
func TestShellFileTestsOfForbiddenOrOutsidePathsDenyTheCommand(t *testing.T) {
	dir, ws := probeLayout(t)
	forbiddenProbes := []string{
		`[[ -e .env ]]`,
		`test -s .env`,
		`[ -f config/.env ]`,
		`[ -e secrets/key ]`,
		`[[ -r .env ]]`,
		`[ -w .env ]`,
		`[ -x .env ]`,
		`[ -O .env ]`,
		`[[ .env -nt full.txt ]]`,
		`[[ full.txt -ot .env ]]`,
		`[ full.txt -ef .env ]`,
		`[ -s env-link ]`,
		`[ -h env-link ]`,
		`(cd secrets)`,
		`x=.e; [ -e "${x}nv" ]`,
		`f() { test -e "$1"; }; f .env`,
		`(cd config && [ -e .env ])`,
	}
	outsideProbes := []string{
		`[ -d ../outdir ]`,
		`[[ -e ` + filepath.Join(dir, "outside.txt") + ` ]]`,
		`test -f ../outside.txt`,
		`[ -r ../outside.txt ]`,
		`[ -x /etc/shadow ]`,
		`[[ -e /etc/shadow ]]`,
		`[ -e out-link ]`,
		`[ -s abs-out-link ]`,
		`[ -f out-dir-link/f.txt ]`,
		`[ -e src/../../outside.txt ]`,
		`[ -e /proc/self/root` + filepath.Join(dir, "outside.txt") + ` ]`,
		`[ ../outside.txt -nt full.txt ]`,
	}
	for _, workspaceOnly := range []bool{true, false} {
		run := shellUnder(t, ws, autonomy.Config{WorkspaceOnly: workspaceOnly, ForbiddenPathGlobs: forbidden})
		probes := append(append([]string(nil), forbiddenProbes...), outsideProbes...)
		for i, probe := range probes {
			name := fmt.Sprintf("workspaceOnly=%v/%s", workspaceOnly, probe)
			t.Run(name, func(t *testing.T) {
				cmd := fmt.Sprintf("%s && touch yes-%d || touch no-%d; touch after-%d", probe, i, i, i)
				out, err := run(cmd)
				denial, isDenial := errors.AsType[*hooks.RuntimeDenial](err)
				refusal, isRefusal := errors.AsType[*hooks.ToolError](err)
				switch {
				case isDenial:
					// The policy refused the path.
					if denial.Decision.Rule == "" {
						t.Errorf("a denial without a rule: %v", denial)
					}
				case isRefusal && i >= len(forbiddenProbes) && !workspaceOnly:
					// No policy rule covers the outside: the tool refuses it itself.
					if !strings.HasPrefix(refusal.Text, "Error: shell:") || !strings.Contains(refusal.Text, "outside the workspace") {
						t.Errorf("got %q", refusal.Text)
					}
				default:
					t.Errorf("not denied: %q %v", out, err)
				}
				if strings.Contains(out, "SECRET") {
					t.Errorf("output %q", out)
				}
				for _, f := range []string{"yes", "no", "after"} {
					if _, err := os.Lstat(filepath.Join(ws, fmt.Sprintf("%s-%d", f, i))); err == nil {
						t.Errorf("%s-%d was created: the command went on after the denied probe", f, i)
					}
				}
			})
		}
	}
}

// Tests of allowed paths in the workspace answer truthfully, without
// following a symlink out of it, and nothing else the interpreter does
// (cd, starting programs found in PATH or by path) changed.
func TestShellFileTestsInTheWorkspaceAnswerTruthfully(t *testing.T) {
	_, ws := probeLayout(t)
	if err := os.Chmod(filepath.Join(ws, "full.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := shellUnder(t, ws, autonomy.Config{WorkspaceOnly: true, ForbiddenPathGlobs: forbidden})
	for _, tc := range []struct{ cmd, want string }{
		{`[ -e src/main.go ] && echo yes`, "yes\n"},
		{`[[ -e missing ]] || echo absent`, "absent\n"},
		{`[ -s full.txt ] && [ ! -s empty.txt ] && echo sizes`, "sizes\n"},
		{`[ -d src ] && [ ! -f src ] && [ -f src/main.go ] && echo kinds`, "kinds\n"},
		{`[ -h in-link ] && [ -f in-link ] && [ ! -h full.txt ] && echo link`, "link\n"},
		{`[ in-link -ef src/main.go ] && echo same`, "same\n"},
		{`[ -r full.txt ] && [ -x full.txt ] && [ -x src ] && echo access`, "access\n"},
		{`[ -c /dev/null ] && [ -e /dev/urandom ] && [ -r /dev/zero ] && echo devices`, "devices\n"},
		{`[ -e .editorconfig ] && echo dotfile`, "dotfile\n"},
		{`[ -d config ] && echo config`, "config\n"},
		{`cd src && pwd && cd .. && pwd`, ws + "/src\n" + ws + "\n"},
		{`pushd src > /dev/null && [ -f main.go ] && popd > /dev/null && pwd`, ws + "\n"},
		{`cd missing 2> /dev/null; echo $?`, "1\n"},
		{`ls src; /usr/bin/ls src; command -v ls > /dev/null && echo found`, "main.go\nmain.go\nfound\n"},
		{`cd src && ls && cat main.go`, "main.go\npackage main\n"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			out, err := run(tc.cmd)
			if err != nil || out != tc.want {
				t.Errorf("got %q %v, want %q", out, err, tc.want)
			}
		})
	}
}

// Glob expansion leaves out the names the policy forbids: a pattern that
// matched only forbidden names stays as written, as if they did not exist,
// and no program is started with a forbidden name it expanded to.
func TestShellGlobsDoNotExpandToForbiddenNames(t *testing.T) {
	_, ws := probeLayout(t)
	run := shellUnder(t, ws, autonomy.Config{WorkspaceOnly: true, ForbiddenPathGlobs: forbidden})
	for _, tc := range []struct{ cmd, want string }{
		{`echo .e*`, ".editorconfig\n"},
		{`echo config/.e*`, "config/.e*\n"},
		{`echo config/.[e]nv config/?env config/.env*`, "config/.[e]nv config/?env config/.env*\n"},
		{`echo */.env`, "*/.env\n"},
		{`echo */.e*`, "*/.e*\n"},
		{`shopt -s globstar; echo **/.env`, "**/.env\n"},
		{`shopt -s dotglob; echo config/*`, "config/*\n"},
		{`echo secrets/* se*/k*`, "secrets/* se*/k*\n"},
		{`echo env-l*`, "env-l*\n"},
		{`echo [ef]*`, "empty.txt full.txt\n"},
		{`shopt -s nullglob; echo config/.e* end`, "end\n"},
		{`cd config && echo .e* && echo ../.e*`, ".e*\n../.editorconfig\n"},
		{`echo src/*.go`, "src/main.go\n"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			out, err := run(tc.cmd)
			if err != nil || out != tc.want {
				t.Errorf("got %q %v, want %q", out, err, tc.want)
			}
		})
	}
	// The names a glob expanded to, as a program received them.
	out, err := run(`for f in config/.e* */.env .e*; do printf '%s\n' "$f" >> expanded.txt; done; wc -l < expanded.txt`)
	if err != nil || strings.TrimSpace(out) != "3" {
		t.Fatalf("got %q %v", out, err)
	}
	b, err := os.ReadFile(filepath.Join(ws, "expanded.txt"))
	if err != nil || string(b) != "config/.e*\n*/.env\n.editorconfig\n" {
		t.Errorf("expanded.txt: %q %v", b, err)
	}
	// A program given the expansion cannot read the forbidden file either.
	out, err = run(`cat config/.e* > copy.txt 2> /dev/null; echo $?`)
	if err != nil || out != "1\n" {
		t.Errorf("got %q %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "copy.txt")); err != nil || len(b) != 0 {
		t.Errorf("copy.txt: %q %v", b, err)
	}
}

// Without a rule that forbids them, and under a Warn entry (which only
// reports), glob expansion lists every name, and listing records no warning.
func TestShellGlobsListNamesNoEnforcedRuleForbids(t *testing.T) {
	_, ws := probeLayout(t)
	auto, err := autonomy.New(autonomy.Config{WorkspaceRoot: ws, WorkspaceOnly: true, ForbiddenPathGlobs: forbidden,
		AllowShell: true, AllowedShellCommands: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	sh := shellOf(t, ws)
	warn, err := hooks.NewGuard(&hooks.Call{Tool: tools.Shell}, hooks.Entry{Hook: auto, Action: hooks.ActionWarn})
	if err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{
		"no checkers": guarded(t, context.Background()),
		"warn":        hooks.WithGuard(context.Background(), warn),
	} {
		out, err := sh.Execute(ctx, map[string]any{"command": `echo config/.e* */.env secrets/*`})
		if err != nil || out != "config/.env config/.env secrets/key\n" {
			t.Errorf("%s: got %q %v", name, out, err)
		}
	}
	if w := warn.Warnings(); len(w) != 0 {
		t.Errorf("listing recorded warnings: %+v", w)
	}
}
