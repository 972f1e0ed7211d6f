package tools_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// gitRepo makes ws a git repository with one commit and a changed file, and
// writes, as if before the agent ran, a .git/config and a hook that would
// run programs leaving sentinel files in the workspace's out directory
// (where nothing is protected, so confined programs may create files): an external diff,
// a file system monitor, a credential helper and a pre-commit hook. It
// also plants a bare repository in the work tree.
func gitRepo(t *testing.T, ws string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	gitCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitCmd("init", "-q", ".")
	gitCmd("config", "user.email", "a@example.com")
	gitCmd("config", "user.name", "a")
	write(t, filepath.Join(ws, "f.txt"), "one\n", 0o644)
	gitCmd("add", "f.txt")
	gitCmd("commit", "-qm", "one")
	write(t, filepath.Join(ws, "f.txt"), "two\n", 0o644)
	if err := os.Mkdir(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	sentinel := func(name string) string { return "touch " + filepath.Join(ws, "out", name) }
	gitCmd("config", "diff.external", sentinel("s-extdiff")+"; true")
	gitCmd("config", "core.fsmonitor", sentinel("s-fsmonitor")+"; true")
	gitCmd("config", "core.pager", sentinel("s-pager")+"; cat")
	gitCmd("config", "credential.helper", "!"+sentinel("s-credential")+"; true")
	write(t, filepath.Join(ws, ".git", "hooks", "pre-commit"), "#!/bin/sh\n"+sentinel("s-hook")+"\n", 0o755)
	bare := filepath.Join(ws, "bare")
	for _, d := range []string{"objects", "refs"} {
		if err := os.MkdirAll(filepath.Join(bare, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(bare, "HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(bare, "config"), "[core]\n\tbare = true\n", 0o644)
}

func write(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// sentinels are the files the configured programs leave when they run.
var sentinels = []string{"s-extdiff", "s-fsmonitor", "s-credential", "s-hook"}

// gitCalls make git run each configured program: git diff the external
// diff, git status the monitor, git credential fill the helper and
// git commit the hook.
const gitCalls = `git diff; git status --short; printf 'protocol=https\nhost=example.com\n\n' | git credential fill; git commit -qam two`

// shellWith returns a function running a command with the shell tool of ws
// and the tool the runtime guard of an Autonomy hook of cfg allows, as the
// executor does once every before-hook allowed the call.
func shellWith(t *testing.T, ws string, cfg autonomy.Config) func(tool string, args map[string]any) (string, error) {
	t.Helper()
	return shellWithOptions(t, ws, cfg, tools.Options{})
}

// liftedGit is a policy protecting none of the default entries, so that
// confined programs may write .git (which the kernel otherwise keeps
// read-only: it cannot let git create .git/index.lock while refusing
// .git/config in the same directory).
func liftedGit(allowPrograms bool) autonomy.Config {
	var names []string
	for _, e := range autonomy.DefaultProtected {
		names = append(names, e.Name)
	}
	return autonomy.Config{ProtectedPaths: &autonomy.ProtectedConfig{Lift: names, AllowGitPrograms: allowPrograms}}
}

// workspaceExec is a sandbox letting confined processes execute workspace
// files, as the hook in .git/hooks needs.
func workspaceExec(t *testing.T) tools.Options {
	t.Helper()
	sb, err := sandbox.New(sandbox.Config{WorkspaceExec: true})
	if err != nil {
		t.Fatal(err)
	}
	return tools.Options{Sandbox: sb}
}

func shellWithOptions(t *testing.T, ws string, cfg autonomy.Config, opts tools.Options) func(tool string, args map[string]any) (string, error) {
	t.Helper()
	cfg.WorkspaceRoot, cfg.AllowShell, cfg.AllowedShellCommands = ws, true, []string{"*"}
	auto, err := autonomy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := tools.Builtins(ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]hooks.Tool{}
	for _, tl := range list {
		byName[tl.Name()] = tl
	}
	return func(tool string, args map[string]any) (string, error) {
		g, err := hooks.NewGuard(&hooks.Call{Tool: tool}, hooks.Entry{Hook: auto})
		if err != nil {
			t.Fatal(err)
		}
		return byName[tool].Execute(hooks.WithGuard(context.Background(), g), args)
	}
}

func TestShellGitRunsNoProgramItsConfigurationNames(t *testing.T) {
	ws := mustReal(t, t.TempDir())
	gitRepo(t, ws)
	// By default the kernel keeps .git read-only: the commit fails, and
	// no configured program runs.
	run := shellWith(t, ws, autonomy.Config{})
	out, err := run(tools.Shell, map[string]any{"command": gitCalls})
	if err != nil {
		t.Fatalf("the git commands failed: %v", err)
	}
	for _, s := range sentinels {
		if _, err := os.Stat(filepath.Join(ws, "out", s)); err == nil {
			t.Errorf("the program that leaves %s ran:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "-one") || !strings.Contains(out, "+two") || !strings.Contains(out, "a/f.txt") {
		t.Errorf("git diff does not show the change:\n%s", out)
	}
	log, err := run(tools.Shell, map[string]any{"command": "git log --oneline | wc -l; git var GIT_PAGER"})
	if err != nil || log != "1\ncat\n" {
		t.Errorf("the commit (refused: .git is read-only) or the pager: %q, %v", log, err)
	}

	// With .git writable and workspace files executable, git commits, and
	// still runs none of its configured programs: only the environment the
	// shell tool sets stops them.
	writable := shellWithOptions(t, ws, liftedGit(false), workspaceExec(t))
	out, err = writable(tools.Shell, map[string]any{"command": gitCalls})
	if err != nil {
		t.Fatalf("the git commands failed with .git writable: %v", err)
	}
	for _, s := range sentinels {
		if _, err := os.Stat(filepath.Join(ws, "out", s)); err == nil {
			t.Errorf("with .git writable, the program that leaves %s ran:\n%s", s, out)
		}
	}
	log, err = writable(tools.Shell, map[string]any{"command": "git log --oneline | wc -l; git var GIT_PAGER"})
	if err != nil || log != "2\ncat\n" {
		t.Errorf("with .git writable, the commit or the pager: %q, %v", log, err)
	}
	bare, err := run(tools.Shell, map[string]any{"command": "cd bare && git rev-parse --git-dir"})
	if err != nil || !strings.Contains(bare, "cannot use bare repository") {
		t.Errorf("a bare repository in the work tree was used: %q, %v", bare, err)
	}

	// The same calls under a policy that allows git's configured programs
	// run every one of them: the sentinels above can appear.
	allowed := shellWithOptions(t, ws, liftedGit(true), workspaceExec(t))
	write(t, filepath.Join(ws, "f.txt"), "three\n", 0o644)
	if out, err := allowed(tools.Shell, map[string]any{"command": gitCalls}); err != nil {
		t.Fatalf("the git commands failed with git's programs allowed: %v\n%s", err, out)
	}
	for _, s := range sentinels {
		if _, err := os.Stat(filepath.Join(ws, "out", s)); err != nil {
			t.Errorf("with git's programs allowed, the program that leaves %s did not run: %v", s, err)
		}
	}
	if out, err := allowed(tools.Shell, map[string]any{"command": "cd bare && git rev-parse --git-dir"}); err != nil || out != ".\n" {
		t.Errorf("with git's programs allowed, the bare repository: %q, %v", out, err)
	}
}

func TestAgentWritesToGitConfigurationAreDenied(t *testing.T) {
	ws := mustReal(t, t.TempDir())
	gitRepo(t, ws)
	config := filepath.Join(ws, ".git", "config")
	before, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	run := shellWith(t, ws, autonomy.Config{})
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"write_file", tools.WriteFile, map[string]any{"path": ".git/config", "content": "[core]\n\tfsmonitor = x\n"}},
		{"edit_file", tools.EditFile, map[string]any{"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tpager = x"}},
		{"a shell redirection", tools.Shell, map[string]any{"command": "echo '[core] fsmonitor = x' >> .git/config"}},
		{"git config", tools.Shell, map[string]any{"command": "git config core.fsmonitor ./x"}},
		{"a program writing it", tools.Shell, map[string]any{"command": "cp f.txt .git/config"}},
		{"a hook", tools.WriteFile, map[string]any{"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\n"}},
		{"attributes", tools.Shell, map[string]any{"command": "echo '* diff=x' > .gitattributes"}},
		{"a gitdir file", tools.Shell, map[string]any{"command": "mkdir out/sub && echo 'gitdir: ../../bare' > out/sub/.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.tool, tc.args)
			d, ok := errors.AsType[*hooks.RuntimeDenial](err)
			if !ok || d.Decision.Rule != autonomy.RuleProtectedPaths {
				t.Fatalf("got %q, %v; want a %s denial", out, err, autonomy.RuleProtectedPaths)
			}
		})
	}
	if after, err := os.ReadFile(config); err != nil || string(after) != string(before) {
		t.Errorf(".git/config changed: %q, %v", after, err)
	}
	for _, p := range []string{".git/hooks/post-checkout", ".gitattributes", "out/sub/.git"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}

	// Lifted, every entry (the kernel keeps .git read-only while any entry
	// beneath it is protected).
	lifted := shellWith(t, ws, liftedGit(false))
	if out, err := lifted(tools.Shell, map[string]any{"command": "git config core.abbrev 12 && echo '* -diff' > .gitattributes && git config core.abbrev"}); err != nil || out != "12\n" {
		t.Errorf("with the entries lifted: %q, %v", out, err)
	}
	if _, err := lifted(tools.WriteFile, map[string]any{"path": ".git/config", "content": string(before)}); err != nil {
		t.Errorf("write_file with .git/config lifted: %v", err)
	}
}

func TestScriptsCannotUndoTheGitConfiguration(t *testing.T) {
	ws := mustReal(t, t.TempDir())
	gitRepo(t, ws)
	run := shellWith(t, ws, autonomy.Config{})
	for _, cmd := range []string{
		"export GIT_CONFIG_COUNT=0; git status",
		"GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='touch s-fsmonitor'\" git status",
		"GIT_EXTERNAL_DIFF='touch s-extdiff' git diff",
		"GIT_DIR=bare git status",
		"GIT_CONFIG_GLOBAL=./cfg git status",
		"GIT_EXEC_PATH=. git status",
		"GIT_SSH_COMMAND='touch s-ssh' git fetch",
		"LD_PRELOAD=./x.so ls",
		"export LD_LIBRARY_PATH=.; ls",
	} {
		out, err := run(tools.Shell, map[string]any{"command": cmd})
		if err == nil || !strings.Contains(err.Error(), "the script sets") {
			t.Errorf("%q: %q, %v; want a refusal naming the variable", cmd, out, err)
		}
	}
	for _, s := range append(sentinels, "s-ssh") {
		for _, dir := range []string{ws, filepath.Join(ws, "out")} {
			if _, err := os.Stat(filepath.Join(dir, s)); err == nil {
				t.Errorf("%s was left", s)
			}
		}
	}
	allowed := shellWith(t, ws, autonomy.Config{ProtectedPaths: &autonomy.ProtectedConfig{AllowGitPrograms: true}})
	if out, err := allowed(tools.Shell, map[string]any{"command": "GIT_PAGER=cat git var GIT_PAGER"}); err != nil || out != "cat\n" {
		t.Errorf("with git's programs allowed, a git variable: %q, %v", out, err)
	}
	if _, err := allowed(tools.Shell, map[string]any{"command": "LD_PRELOAD=./x.so ls"}); err == nil {
		t.Error("with git's programs allowed, LD_PRELOAD was let through")
	}
}
