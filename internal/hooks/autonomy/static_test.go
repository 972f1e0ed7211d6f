package autonomy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The classes a static check must get right where it is the only layer
// (calls an agent runs itself after POST /v1/decisions), each with the
// over-denials fixed beside it and adversarial twins that must still deny.

// TestGoNestedToolFlagsAreReadAsOptionLists: the flag lists go passes to
// the compiler, assembler and linker are option lists of their own; the
// files their flags write or read are checked as paths, the programs the
// linker runs need naming, and a list that cannot be read is unverifiable.
func TestGoNestedToolFlagsAreReadAsOptionLists(t *testing.T) {
	_, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "go build *", "go test *", "go vet *")
	h := newHook(t, cfg)
	requireShellDenied(t, h,
		"go build -gcflags=-cpuprofile=/tmp/x .",
		"go build -gcflags=all=-cpuprofile=.env .",
		"go build -gcflags=std=-memprofile=secrets/m ./...",
		"go build -gcflags 'all=-N -l -memprofile secrets/k' .",
		"go build -gcflags='-N -l -cpuprofile secrets/k' .",
		"go build --gcflags=-trace=secrets/t .",
		"go build -gcflags=--blockprofile=secrets/b .",
		"go test -gcflags=-asmhdr=.env ./...",
		"go test ./... -gcflags=-mutexprofile=.env",
		"go build -gcflags=-bench=.env .",
		"go build -gcflags=-linkobj=.env .",
		"go build -gcflags=-o=.env .",
		"go build -gcflags=-importcfg=/etc/passwd .",
		"go build -gcflags=-embedcfg=secrets/key .",
		"go build -gcflags=-symabis=out/secret .",
		"go build -gcflags=-cpuprofile=in/../.env .",
		"go build -gcflags=-cpuprofile=passwd .",
		"go -C src build -gcflags=-cpuprofile=../.env .",
		// Flags not analysed, lists that do not read.
		"go build -gcflags=-json=0,file:///tmp/j .",
		"go build -gcflags=-d=ssa/check/dump=f .",
		"go build -gcflags='-N \"-cpuprofile=.env' .",
		"go build -gcflags='-N x.go -cpuprofile=.env' .",
		"go build -gcflags='-N -- -cpuprofile=.env' .",
		"go build -gccgoflags=-B/tmp .",
		// Programs the linker runs.
		"go build -ldflags=-extar=/bin/sh .",
		"go build -ldflags='-s -extar /tmp/ar' .",
		"go build -ldflags=-extld=sh .",
		"go build -ldflags='-extldflags=-B/tmp' .",
		"go build -ldflags=-tmpdir=/tmp/x .",
		"go build -ldflags=-o=x .",
		"go build -ldflags=-cpuprofile=/tmp/p .",
		"go build -asmflags=-o=x .",
		"go build -asmflags=-I=/etc .",
		"go build -toolexec=x .",
		"go test -exec=x ./...",
	)
	requireShellAllowed(t, h,
		"go build -gcflags='all=-N -l' ./...",
		"go build -gcflags=all=-N ./...",
		"go build -gcflags '-N -l' ./...",
		`go build -ldflags="-s -w -X main.version=1.0" ./...`,
		"go build -ldflags='-X \"main.v=a b\"' ./...",
		"go build -gcflags=-cpuprofile=prof.out .",
		"go build -gcflags=-m=2 ./...",
		"go test -gcflags=-m ./...",
		"go build -asmflags=-trimpath=x ./...",
		"go vet ./...",
	)
}

