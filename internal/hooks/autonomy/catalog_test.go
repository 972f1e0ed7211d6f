package autonomy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCatalogueRiskyOptionsNeedExplicitEntries checks that programs that
// run programs or write files are admitted only by entries naming the
// option or subcommand.
func TestCatalogueRiskyOptionsNeedExplicitEntries(t *testing.T) {
	_, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "go test *", "go build *", "go vet *", "go *",
		"git *", "sed *", "awk *", "rsync *", "ssh *", "make *", "python3 *", "node *", "perl *", "ruby *",
		"less *", "man *", "vim *", "kubectl *", "docker *", "npm *", "npx *", "wget *",
		"go test -exec *", "make test")
	h := newHook(t, cfg)
	for _, cmd := range []string{
		"go test -exec=/bin/sh ./...",
		"go build -toolexec /tmp/x ./...",
		"go vet -vettool=/tmp/x ./...",
		"go run main.go",
		"go generate ./...",
		"go tool x",
		"go env -w GOFLAGS=-toolexec=/tmp/x",
		"git -c core.pager=id log",
		"git --config-env=core.pager=X log",
		"git -C /tmp status",
		"git --exec-path=/tmp status",
		"git fetch --upload-pack='touch /tmp/x' origin",
		"git submodule foreach id",
		"git difftool -x id",
		"git myalias",
		"git rebase --exec id HEAD~1",
		"find . -name x -delete",
		"find src -fprint out.txt",
		"find src -exec id ';'",
		"sed -i s/a/b/ src/a.go",
		"sed 1e\\ id src/a.go",
		"sed 's/a/b/e' src/a.go",
		"sed 's/a/b/w out' src/a.go",
		"awk 'BEGIN{system(\"id\")}'",
		"awk '{print | \"sh\"}' src/a.go",
		"awk '{print > \"out\"}' src/a.go",
		"tar --to-command=id -xf x.tar",
		"tar --checkpoint=1 --checkpoint-action=exec=id -cf /dev/null src",
		"tar -I id -cf x.tar src",
		"tar xf x.tar",
		"rsync -e 'sh -c id' a b",
		"ssh -o ProxyCommand=id host",
		"ssh -oProxyCommand=id host",
		"make --eval 'x:;id' x",
		"python3 -c 'import os'",
		"node -e 'require(1)'",
		"perl -e 'system 1'",
		"ruby -e 'exit'",
		"less -o log src/a.go",
		"man -P id ls",
		"vim -c '!id' src/a.go",
		"vim +'!id' src/a.go",
		"curl -o src/x http://example.com",
		"curl -K cfg http://example.com",
		"curl --config cfg http://example.com",
		"kubectl exec pod -- id",
		"docker run alpine id",
		"npm run build",
		"npx something",
		"wget -e robots=off http://example.com",
	} {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); v.Allowed {
			t.Errorf("%q was allowed", cmd)
		}
	}
	for _, cmd := range []string{
		"go test ./...",
		"go test -exec 'sh -c id' ./...", // the entry names -exec
		"go build ./...",
		"go vet ./...",
		"git status",
		"git log --oneline",
		"git diff HEAD~1 -- src/a.go",
		"sed -n 1,5p src/a.go",
		"awk '{print $1}' src/a.go",
		"make test",
		"tar -czf out.tgz src",
		"find src -name '*.go'",
		"grep -r foo src",
		"ls -R src",
	} {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); !v.Allowed {
			t.Errorf("%q was denied: %s", cmd, v.Reason)
		}
	}
}

// TestIndirectReadsAreChecked covers reads that reach forbidden files
// without naming them: git objects from history, pathspec globs, and
// recursive readers beneath an allowed directory.
func TestIndirectReadsAreChecked(t *testing.T) {
	f, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "git *", "cp *", "rsync *", "rg *")
	if err := os.WriteFile(filepath.Join(f.ws, "src", ".env"), []byte("S=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.ws, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHook(t, cfg)
	for _, cmd := range []string{
		"git diff HEAD:.env",
		"git show HEAD:secrets/key",
		"git show :.env",
		"git diff -- '*.env'",
		"git log -p -- 'src/*'",
		"grep -r foo src",
		"grep -R foo .",
		"grep -rn foo",
		"ls -R",
		"ls -R .",
		"find .",
		"find src -name x",
		"tar -cf /dev/null src",
		"tar cf /dev/null .",
		"cp -r src docs/copy",
		"rsync -a src/ docs/copy",
		"rg foo",
		"du .",
	} {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); v.Allowed {
			t.Errorf("%q was allowed", cmd)
		}
	}
	for _, cmd := range []string{"grep -r foo docs", "ls -R docs", "find docs", "git show HEAD:src/a.go", "cp -r docs docs2"} {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); !v.Allowed {
			t.Errorf("%q was denied: %s", cmd, v.Reason)
		}
	}
}

