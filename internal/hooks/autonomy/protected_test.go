package autonomy

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// protectedExamples are, per default entry, paths (relative to the
// workspace, or absolute) that each glob of the entry protects: at the top
// of the workspace and in nested repositories, submodules and worktrees.
var protectedExamples = map[string][]string{
	".git": {".git", "sub/.git", "a/b/c/.git"},
	".git/config": {".git/config", "sub/repo/.git/config", ".git/config.worktree",
		".git/worktrees/w1/config.worktree", ".git/modules/lib/config", ".git/modules/lib/nested/config",
		".git/modules/lib/config.worktree"},
	".git/hooks": {".git/hooks/pre-commit", ".git/hooks", "sub/.git/hooks/post-checkout",
		".git/modules/lib/hooks/pre-push"},
	".git/info": {".git/info/attributes", ".git/info/exclude", "sub/.git/info/sparse-checkout",
		".git/modules/lib/info/attributes"},
	".git/commondir": {".git/commondir", ".git/worktrees/w1/commondir", ".git/modules/lib/commondir"},
	".git/objects/info/alternates": {".git/objects/info/alternates", "sub/.git/objects/info/alternates",
		".git/modules/lib/objects/info/alternates"},
	".gitattributes":          {".gitattributes", "src/.gitattributes"},
	".gitmodules":             {".gitmodules", "sub/.gitmodules"},
	".gitconfig":              {".gitconfig", "home/.config/git/config", "home/.config/git/attributes", "/etc/gitconfig"},
	".envrc":                  {".envrc", "src/pkg/.envrc"},
	".cargo/config":           {".cargo/config", ".cargo/config.toml", "crates/x/.cargo/config.toml"},
	".npmrc":                  {".npmrc", "web/.npmrc"},
	".yarnrc":                 {".yarnrc", "web/.yarnrc.yml"},
	".pre-commit-config.yaml": {".pre-commit-config.yaml"},
	".husky":                  {".husky/pre-commit", "web/.husky/_/husky.sh"},
}

// notProtected are paths next to the protected ones that stay writable:
// the repository's own data, and names that only look alike.
var notProtected = []string{".git/index", ".git/HEAD", ".git/objects/ab/cdef", ".git/refs/heads/config",
	".git/COMMIT_EDITMSG", ".git/worktrees/w1/HEAD", "sub/.git/index", "config", "src/config", ".gitignore",
	"gitattributes", ".envrc.example", "hooks/pre-commit", "info/attributes", ".git-credentials-notes",
	".github/workflows/ci.yml", "npmrc", ".cargo/registry/x"}

func TestEveryDefaultProtectedGlobHasAnExample(t *testing.T) {
	for _, e := range DefaultProtected {
		ex, ok := protectedExamples[e.Name]
		if !ok {
			t.Errorf("default entry %q has no examples", e.Name)
			continue
		}
		for _, g := range e.Globs {
			pat := g
			if !strings.Contains(g, "/") {
				pat = "**/" + g
			}
			if !slices.ContainsFunc(ex, func(p string) bool {
				return doublestar.MatchUnvalidated(pat, strings.TrimPrefix(p, "/")) ||
					doublestar.MatchUnvalidated(pat, p)
			}) {
				t.Errorf("glob %q of entry %q has no example", g, e.Name)
			}
		}
		if e.Reason == "" || strings.Contains(e.Reason, "\n") {
			t.Errorf("entry %q needs a one-line reason", e.Name)
		}
	}
	if len(protectedExamples) != len(DefaultProtected) {
		t.Errorf("examples name %d entries, the default set has %d", len(protectedExamples), len(DefaultProtected))
	}
}

