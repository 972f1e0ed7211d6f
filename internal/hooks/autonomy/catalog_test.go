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