// TestApplyPatchNamesAreReadInEveryHeaderForm: the files an applier acts
// on are checked whatever header names them, and a patch whose names do
// not read denies.
func TestApplyPatchNamesAreReadInEveryHeaderForm(t *testing.T) {
	_, cfg := soundFixture(t)
	h := newHook(t, cfg)
	denied := map[string]string{
		"indented Add File":         "*** Begin Patch\n  *** Add File: .env\n+x\n*** End Patch\n",
		"tab-indented Update, Move": "*** Begin Patch\n\t*** Update File: src/main.go\n\t*** Move to: secrets/key\n@@\n-a\n+b\n*** End Patch\n",
		"indented Delete File":      "*** Begin Patch\n *** Delete File: secrets/key\n*** End Patch\n",
		"git rename without ---":    "diff --git a/src/main.go b/secrets/key\nsimilarity index 100%\nrename from src/main.go\nrename to secrets/key\n",
		"git copy without ---":      "diff --git a/src/main.go b/src/c.go\nsimilarity index 100%\ncopy from src/main.go\ncopy to .env\n",
		"git new file header only":  "diff --git a/src/x b/secrets/x\nnew file mode 100644\n",
		"quoted git names":          "diff --git \"a/sr\\143/main.go\" \"b/secr\\145ts/key\"\nrename from src/main.go\nrename to \"secr\\145ts/key\"\n",
		"stripped at any depth":     "--- x/y/secrets/key\n+++ x/y/secrets/key\n@@ -1 +1 @@\n-k\n+j\n",
		"Index line":                "Index: secrets/key\n===\n",
		"context diff header":       "*** secrets/key\t2024-01-01\n--- secrets/key\t2024-01-01\n***************\n",
		"escaping name":             "*** Begin Patch\n*** Add File: ../outside/x\n+x\n*** End Patch\n",
		"unclosed quoted name":      "diff --git \"a/x b/y\n",
		"unreadable rename":         "rename to \"bad\\q\"\n",
		"empty Add File":            "*** Begin Patch\n*** Add File: \n*** End Patch\n",
	}
	for name, patch := range denied {
		if v := decide(t, h, "apply_patch", obj(t, map[string]any{"input": patch})); v.Allowed {
			t.Errorf("%s: %q was allowed", name, patch)
		}
	}
	allowed := map[string]string{
		"apply_patch update":  "*** Begin Patch\n*** Update File: src/main.go\n@@\n-package main\n+package main2\n*** End of File\n*** End Patch\n",
		"git rename inside":   "diff --git a/src/main.go b/src/other.go\nsimilarity index 100%\nrename from src/main.go\nrename to src/other.go\n",
		"unified diff":        "--- a/src/main.go\n+++ b/src/main.go\n@@ -1,2 +1 @@\n--- a removed \"comment\n-package main\n+package x\n",
		"indented new file":   "*** Begin Patch\n  *** Add File: src/new.go\n+package main\n*** End Patch\n",
		"quoted inside names": "diff --git \"a/src/m\\141in.go\" \"b/src/m\\141in.go\"\n",
	}
	for name, patch := range allowed {
		if v := decide(t, h, "apply_patch", obj(t, map[string]any{"input": patch})); !v.Allowed {
			t.Errorf("%s: %q was denied: %s", name, patch, v.Reason)
		}
	}
}

