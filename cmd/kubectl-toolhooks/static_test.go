package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// coderPolicy is a workspace-only coding agent's policy: forbidden .env
// files, secrets and /etc, and a short shell allow-list without cd.
const coderPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: coder
  namespace: default
spec:
  mode: Full
  workspace:
    root: /workspace
    only: true
  forbiddenPathGlobs: ["**/.env", "**/secrets/**", "/etc/**"]
  shell:
    allow: true
    allowedCommands: ["git status", "git diff", "git diff *", "ls *", "cat *", "go test *", "go build *"]
`

// TestCheckDecidesTheStaticClassesAndOverDenials runs the static classes
// and the over-denials fixed beside them through check, as an agent that
// runs its tools itself would ask the gateway: each denial is the static
// layer's.
func TestCheckDecidesTheStaticClassesAndOverDenials(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "policies/coder.yaml", coderPolicy)
	ws := filepath.Join(dir, "ws")
	writeFile(t, ws, "src/main.go", "package main\n")
	writeFile(t, ws, "go.mod", "module x\n")
	writeFile(t, ws, ".env", "S=1\n")
	writeFile(t, ws, "secrets/key", "k\n")
	if err := os.Symlink("../secrets", filepath.Join(ws, "src", "link")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "go.mod", "src/main.go"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = ws, append(os.Environ(), "HOME="+ws, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	shell := func(c string) string {
		b, err := json.Marshal(map[string]string{"command": c})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	patch := func(p string) string {
		b, err := json.Marshal(map[string]string{"input": p})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct {
		name, tool, args string
		allowed          bool
	}{
		{"a compiler profile nested in -gcflags is a path", "shell", shell("go build -gcflags=all=-cpuprofile=.env ."), false},
		{"a spaced -gcflags list is read too", "shell", shell("go build -gcflags '-N -l -memprofile secrets/k' ."), false},
		{"the linker's -extar runs a program", "shell", shell("go build -ldflags=-extar=/bin/sh ."), false},
		{"a flag list that does not read is unverifiable", "shell", shell("go build -gcflags=-d=ssa/check/dump=f ."), false},
		{"plain compiler and linker flags pass", "shell", shell(`go build -gcflags='all=-N -l' -ldflags="-s -w" ./...`), true},
		{"an indented apply_patch header counts", "apply_patch", patch("*** Begin Patch\n  *** Add File: .env\n+x\n*** End Patch\n"), false},
		{"a git rename without ---/+++ counts", "apply_patch",
			patch("diff --git a/src/main.go b/secrets/key\nrename from src/main.go\nrename to secrets/key\n"), false},
		{"a patch whose names do not read denies", "apply_patch", patch("diff --git \"a/x b/y\n"), false},
		{"a patch inside the workspace passes", "apply_patch",
			patch("*** Begin Patch\n*** Update File: src/main.go\n@@\n-package main\n+package x\n*** End Patch\n"), true},
		{"write_file on /dev/stdout is refused", "write_file", `{"path":"/dev/stdout","content":"x"}`, false},
		{"read_file on /proc/self/fd/3 is refused", "read_file", `{"path":"/proc/self/fd/3"}`, false},
		{"read_file on /dev/fd/0 is refused", "read_file", `{"path":"/dev/fd/0"}`, false},
		{"a partly quoted heredoc delimiter makes a literal body", "shell", shell("cat - <<E\"O\"F\n$(cat .env)\nEOF"), true},
		{"an unquoted heredoc body runs", "shell", shell("cat - <<EOF\n$(cat .env)\nEOF"), false},
		{"ls -R does not follow a symlink beneath", "shell", shell("ls -R src"), true},
		{"ls -RL does", "shell", shell("ls -RL src"), false},
		{"git diff -- DIR does not follow a symlink beneath", "shell", shell("git diff -- src"), true},
		{"git diff -C finds copies", "shell", shell("git diff -C"), true},
		{"git diff -c is a combined diff", "shell", shell("git diff -c"), true},
		{"git diff -u is a patch", "shell", shell("git diff -u"), true},
		{"git diff ignores an untracked .env", "shell", shell("git diff"), true},
		{"git diff HEAD reads history", "shell", shell("git diff HEAD"), false},
		{"git diff --no-index reads what it names", "shell", shell("git diff --no-index src/main.go .env"), false},
		{"?env matches no dot name", "shell", shell("cat ?env"), true},
		{"[.]env matches no dot name", "shell", shell("cat [.]env"), true},
		{".e?v does", "shell", shell("cat .e?v"), false},
		{"a benign environment prefix is verifiable", "shell", shell("CGO_ENABLED=0 go build ./..."), true},
		{"GOFLAGS is not", "shell", shell("GOFLAGS=-toolexec=x go build ./..."), false},
		{"cd needs no allow-list entry", "shell", shell("cd src && go test ./..."), true},
		{"cd into a forbidden directory is denied", "shell", shell("cd secrets && go test ./..."), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "check", "-f", pol, "--workspace", ws, "--tool", tc.tool, "--args", tc.args, "-o", "json")
			var got struct {
				Allowed bool   `json:"allowed"`
				Layer   string `json:"layer"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("exit %d, stdout %q, stderr %q: %v", r.code, r.stdout, r.stderr, err)
			}
			if got.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %s", got.Allowed, tc.allowed, r.stdout)
			}
			if !got.Allowed && got.Layer != "static" {
				t.Errorf("a denial of layer %q, want static: %s", got.Layer, r.stdout)
			}
		})
	}
}