// TestAgentToolSchemasAreChecked covers arguments the hook did not see:
// apply_patch headers, Codex's workdir and argv commands, Cursor's
// target_file, the MCP filesystem server's source and destination, and
// the shell tools of other agents.
func TestAgentToolSchemasAreChecked(t *testing.T) {
	_, cfg := soundFixture(t)
	h := newHook(t, cfg)
	patch := func(file string) string {
		return "*** Begin Patch\n*** Update File: " + file + "\n@@\n-a\n+b\n*** End Patch\n"
	}
	for _, c := range []struct{ tool, args string }{
		{"apply_patch", obj(t, map[string]any{"input": patch("/etc/passwd")})},
		{"apply_patch", obj(t, map[string]any{"patch": patch(".env")})},
		{"apply_patch", obj(t, map[string]any{"input": "--- a/src/a.go\n+++ b/../outside/x\n"})},
		{"shell", obj(t, map[string]any{"command": []any{"bash", "-lc", "cat .env"}, "workdir": "src"})},
		{"shell", obj(t, map[string]any{"command": []any{"ls"}, "workdir": "/etc"})},
		{"shell", obj(t, map[string]any{"command": []any{"cat", "src/../.env"}})},
		{"read_file", obj(t, map[string]any{"target_file": ".env"})},
		{"edit_file", obj(t, map[string]any{"target_file": "/etc/hosts"})},
		{"move_file", obj(t, map[string]any{"source": "src/a.go", "destination": "/tmp/x"})},
		{"list_dir", obj(t, map[string]any{"relative_workspace_path": "../"})},
		{"NotebookEdit", obj(t, map[string]any{"notebook_path": "/etc/x.ipynb"})},
		{"run_terminal_cmd", obj(t, sh("cat .env"))},
		{"exec_command", obj(t, sh("cat .env"))},
		{"run_shell_command", obj(t, sh("cat .env"))},
		{"process", obj(t, map[string]any{"action": "start", "command": "cat .env"})},
		{"Bash", obj(t, sh("cat .env"))},
	} {
		if v := decide(t, h, c.tool, c.args); v.Allowed {
			t.Errorf("%s %s was allowed", c.tool, c.args)
		}
	}
	for _, c := range []struct{ tool, args string }{
		{"apply_patch", obj(t, map[string]any{"input": patch("src/a.go")})},
		{"shell", obj(t, map[string]any{"command": []any{"ls", "-la"}, "workdir": "src"})},
		{"read_file", obj(t, map[string]any{"target_file": "src/a.go"})},
		{"process", obj(t, map[string]any{"action": "list"})},
	} {
		if v := decide(t, h, c.tool, c.args); !v.Allowed {
			t.Errorf("%s %s was denied: %s", c.tool, c.args, v.Reason)
		}
	}
}