// protectedFixture is the shared fixture with a repository in it.
func protectedFixture(t *testing.T) fixture {
	t.Helper()
	f := newFixture(t)
	for _, d := range []string{".git/hooks", ".git/info", "sub/.git/hooks", "web"} {
		if err := os.MkdirAll(filepath.Join(f.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{".git/config", ".gitattributes", ".envrc", "evil"} {
		if err := os.WriteFile(filepath.Join(f.ws, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".git", filepath.Join(f.ws, "gitlink")); err != nil {
		t.Fatal(err)
	}
	return f
}

// openPolicy allows every shell command and confines nothing but the
// workspace: only the protected paths stand between the agent and them.
func openPolicy(f fixture) Config {
	return Config{WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"}}
}

func TestDefaultProtectedPathsAreReadableButNotWritable(t *testing.T) {
	f := protectedFixture(t)
	h := newHook(t, openPolicy(f))
	ctx := context.Background()
	call := hooks.NewCall("shell", `{"command":"true"}`)
	for name, paths := range protectedExamples {
		for _, p := range paths {
			abs := p
			if !filepath.IsAbs(p) {
				abs = filepath.Join(f.ws, p)
			}
			t.Run(name+"/"+p, func(t *testing.T) {
				for _, tc := range []struct{ tool, args string }{
					{"write_file", obj(t, map[string]any{"path": p, "content": "x"})},
					{"edit_file", obj(t, map[string]any{"path": p, "old": "a", "new": "b"})},
					{"move_file", obj(t, map[string]any{"source": "evil", "destination": p})},
					{"apply_patch", obj(t, map[string]any{"input": "*** Begin Patch\n*** Add File: " + p + "\n+x\n*** End Patch\n"})},
					{"shell", obj(t, sh("echo x > "+shellQuote(p)))},
					{"shell", obj(t, sh("cp evil "+shellQuote(p)))},
					{"shell", obj(t, sh("rm -rf "+shellQuote(p)))},
				} {
					if v := decide(t, h, tc.tool, tc.args); v.Allowed || v.Rule != RuleProtectedPaths {
						t.Errorf("%s %s = %+v, want a %s denial", tc.tool, tc.args, v, RuleProtectedPaths)
					}
				}
				for _, tc := range []struct{ tool, args string }{
					{"read_file", obj(t, map[string]any{"path": p})},
					{"shell", obj(t, sh("cat "+shellQuote(p)))},
					{"shell", obj(t, sh("git diff -- "+shellQuote(p)))},
				} {
					if v := decide(t, h, tc.tool, tc.args); !v.Allowed {
						t.Errorf("%s %s = %+v, want allowed (reading)", tc.tool, tc.args, v)
					}
				}
				if v := h.CheckOpen(ctx, call, abs, true); v.Allowed || v.Rule != RuleProtectedPaths {
					t.Errorf("CheckOpen(%s, write) = %+v", abs, v)
				}
				if v := h.CheckOpen(ctx, call, abs, false); !v.Allowed {
					t.Errorf("CheckOpen(%s, read) = %+v", abs, v)
				}
				// What find -exec or a substitution runs is only known at
				// run time: the final argv is checked.
				if v := h.CheckExec(ctx, call, f.ws, nil, []string{"cp", "evil", abs}); v.Allowed || v.Rule != RuleProtectedPaths {
					t.Errorf("CheckExec(cp evil %s) = %+v", abs, v)
				}
				if v := h.CheckExec(ctx, call, f.ws, nil, []string{"cat", abs}); !v.Allowed {
					t.Errorf("CheckExec(cat %s) = %+v", abs, v)
				}
				lifted := newHook(t, Config{WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"},
					ProtectedPaths: &ProtectedConfig{Lift: []string{name}}})
				if v := decide(t, lifted, "write_file", obj(t, map[string]any{"path": p, "content": "x"})); !v.Allowed {
					t.Errorf("with %q lifted, write_file %s = %+v", name, p, v)
				}
				if v := lifted.CheckOpen(ctx, call, abs, true); !v.Allowed {
					t.Errorf("with %q lifted, CheckOpen(%s, write) = %+v", name, abs, v)
				}
			})
		}
	}
	for _, p := range notProtected {
		if v := decide(t, h, "write_file", obj(t, map[string]any{"path": p, "content": "x"})); !v.Allowed {
			t.Errorf("write_file %s = %+v, want allowed", p, v)
		}
		if v := h.CheckOpen(ctx, call, filepath.Join(f.ws, p), true); !v.Allowed {
			t.Errorf("CheckOpen(%s, write) = %+v, want allowed", p, v)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestProtectedPathsInShellLines(t *testing.T) {
	f := protectedFixture(t)
	h := newHook(t, openPolicy(f))
	for _, cmd := range []string{
		"echo x > .git/config",
		"echo x >> sub/.git/config",
		"echo x >| .envrc",
		"cat evil > .gitattributes 2>&1",
		"echo x 1<>.git/config",
		"cp evil .git/hooks/pre-commit",
		"mv evil .gitattributes",
		"ln -s ../../evil .git/hooks/post-checkout",
		"touch .git/hooks/pre-commit",
		"chmod +x .git/hooks/pre-commit",
		"rm .git/config",
		"rm -rf .git",
		"mv .git g",
		"mv .git/hooks /tmp/h",
		"tee .envrc < evil",
		"sed -i s/a/b/ .git/config",
		"dd if=evil of=.git/config",
		"install -m 755 evil .git/hooks/pre-push",
		"git checkout -- .gitattributes",
		"git restore .envrc",
		"git stash push -- .gitattributes",
		"git rm .gitmodules",
		"git mv .envrc envrc",
		"git show HEAD:evil > .gitmodules",
		"echo hi > .git/conf*",
		"cp evil .git/c?nfig",
		"cp evil gitlink/config",
		"echo 'gitdir: ../evil' > sub/.git",
		"mkdir -p nested/.git",
		"sh -c 'echo x > .git/config'",
		"bash -c 'cp evil .git/hooks/pre-commit'",
		"cd .git && echo x > config",
		"cd sub && echo x > .git/config",
		"cd src && cp ../evil ../.envrc",
		"echo x > ./.git/./config",
		"echo x > src/../.git/config",
		"git config core.pager evil",
		"git config core.fsmonitor ./evil",
		"git -C sub config --add diff.external ./evil",
		"git config --unset core.pager",
		"git config --global core.fsmonitor ./evil",
		"git config --system core.pager evil",
		"git config set core.pager evil",
		"git config --replace-all alias.st '!sh evil'",
		"git config -e",
		"cat .git/config | sed s/a/b/ > .git/config",
		"head -c0 evil > .git/objects/info/alternates",
		"git config -f .git/config core.pager evil",
		"git config --file=sub/.git/config core.pager evil",
		"git --git-dir=sub/.git config core.pager evil",
		"tree -o .git/config",
		"sort -o .git/config notes.txt",
		"git diff --output=.git/config",
	} {
		v := decide(t, h, "shell", obj(t, sh(cmd)))
		if v.Allowed {
			t.Errorf("%q was allowed", cmd)
		} else if v.Rule != RuleProtectedPaths {
			t.Errorf("%q was denied by %s (%s), want %s", cmd, v.Rule, v.Reason, RuleProtectedPaths)
		}
	}
	// A program that writes files its own program text names (sed's w,
	// awk's >) shows no path to check: under an allow-list other than
	// ["*"] it needs an entry naming that risky command; under ["*"],
	// which admits any program, only the kernel layer stops the write.
	closed := openPolicy(f)
	closed.AllowedShellCommands = []string{"sed *", "awk *", "cat *"}
	requireShellDenied(t, newHook(t, closed), "sed -n 'w .git/config' notes.txt", "awk '{ print > \".git/config\" }' notes.txt")
	requireShellAllowed(t, h,
		"cat .git/config",
		"head -n 3 .envrc .gitattributes",
		"grep -r fsmonitor .git",
		"sed -n 1p .git/config",
		"diff .git/config evil",
		"ls -la .git/hooks",
		"git config --get core.pager",
		"git config core.pager",
		"git config -l",
		"git config --list --show-origin",
		"git config get core.pager",
		"git -C sub config --get-regexp 'diff.*'",
		"git diff -- .gitattributes",
		"git log -p -- .envrc",
		"git status",
		"git add src/a.go && git commit -m x",
		"git add .gitattributes .envrc && git commit -m x .gitattributes",
		"echo x > notes.txt",
		"echo x > .git/COMMIT_EDITMSG",
		"cp evil src/config",
		"git config -f build.cfg a.b c",
		"rm -rf src/pkg",
		"cp -r src copy",
		"go test ./...",
	)
}

func TestProtectedPathsPolicyFields(t *testing.T) {
	f := protectedFixture(t)
	lifted := newHook(t, Config{WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"},
		ProtectedPaths: &ProtectedConfig{Lift: []string{".git/config", ".gitconfig"}, Add: []string{"deploy/**", "Makefile"}}})
	requireShellAllowed(t, lifted, "git config core.pager cat", "echo x > .git/config", "git config --global a.b c")
	requireShellDenied(t, lifted, "echo x > .git/hooks/pre-commit", "echo x > deploy/app.yaml",
		"echo x > src/Makefile", "cp evil deploy")
	requireShellAllowed(t, lifted, "echo x > deploy.txt", "cat deploy/app.yaml")
	if v := decide(t, lifted, "write_file", obj(t, map[string]any{"path": "Makefile", "content": "x"})); v.Allowed || v.Rule != RuleProtectedPaths {
		t.Errorf("an added glob: %+v", v)
	} else if !strings.Contains(v.Reason, "protectedPaths.add") {
		t.Errorf("an added glob's denial does not say where it comes from: %s", v.Reason)
	}
	withForbidden := openPolicy(f)
	withForbidden.WorkspaceOnly, withForbidden.ForbiddenPathGlobs = true, []string{"**/.env"}
	wf := newHook(t, withForbidden)
	requireShellDenied(t, wf, "echo x > .git/config", "git config core.pager x", "cp evil .envrc", "cat .env")
	requireShellAllowed(t, wf, "cat .git/config", "echo x > notes.txt")

	all := newHook(t, Config{WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"},
		ProtectedPaths: &ProtectedConfig{Lift: defaultNames()}})
	requireShellAllowed(t, all, "echo x > .git/config", "rm -rf .git", "cp evil .envrc")

	v := decide(t, newHook(t, openPolicy(f)), "write_file", obj(t, map[string]any{"path": ".git/hooks/pre-commit", "content": "x"}))
	if !strings.Contains(v.Reason, `protectedPaths.lift: [".git/hooks"]`) {
		t.Errorf("a default entry's denial does not say how to lift it: %s", v.Reason)
	}

	for _, tc := range []struct {
		name string
		pc   ProtectedConfig
		want error
	}{
		{"a name not in the default set", ProtectedConfig{Lift: []string{".git/objects"}}, hooks.ErrInvalidSpec},
		{"a glob instead of a name", ProtectedConfig{Lift: []string{"**/.git/config"}}, hooks.ErrInvalidSpec},
		{"an invalid added glob", ProtectedConfig{Add: []string{"a/[b"}}, hooks.ErrInvalidGlob},
		{"an empty added glob", ProtectedConfig{Add: []string{""}}, hooks.ErrInvalidGlob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(Config{ProtectedPaths: &tc.pc})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if _, err := New(Config{WorkspaceRoot: f.ws, ProtectedPaths: &tc.pc}); !errors.Is(err, tc.want) {
				t.Errorf("New = %v, want %v", err, tc.want)
			}
		})
	}
	if err := Validate(Config{ProtectedPaths: &ProtectedConfig{Lift: []string{".envrc"}}}); err != nil {
		t.Errorf("lifting a default entry: %v", err)
	}
	if err := Validate(Config{ProtectedPaths: &ProtectedConfig{Lift: []string{".nope"}}}); err == nil ||
		!strings.Contains(err.Error(), `".nope"`) || !strings.Contains(err.Error(), ".git/hooks") {
		t.Errorf("an unknown name's error does not name it and the default set: %v", err)
	}
}

func TestProtectionIsTheUnionOfTheBoundPolicies(t *testing.T) {
	f := protectedFixture(t)
	lifting := newHook(t, Config{Name: "lifting", WorkspaceRoot: f.ws, ProtectedPaths: &ProtectedConfig{Lift: defaultNames(), AllowGitPrograms: true}})
	protecting := newHook(t, Config{Name: "protecting", WorkspaceRoot: f.ws})
	call := hooks.NewCall("shell", `{"command":"true"}`)
	g, err := hooks.NewGuard(call, hooks.Entry{Hook: lifting}, hooks.Entry{Hook: protecting})
	if err != nil {
		t.Fatal(err)
	}
	err = g.Open(context.Background(), filepath.Join(f.ws, ".git", "config"), true)
	if d, ok := errors.AsType[*hooks.RuntimeDenial](err); !ok || d.Decision.Rule != RuleProtectedPaths || d.Decision.Hook != "protecting" {
		t.Errorf("a write one policy lifts and another protects = %v", err)
	}
	if g.AllowsGitPrograms() {
		t.Error("git programs are allowed although one bound policy does not allow them")
	}
	only, err := hooks.NewGuard(call, hooks.Entry{Hook: lifting})
	if err != nil {
		t.Fatal(err)
	}
	if err := only.Open(context.Background(), filepath.Join(f.ws, ".git", "config"), true); err != nil {
		t.Errorf("a write the only policy lifts: %v", err)
	}
	if !only.AllowsGitPrograms() {
		t.Error("git programs are not allowed although the only bound policy allows them")
	}
	none, err := hooks.NewGuard(call)
	if err != nil {
		t.Fatal(err)
	}
	if none.AllowsGitPrograms() {
		t.Error("git programs are allowed without a policy that allows them")
	}
}

// FuzzProtectedWrites: a path whose lexical form ends in a default entry's
// name (in any directory) is never writable by write_file nor at run time.
func FuzzProtectedWrites(f *testing.F) {
	for _, ps := range protectedExamples {
		for _, p := range ps {
			f.Add(p)
		}
	}
	for _, p := range []string{"a/./.git//config", "x/../.envrc", "gitlink/config", "gitlink/hooks/x", ".git/./hooks/../config",
		"sub/.git/modules/a/b/hooks/x", "./.gitattributes/", ".GIT/config"} {
		f.Add(p)
	}
	fx := newFixture(f)
	if err := os.Symlink(".git", filepath.Join(fx.ws, "gitlink")); err != nil {
		f.Fatal(err)
	}
	h := newHook(f, openPolicy(fx))
	call := hooks.NewCall("write_file", `{}`)
	f.Fuzz(func(t *testing.T, p string) {
		if p == "" || strings.ContainsAny(p, "\x00~") || filepath.IsAbs(p) {
			return
		}
		clean := path.Clean("/" + p)[1:]
		if strings.HasPrefix(clean, "gitlink/") || clean == "gitlink" {
			clean = ".git" + strings.TrimPrefix(clean, "gitlink")
		}
		if !lexicallyProtected(clean) {
			return
		}
		if v := decide(t, h, "write_file", obj(t, map[string]any{"path": p, "content": "x"})); v.Allowed {
			t.Errorf("write_file %q (%s) was allowed", p, clean)
		}
		if v := h.CheckOpen(context.Background(), call, filepath.Join(fx.ws, p), true); v.Allowed {
			t.Errorf("CheckOpen(%q, write) was allowed", p)
		}
	})
}

// lexicallyProtected is an oracle independent of the globs, for the
// entries that end in fixed names.
func lexicallyProtected(p string) bool {
	c := strings.Split(p, "/")
	n := len(c)
	switch last := c[n-1]; last {
	case ".git", ".gitattributes", ".gitmodules", ".envrc", ".gitconfig", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pre-commit-config.yaml":
		return true
	case "config", "commondir":
		if n >= 2 && c[n-2] == ".git" {
			return true
		}
	}
	for i := 0; i+1 < n; i++ {
		if c[i] == ".git" && (c[i+1] == "hooks" || c[i+1] == "info") || c[i] == ".husky" {
			return true
		}
	}
	return false
}

// A protected write is denied, never asked about, whichever rules read
// the paths; what the ask rules match otherwise still asks.
func TestProtectedWritesAreDeniedNotAsked(t *testing.T) {
	f := protectedFixture(t)
	for _, withForbidden := range []bool{false, true} {
		cfg := openPolicy(f)
		if withForbidden {
			cfg.ForbiddenPathGlobs = []string{"**/.env"}
		}
		cfg.Ask = &AskConfig{PathGlobs: []string{"**/.git/**", "notes.txt"}, Tools: []string{"write_*"}}
		h := newHook(t, cfg)
		for _, tc := range []struct{ tool, args, rule string }{
			{"shell", obj(t, sh("cat notes.txt > .git/config")), RuleProtectedPaths},
			{"shell", obj(t, sh("git config core.pager x")), RuleProtectedPaths},
			{"write_file", obj(t, map[string]any{"path": ".git/hooks/pre-commit", "content": "x"}), RuleProtectedPaths},
			{"shell", obj(t, sh("cat notes.txt")), RuleAskPathGlobs},
			{"shell", obj(t, sh("cat .git/config")), RuleAskPathGlobs},
			{"write_file", obj(t, map[string]any{"path": "src/b.go", "content": "x"}), RuleAskTools},
		} {
			v := decide(t, h, tc.tool, tc.args)
			if v.Rule != tc.rule || v.Allowed || (tc.rule == RuleProtectedPaths) == v.Ask {
				t.Errorf("forbidden globs %t, %s %s = %+v, want rule %s", withForbidden, tc.tool, tc.args, v, tc.rule)
			}
		}
	}
}

// Under an allow-list, env may not drop the variables the shell tool sets
// for programs (git's configuration): what it runs would not be what the
// policy checked.
func TestEnvMayNotDropTheToolsVariables(t *testing.T) {
	f := protectedFixture(t)
	cfg := openPolicy(f)
	cfg.AllowedShellCommands = []string{"env *", "git status", "git log *"}
	h := newHook(t, cfg)
	for _, cmd := range []string{"env -u GIT_CONFIG_COUNT git status", "env -i git status", "env - git status",
		"env --unset=GIT_PAGER git log -1", "env -uGIT_CONFIG_COUNT git status", "env --ignore-environment git status"} {
		// -uNAME also reads as a bundle of risky letters (-C): denied either way.
		if v := decide(t, h, "shell", obj(t, sh(cmd))); v.Allowed || v.Rule != RuleShellUnverifiable && v.Rule != RuleShellAllowList {
			t.Errorf("%q = %+v, want a denial", cmd, v)
		}
	}
	requireShellAllowed(t, h, "env git status", "env -0 git log -1")
}