// TestPathsThroughProcessDescriptorsAreRefused: a path whose meaning
// depends on the process that opens it (its descriptors, root, working
// directory, terminal) names no file the check can see, for a file tool
// whatever the path rules; a shell keeps its own streams.
func TestPathsThroughProcessDescriptorsAreRefused(t *testing.T) {
	f, cfg := soundFixture(t)
	if err := os.Symlink("/proc/self/fd/1", filepath.Join(f.ws, "fdlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/stdout", filepath.Join(f.ws, "outlink")); err != nil {
		t.Fatal(err)
	}
	globsOnly := cfg
	globsOnly.WorkspaceOnly = false
	paths := []string{"/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/fd/1", "/dev/fd/3", "/dev/fd/", "/proc/self/fd/3",
		"/proc/self/fd/1", "/proc/thread-self/fd/1", "/proc/1/root/etc/hostname", "/proc/self/cwd/.env", "/proc/self/environ",
		"/proc/1/fd/0", "/dev/tty", "fdlink", "outlink", "/dev/../proc/self/fd/2", "/proc//self/fd/2"}
	for name, c := range map[string]Config{"workspace-only": cfg, "forbidden globs only": globsOnly} {
		h := newHook(t, c)
		for _, p := range paths {
			for _, tool := range []string{"read_file", "write_file"} {
				if v := decide(t, h, tool, obj(t, map[string]any{"path": p, "content": "x"})); v.Allowed {
					t.Errorf("%s: %s %q was allowed", name, tool, p)
				}
			}
		}
		if v := decide(t, h, "read_file", obj(t, map[string]any{"path": "/dev/null"})); !v.Allowed {
			t.Errorf("%s: read_file /dev/null was denied: %s", name, v.Reason)
		}
		requireShellAllowed(t, h, "echo x >/dev/stderr", "echo x 2>/dev/null", "cat /dev/stdin", "echo x > /dev/fd/2",
			"cat src/main.go > /dev/stdout", "echo x >/dev/tty")
		requireShellDenied(t, h, "cat /dev/fd/3", "cat /proc/self/fd/3", "cat /proc/self/environ", "cat fdlink",
			"echo x > /proc/self/fd/1", "cat /proc/1/root/etc/hostname", "cat - < /dev/fd/5", "cat outlink")
	}
}

// TestPartlyQuotedHeredocDelimitersMakeLiteralBodies: a delimiter quoted
// in any part makes the body literal in every shell; a body the parser
// cannot delimit as the shell does denies, whatever the allow-list.
func TestPartlyQuotedHeredocDelimitersMakeLiteralBodies(t *testing.T) {
	_, cfg := soundFixture(t)
	h := newHook(t, cfg)
	requireShellAllowed(t, h,
		"cat - <<E\"O\"F\n$(cat .env)\nEOF",
		"cat - <<E\\OF\n`cat secrets/key`\nEOF\n",
		"cat - <<-E'O'F\n\t$(cat .env)\n\tEOF\necho done",
		"cat - <<\"E\"OF\n$(rm -rf src)\nEOF",
	)
	requireShellDenied(t, h,
		"cat - <<EOF\n$(cat .env)\nEOF",
		"cat - <<E\"O\"F\n$(cat .env)\nEOF\ncat .env",
		"cat - <<E\"O\"F\nx\\\nEOF\ncat .env\nEOF",
		"cat - <<E\"$x\"F\nEOF\n",
	)
	all := cfg
	all.AllowedShellCommands = []string{"*"}
	requireShellDenied(t, newHook(t, all), "cat - <<E\"O\"F\nx\\\nEOF\ncat .env\nEOF")
}

// TestDotNamesMatchOnlyAnExplicitDot: ?env, *env and [.]env match no name
// that starts with a dot in bash or dash; a command line that may turn on
// dotglob (shopt, GLOBIGNORE, anything unverifiable) is checked as if it did.
func TestDotNamesMatchOnlyAnExplicitDot(t *testing.T) {
	_, cfg := soundFixture(t)
	h := newHook(t, cfg)
	requireShellAllowed(t, h, "cat ?env", "cat [.]env", "cat *env", "cat [!a]env", "cat [[:punct:]]env",
		"cat src/../?env", "cat ?env 2>/dev/null; ls")
	requireShellDenied(t, h, "cat .?nv", "cat .e*", "cat \\.e?v", "cat '.'e?v", "cat .[e]nv", "cat */.env", "cat ?ecrets/*")
	all := cfg
	all.AllowedShellCommands = []string{"*"}
	ha := newHook(t, all)
	requireShellAllowed(t, ha, "cat ?env", "cat [.]env")
	requireShellDenied(t, ha,
		"shopt -s dotglob; cat ?env",
		"shopt -s dotglob\ncat [.]env",
		"bash -c 'shopt -s dotglob; cat ?env'",
		"GLOBIGNORE=x; cat ?env",
		"export GLOBIGNORE=x; cat ?env",
		"read GLOBIGNORE <<< x; cat ?env",
		"eval true; cat ?env",
		"x=1; cat *env",
		"shopt -s dotglob; cat *env",
		"shopt -s dotglob; cat src/../*",
		"cat @(.)env",
		"cat +(.)env",
	)
}

// TestBenignEnvironmentPrefixesAreVerifiable: a plain value for a build
// switch, a locale or a colour setting does not change what runs.
func TestBenignEnvironmentPrefixesAreVerifiable(t *testing.T) {
	_, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "go build *", "go test *")
	h := newHook(t, cfg)
	requireShellAllowed(t, h, "CGO_ENABLED=0 go build ./...", "GOOS=linux GOARCH=arm64 go build ./...",
		"LC_ALL=C ls src", "CGO_ENABLED=0 GOARCH= go build ./...", "NO_COLOR=1 go test ./...")
	requireShellDenied(t, h, "GOFLAGS=-toolexec=x go build ./...", "CGO_ENABLED=$(cat .env) go build ./...",
		"LANG=/tmp/loc ls", "LD_PRELOAD=x.so ls", "CGO_ENABLED+=1 go build ./...", "CC=sh go build ./...",
		"GOOS=linux", "CGO_ENABLED=0", "PATH=. ls", "CGO_ENABLED=\"$x\" go build ./...", "GOTOOLCHAIN=go1.99 go build ./...")
}

// TestChangingDirectoryNeedsNoAllowListEntry: cd runs no program; its
// target is checked as a path and the words after it resolve against it.
func TestChangingDirectoryNeedsNoAllowListEntry(t *testing.T) {
	_, cfg := soundFixture(t)
	cfg.AllowedShellCommands = []string{"go test *", "ls *", "cat *"}
	h := newHook(t, cfg)
	requireShellAllowed(t, h, "cd src && go test ./...", "cd src; cat main.go", "pushd src && ls . && popd",
		"cd -P src && ls .")
	requireShellDenied(t, h, "cd secrets && go test ./...", "cd .. && ls .", "cd out && ls .", "cd src && cat ../.env",
		"command cd src && ls .", "cd $HOME && ls .", "cd && ls .", "cd - && ls .", "cd src && rm x", "builtin cd src")
}