// TestCatalogueReadsOptionsAsTheProgramsDo covers the ways programs accept
// an option that a plain string match misses: Go's two-dash flags, GNU
// abbreviations and bundles, global options whose value precedes the
// subcommand, and program texts given through glued or abbreviated
// script options.
func TestCatalogueReadsOptionsAsTheProgramsDo(t *testing.T) {
	_, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "go test *", "go build *", "go vet *", "go *",
		"git *", "sed *", "awk *", "gawk *", "tar *", "kubectl *", "docker *", "npm *", "pnpm *", "yarn *")
	h := newHook(t, cfg)
	requireShellDenied(t, h, []string{
		"go test --exec=/bin/sh ./...",
		"go test --exec /bin/sh ./...",
		"go build --toolexec=/tmp/x ./...",
		"go vet --vettool=/tmp/x ./...",
		"go test ./... -exec=/bin/sh",
		"go test ./... -- -exec=/bin/sh",
		"go build -ldflags=-extld=/tmp/x ./...",
		"go build -ldflags '-extldflags=-B/tmp -extld /tmp/x' ./...",
		"go -C . generate ./...",
		"go -C src run .",
		"kubectl -n x exec pod -- id",
		"kubectl --namespace x exec pod -- id",
		"kubectl --context prod run x --image=alpine",
		"kubectl myplugin",
		"kubectl --unknown-flag x get pods",
		"docker -H tcp://127.0.0.1:2375 run alpine id",
		"docker --context x exec c id",
		"docker compose up",
		"npm --loglevel silent run build",
		"npm --foo ls run build",
		"npm build",
		"pnpm build",
		"yarn build",
		"git --namespace x myalias",
		"git grep -O id foo",
		"git grep -Oid foo",
		"git grep --open-files-in-pager=id foo",
		"git grep --open-files foo",
		"sed --expr='1e id' src/a.go",
		"sed --expression '1e id' src/a.go",
		"sed -ne'1e pwd' src/a.go",
		"sed -n -e '1eid' src/a.go",
		"sed -n '1eid' src/a.go",
		"sed '1rsecret' src/a.go",
		"sed '1Rsecret' src/a.go",
		"sed 's/a/b/;wout' src/a.go",
		"sed '\\%x%e id' src/a.go",
		"sed '\\%x%Ie id' src/a.go",
		"sed '/x/,~4e id' src/a.go",
		"sed '0~3 e id' src/a.go",
		"sed 's|a|b|e' src/a.go",
		"sed 's/a/b/gw out' src/a.go",
		"sed 'y/ab/cd/;e' src/a.go",
		"sed ':a;e id' src/a.go",
		"sed '/x/{p;e id\n}' src/a.go",
		"sed -s -n p src/a.go",
		"sed --in-pl s/a/b/ src/a.go",
		"sed --separ -n p src/a.go",
		"tar --checkpoint=1 --checkpoint-act=exec=id -cf /dev/null docs",
		"tar --to-com=id -xf x.tar",
		"awk '{getline l < \"x\"; print l}' src/a.go",
		"awk 'BEGIN{while((getline l<\"x\")>0)print l}'",
		"awk 'BEGIN{ARGV[1]=\"x\";ARGC=2}{print}' src/a.go",
		"gawk --source 'BEGIN{system(\"id\")}'",
		"gawk --sou='BEGIN{system(\"id\")}'",
		"gawk -e 'BEGIN{system(\"id\")}'",
		"awk -F: -e 'BEGIN{system(\"id\")}'",
		"awk -vx=1 'BEGIN{system(\"id\")}'",
		"gawk '@load \"filefuncs\"; BEGIN{}'",
	}...)
	requireShellAllowed(t, h, []string{
		"go test -run generate ./...",
		"go test -count 1 -run TestX ./...",
		"go build -o bin/x ./...",
		"go -C src build ./...",
		"go test --count=1 ./...",
		"kubectl -n x get pods",
		"kubectl --namespace=x logs pod",
		"docker ps",
		"docker -H tcp://127.0.0.1:2375 ps",
		"npm ls",
		"npm view react",
		"git grep foo -- docs",
		"sed -n 1,5p src/a.go",
		"sed -e 's/a/b/g' -e 3d src/a.go",
		"sed -E 's/(a)/\\1/' src/a.go",
		"sed '1~2p;/x/,+3d' src/a.go",
		"sed '$a text with e and w' src/a.go",
		"sed -n '3,/end/{/x/!p}' src/a.go",
		"sed 's/[/]/x/' src/a.go",
		"sed 's/hello world/bye/' src/a.go",
		"sed --expression=s/a/b/ src/a.go",
		"sed -ne 's/a/b/p' src/a.go",
		"sed = src/a.go",
		"sed 'y/abc/xyz/' src/a.go",
		"awk -F: '{print $1}' src/a.go",
		"awk '{n++} END {print n}' src/a.go",
		"awk '{ if (getline line) print line }' src/a.go",
	}...)
}