// TestGitDiffOptionsAreNotGitsGlobalOptions: after the subcommand, -c,
// -C, -M and -u are diff options; before it, and for subcommands where
// they run programs or set configuration, they still need naming.
func TestGitDiffOptionsAreNotGitsGlobalOptions(t *testing.T) {
	f, cfg := soundFixture(t)
	cfg.AllowedShellCommands = []string{"git *"}
	h := newHook(t, cfg)
	gitRepo(t, f.ws, "src/main.go")
	requireShellAllowed(t, h, "git diff -C", "git diff -M", "git diff -c", "git diff -u", "git diff -C -M -- src",
		"git diff --stat -C50%", "git show -C HEAD:src/main.go", "git diff -uC")
	requireShellDenied(t, h, "git -c core.pager=sh diff", "git -c x=y diff -u", "git -C src diff", "git clone -c x=y a b",
		"git clone -u /tmp/x a b", "git -C.. diff", "git fetch -u x")
}

// TestGitDiffReadsOnlyWhatTheIndexHolds: a diff of the work tree against
// the index prints the files the index holds, so an untracked .env is not
// read; a tracked, staged or deleted-but-indexed one is, and so is every
// file of a diff against history, the index or outside the repository.
func TestGitDiffReadsOnlyWhatTheIndexHolds(t *testing.T) {
	f, cfg := soundFixture(t)
	cfg.AllowedShellCommands = []string{"git diff", "git diff *"}
	h := newHook(t, cfg)
	gitRepo(t, f.ws, "src/main.go")
	if err := os.Symlink("../secrets", filepath.Join(f.ws, "src", "link")); err != nil {
		t.Fatal(err)
	}
	requireShellAllowed(t, h, "git diff", "git diff -- src", "git diff --stat", "git diff -- .", "git diff --name-only")
	requireShellDenied(t, h, "git diff HEAD", "git diff --cached", "git diff --staged", "git diff --cach",
		"git diff --no-index src/main.go .env", "git diff HEAD -- .", "git diff main", "git diff -- .env",
		"git diff -- secrets", "git diff -S secret")

	for _, version := range []string{"2", "3", "4"} {
		git(t, f.ws, "update-index", "--index-version", version)
		requireShellAllowed(t, h, "git diff")
		git(t, f.ws, "add", "-f", ".env")
		requireShellDenied(t, h, "git diff", "git diff -- .")
		requireShellAllowed(t, h, "git diff -- src")
		// Without a pathspec git diff reads the whole repository, from
		// any directory in it; with one, what it names.
		inSrc := func(cmd string) bool {
			return decide(t, h, "shell", obj(t, map[string]any{"command": cmd, "cwd": "src"})).Allowed
		}
		if inSrc("git diff") || inSrc("git diff --stat") {
			t.Errorf("index version %s: git diff run in src was allowed with a tracked .env", version)
		}
		if !inSrc("git diff -- .") {
			t.Errorf("index version %s: git diff -- . run in src was denied", version)
		}
		git(t, f.ws, "rm", "-q", "--cached", ".env")
	}
	// Staged, then deleted from the work tree: the index still has it.
	git(t, f.ws, "add", "-f", "secrets/key")
	requireShellDenied(t, h, "git diff")
	git(t, f.ws, "rm", "-q", "--cached", "secrets/key")
	requireShellAllowed(t, h, "git diff")
	// An index git splits in two is not read: the work tree is.
	git(t, f.ws, "update-index", "--split-index")
	requireShellDenied(t, h, "git diff")
}

// gitRepo makes dir a git repository whose index and HEAD hold files.
func gitRepo(t *testing.T, dir string, files ...string) {
	t.Helper()
	git(t, dir, "init", "-q")
	git(t, dir, append([]string{"add"}, files...)...)
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestOracleRunsTheRelaxedClasses runs what the over-denial fixes allow
// under bash and dash with strace: the shells must open nothing forbidden.
func TestOracleRunsTheRelaxedClasses(t *testing.T) {
	o := newOracle(t)
	for _, cmd := range []string{"cat ?env", "cat [.]env", "cat config/?env", "cat *env", "cat config/*env",
		"cat [[:punct:]]env", "cat [!a]env", "ls -R src", "ls -lR docs", "cat <<E\"O\"F\n$(cat .env)\nEOF",
		"cat <<E\\OF\n`cat secrets/key`\nEOF", "echo x >/dev/stderr"} {
		if !o.allowed(cmd) {
			t.Errorf("%q was denied", cmd)
			continue
		}
		for _, sh := range o.shells {
			if bad := o.run(t, sh, cmd); len(bad) > 0 {
				t.Errorf("%s -c %q was allowed but %v", sh, cmd, bad)
			}
		}
	}
}