// TestGitContentReadersAreChecked: git subcommands that print file content
// from the work tree, the index or history are recursive reads of what
// they name, the whole repository when they name a revision; .git itself
// is not content; <rev>:<path> is checked whatever the revision looks like.
func TestGitContentReadersAreChecked(t *testing.T) {
	f, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "git *")
	cfg.ForbiddenPathGlobs = append(cfg.ForbiddenPathGlobs, "**/.git/config")
	for _, d := range []string{"docs", ".git", "docs/.git"} {
		if err := os.MkdirAll(filepath.Join(f.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"docs/readme.md", ".git/config", "docs/.git/config"} {
		if err := os.WriteFile(filepath.Join(f.ws, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := newHook(t, cfg)
	requireShellDenied(t, h, []string{
		"git show origin/main:.env",
		"git show refs/remotes/origin/main:secrets/key",
		"git show HEAD:./.env",
		"git show :0:.env",
		"git show :2:secrets/key",
		"git show HEAD:secrets",
		"git cat-file -p HEAD:secrets/key",
		"git show HEAD",
		"git show",
		"git diff",
		"git diff HEAD~1",
		"git diff --no-index docs .",
		"git diff --no-index docs/readme.md .env",
		"git grep foo",
		"git grep --untracked foo",
		"git grep -e foo docs secrets",
		"git log -p",
		"git log --patch --oneline",
		"git log -U3",
		"git log -S secret",
		"git log -Gsecret --oneline",
		"git log --pat",
		"git whatchanged -p",
		"git stash show -p",
		"git archive HEAD",
		"git archive -o /dev/null HEAD",
		"git cat-file -p 0123456789abcdef",
		"git format-patch -1",
		"git bundle create /dev/null HEAD",
		"git fast-export HEAD",
		"git diff-tree -p HEAD",
		"git blame secrets/key",
	}...)
	requireShellAllowed(t, h, []string{
		"git status",
		"git log --oneline",
		"git log -n 5 --format=%s",
		"git show HEAD:src/a.go",
		"git show HEAD:docs/readme.md",
		"git diff -- docs",
		"git diff HEAD~1 -- src/a.go",
		"git diff docs",
		"git log -p -- docs",
		"git grep foo -- docs",
		"git show HEAD -- docs/readme.md",
		"git cat-file -p HEAD:docs/readme.md",
	}...)
}

// TestRecursiveReadersFollowSymlinkedDirectories: -R and friends descend
// into a symlinked directory, so what it points to is checked too; GNU
// abbreviations of the recursive options count. ls -R lists a symlink
// beneath its operand as a link unless -L makes it follow.
func TestRecursiveReadersFollowSymlinkedDirectories(t *testing.T) {
	f, cfg := soundFixture(t)
	cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, "cp *", "rg *", "tar *")
	for _, d := range []string{"docs", "lnk", "vault"} {
		if err := os.MkdirAll(filepath.Join(f.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// vault is not forbidden itself; the .env in it is.
	if err := os.WriteFile(filepath.Join(f.ws, "vault", ".env"), []byte("S=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../vault", filepath.Join(f.ws, "lnk", "s")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../lnk", filepath.Join(f.ws, "docs", "loop")); err != nil {
		t.Fatal(err)
	}
	h := newHook(t, cfg)
	requireShellDenied(t, h, []string{
		"grep -R foo lnk",
		"grep -r foo lnk",
		"ls -RL lnk",
		"ls -R -L lnk",
		"ls -lLR lnk",
		"ls -R --dereference lnk",
		"ls --recur --deref lnk",
		"find -L lnk",
		"cp -r lnk docs/copy",
		"grep -R foo docs",
		"grep --recur foo lnk",
		"grep --dereference-rec foo lnk",
		"grep --dir=recurse foo lnk",
		"grep --directories recurse foo lnk",
		"cp --recur lnk docs/copy",
		"rg foo lnk",
		"tar --cre -f /dev/null lnk",
	}...)
	requireShellAllowed(t, h, "ls -R lnk", "ls --recur lnk", "ls -lR lnk", "ls -R -H lnk", "ls -R --dereference-command-line lnk")
	if err := os.Remove(filepath.Join(f.ws, "lnk", "s")); err != nil {
		t.Fatal(err)
	}
	requireShellAllowed(t, h, "grep -R foo lnk", "grep -R foo docs", "ls --recur docs", "ls -RL lnk")
}
