package tools_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// protectHook refuses writing the paths its globs (relative to its root)
// match, as a policy protecting configuration that makes programs run
// other programs does, and allows everything else.
type protectHook struct {
	root  string
	globs []string
}

func (h protectHook) Name() string { return "protect" }
func (h protectHook) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (h protectHook) After(context.Context, *hooks.Call, *hooks.Result) {}
func (h protectHook) CheckExec(context.Context, *hooks.Call, string, []string, []string) hooks.Verdict {
	return hooks.Allow
}

func (h protectHook) CheckOpen(_ context.Context, _ *hooks.Call, path string, write bool) hooks.Verdict {
	rel, err := filepath.Rel(h.root, path)
	if !write || err != nil {
		return hooks.Allow
	}
	for _, g := range h.globs {
		if ok, _ := doublestar.Match(g, rel); ok {
			return hooks.Deny("protectedPaths", path+" is protected")
		}
	}
	return hooks.Allow
}

// kernelLayout writes a workspace holding forbidden, protected and ordinary
// files, a Go module whose test reads secrets, and beside it a file outside.
func kernelLayout(t *testing.T) (dir, ws string) {
	t.Helper()
	dir = mustReal(t, t.TempDir())
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(dir, "ws")
	files := map[string]string{
		"ws/.env":                     "SECRET=env\n",
		"ws/sub/.env":                 "SECRET=subenv\n",
		"ws/sub/ok.txt":               "ok\n",
		"ws/secrets/key":              "SECRET=key\n",
		"ws/notes.txt":                "notes\n",
		"ws/run.sh":                   "#!/bin/sh\necho RAN\n",
		"ws/.git/config":              "[core]\n\tbare = false\n",
		"ws/.git/HEAD":                "ref: refs/heads/main\n",
		"ws/.git/hooks/pre-push":      "#!/bin/sh\nexit 0\n",
		"ws/.git/objects/info/packs":  "\n",
		"ws/out/.keep":                "",
		"ws/.gocache/README":          "",
		"ws/go.mod":                   "module probe\n\ngo 1.22\n",
		"outside.txt":                 "SECRET=outside\n",
		"outdir/f.txt":                "SECRET=outdir\n",
		"ws/probe/probe_test.go":      goProbe(dir),
		"ws/probe/nothing_to_see.txt": "x\n",
	}
	for p, body := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Hard links and symbolic links to forbidden files, made before the call.
	if err := os.Link(filepath.Join(ws, ".env"), filepath.Join(ws, "sub/innocent.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secrets/key", filepath.Join(ws, "sub/key-link")); err != nil {
		t.Fatal(err)
	}
	// Everyone may write the workspace, so that an unprivileged gateway can too.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink == 0 {
			_ = os.Chmod(p, 0o777)
		}
		return nil
	})
	return dir, ws
}

// goProbe is agent-written test code: it reads every secret, and copies
// what it could read, writes and removes protected and forbidden files,
// then leaves a sentinel saying it ran.
func goProbe(dir string) string {
	ws := filepath.Join(dir, "ws")
	return fmt.Sprintf(`package probe

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProbe(t *testing.T) {
	for i, p := range []string{%q, %q, %q, %q, %q, %q, "/etc/passwd"} {
		if b, err := os.ReadFile(p); err == nil {
			_ = os.WriteFile(filepath.Join(%q, "leak-go-"+string(rune('a'+i))), b, 0o644)
		}
	}
	_ = os.WriteFile(%q, []byte("[core]\n\tfsmonitor = evil\n"), 0o644)
	_ = os.WriteFile(%q, []byte("#!/bin/sh\n"), 0o755)
	_ = os.Remove(%q)
	_ = os.Rename(%q, %q)
	_ = os.WriteFile(%q, []byte("ran\n"), 0o644)
}
`, filepath.Join(ws, ".env"), filepath.Join(ws, "sub/.env"), filepath.Join(ws, "secrets/key"),
		filepath.Join(ws, "sub/innocent.txt"), filepath.Join(ws, "sub/key-link"), filepath.Join(dir, "outside.txt"),
		filepath.Join(ws, "out"),
		filepath.Join(ws, ".git/config"), filepath.Join(ws, ".git/hooks/pre-commit"), filepath.Join(ws, ".env"),
		filepath.Join(ws, "secrets/key"), filepath.Join(ws, "out/key"),
		filepath.Join(ws, "out/go-ran"))
}

// snapshot is every file's type, mode and content beneath root, skipping
// the directories named in skip.
func snapshot(t *testing.T, root string, skip ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(skip, rel) {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			v += " -> " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// kernelPolicies are the policies of the differential test. The shell's
// own checks would refuse most of the attempts; these policies allow every
// command, so that only the kernel stands between the programs and the files.
func kernelPolicies() []struct {
	name      string
	cfg       autonomy.Config
	protect   bool
	etc       bool // /etc/** is forbidden
	readOnly  bool
	goAllowed bool // go test runs the agent's test code (once: a cold build cache is slow)
} {
	return []struct {
		name      string
		cfg       autonomy.Config
		protect   bool
		etc       bool
		readOnly  bool
		goAllowed bool
	}{
		{name: "coder", cfg: autonomy.Config{WorkspaceOnly: true,
			ForbiddenPathGlobs: []string{"**/.env", "**/secrets/**", "/etc/**"}}, protect: true, etc: true, goAllowed: true},
		{name: "not workspace-only", cfg: autonomy.Config{
			ForbiddenPathGlobs: []string{"**/.env", "secrets/**"}}},
		{name: "readonly", cfg: autonomy.Config{Mode: autonomy.ModeReadOnly, WorkspaceOnly: true,
			ForbiddenPathGlobs: []string{"**/.env", "**/secrets/**"}}, readOnly: true},
	}
}

// TestTheKernelEnforcesThePolicysPathRules runs, through the real shell
// tool under several policies, programs that try to read, write, execute,
// list, remove, rename and link forbidden files, protected files, files
// outside the workspace and system files the policy forbids, and asserts
// that they were refused and that nothing happened.
func TestTheKernelEnforcesThePolicysPathRules(t *testing.T) {
	for _, pol := range kernelPolicies() {
		t.Run(pol.name, func(t *testing.T) {
			dir, ws := kernelLayout(t)
			cfg := pol.cfg
			cfg.WorkspaceRoot, cfg.AllowShell, cfg.AllowedShellCommands = ws, true, []string{"*"}
			auto, err := autonomy.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			entries := []hooks.Entry{{Hook: auto}}
			if pol.protect {
				entries = append(entries, hooks.Entry{Hook: protectHook{root: ws, globs: []string{".git/config", ".git/hooks/**"}}})
			}
			// run runs cmd through the shell tool; a refusal by the runtime
			// guard (the static check) is returned as the output.
			run := func(cmd string) string {
				t.Helper()
				g, err := hooks.NewGuard(&hooks.Call{Tool: tools.Shell, SessionID: "s"}, entries...)
				if err != nil {
					t.Fatal(err)
				}
				out, err := shellOf(t, ws).Execute(hooks.WithGuard(context.Background(), g), map[string]any{"command": cmd})
				if err != nil {
					if _, ok := errors.AsType[*hooks.RuntimeDenial](err); ok {
						return "[exit status denied by the guard]"
					}
					t.Fatalf("%s: %v", cmd, err)
				}
				return out
			}

			secrets := []string{".env", "sub/.env", "secrets/key", "sub/innocent.txt", "sub/key-link", "../outside.txt",
				"../outdir/f.txt", filepath.Join(dir, "outside.txt")}
			if pol.etc {
				secrets = append(secrets, "/etc/passwd", "/etc/group", "/etc/ld.so.cache", "/etc/hostname")
			}
			// Scripts the shell's static check cannot see into: only the
			// kernel stands between them and the files.
			var scripts, direct []string
			for i, s := range secrets {
				direct = append(direct, "cat "+s, "head -c 10 "+s, "cp "+s+" out/", "rm -f "+s, "truncate -s 0 "+s)
				scripts = append(scripts,
					"cat "+s,
					fmt.Sprintf("cp %s out/c%d && echo LEAK > out/leak-cp%d", s, i, i),
					fmt.Sprintf("head -c 100 < %s", s),
					fmt.Sprintf("ln %s out/h%d && cat out/h%d", s, i, i),
					fmt.Sprintf("ln -s %s out/s%d; cat out/s%d", filepath.Join(ws, s), i, i),
					fmt.Sprintf("mv %s out/m%d", s, i),
					"rm -f "+s,
					"echo FORGED > "+s,
					": > "+s,
					"truncate -s 0 "+s,
					"exec "+s,
				)
			}
			scripts = append(scripts,
				"mv secrets out/secrets",
				"mv sub out/sub",
				"rm -rf secrets sub",
				"./run.sh",
				"ls ..",
				"ls ../outdir",
				"ls /etc",
			)
			direct = append(direct, "./run.sh", "ls ..", "ls ../outdir", "ls /etc")
			if pol.protect || pol.readOnly {
				scripts = append(scripts,
					"echo FORGED >> .git/config",
					"rm -f .git/config",
					"mv .git/config out/cfg",
					"echo x > out/evil && mv out/evil .git/config",
					"echo x > out/evil && ln -f out/evil .git/config",
					"printf '#!/bin/sh\\necho PWNED\\n' > .git/hooks/pre-commit",
					"rm -f .git/hooks/pre-push",
					"mkdir .git/hooks/x",
					"ln -s /bin/true .git/hooks/post-checkout",
					"echo x > .git/newfile",
					"mv .git/HEAD out/HEAD",
				)
				direct = append(direct, "mv .git/config out/", "rm -f .git/config")
			}
			if pol.readOnly {
				scripts = append(scripts, "echo FORGED > notes.txt", "rm -f notes.txt", "mv notes.txt out/",
					"echo x > out/new", "mkdir out/d", "truncate -s 0 notes.txt", "rm -f out/.keep")
				direct = append(direct, "rm -f notes.txt", "truncate -s 0 notes.txt", "mkdir out/d", "touch out/new")
			}
			if err := os.Mkdir(filepath.Join(ws, "attack"), 0o777); err != nil {
				t.Fatal(err)
			}
			for i, sc := range scripts {
				if err := os.WriteFile(filepath.Join(ws, "attack", strconv.Itoa(i)+".sh"), []byte(sc+"\n"), 0o666); err != nil {
					t.Fatal(err)
				}
			}

			skip := []string{"out", ".gocache"}
			if !pol.protect {
				skip = append(skip, ".git")
			}
			if pol.readOnly {
				skip = []string{".gocache"}
			}
			before := snapshot(t, ws, skip...)
			outBefore := snapshot(t, dir, "ws")

			// Controls: what the policy permits works under the same rules.
			if out := run("cat notes.txt sub/ok.txt; ls; ls sub"); !strings.Contains(out, "notes\nok\n") ||
				!strings.Contains(out, "notes.txt") || !strings.Contains(out, "ok.txt") || strings.Contains(out, "exit status") {
				t.Fatalf("permitted reads failed: %q", out)
			}
			if out := run("sh attack/0.sh; echo $?"); !strings.Contains(out, "Permission denied") {
				t.Fatalf("the first attack was not refused by the kernel: %q", out)
			}
			if !pol.readOnly {
				if out := run("echo made > out/made && cat out/made && mkdir -p out/d/e && mv out/made out/d/e/ && rm -r out/d"); out != "made\n" {
					t.Fatalf("permitted writes failed: %q", out)
				}
			}

			refused := func(a, out string) {
				t.Helper()
				if strings.Contains(out, "SECRET") || strings.Contains(out, "RAN") || strings.Contains(out, "PWNED") ||
					!strings.Contains(out, "exit status") && !strings.Contains(strings.ToLower(out), "permission denied") && !strings.Contains(out, "Operation not permitted") {
					t.Errorf("%s: was not refused: %q", a, out)
				}
			}
			for i, sc := range scripts {
				refused(sc, run("sh attack/"+strconv.Itoa(i)+".sh"))
			}
			for _, a := range direct {
				refused(a, run(a))
			}
			if pol.goAllowed {
				out := run("cd probe && GOCACHE=" + filepath.Join(ws, ".gocache") + " GOTOOLCHAIN=local GOFLAGS=-mod=mod go test -count=1 .")
				if b, err := os.ReadFile(filepath.Join(ws, "out/go-ran")); err != nil || string(b) != "ran\n" {
					t.Errorf("the agent's test did not run: %q %v", out, err)
				}
			}
			after := snapshot(t, ws, skip...)
			for p, v := range before {
				if after[p] != v {
					t.Errorf("%s changed: %q -> %q", p, v, after[p])
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("%s appeared", p)
				}
			}
			outAfter := snapshot(t, dir, "ws")
			for p, v := range outBefore {
				if outAfter[p] != v {
					t.Errorf("outside: %s changed", p)
				}
			}
			if len(outAfter) != len(outBefore) {
				t.Errorf("outside: files appeared: %v", outAfter)
			}
			// Nothing the programs could write holds a secret.
			_ = filepath.WalkDir(filepath.Join(ws, "out"), func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return nil
				}
				if b, err := os.ReadFile(p); err == nil && (strings.Contains(string(b), "SECRET") || strings.Contains(string(b), "LEAK")) {
					t.Errorf("%s holds %q", p, b)
				}
				if strings.HasPrefix(d.Name(), "leak") {
					t.Errorf("sentinel %s exists", p)
				}
				return nil
			})
		})
	}
}

// TestTheKernelEnforcesThePolicysPathRulesAsAnUnprivilegedUser runs the
// differential test again in a copy of this test binary running as nobody:
// the guarantees must not depend on the gateway's user.
func TestTheKernelEnforcesThePolicysPathRulesAsAnUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("runs as root and drops to nobody; this run is unprivileged already")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no nobody user")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "toolhooks-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tools.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestTheKernelEnforcesThePolicysPathRules$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "HOME="+home, "GOCACHE="+filepath.Join(home, "cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTheKernelEnforcesThePolicysPathRules") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "uid="+nobody.Uid) {
		t.Fatalf("the run as nobody did not say it ran as nobody:\n%s", out)
	}
}

func TestMain(m *testing.M) {
	if os.Getuid() != 0 {
		fmt.Printf("uid=%d\n", os.Getuid())
	}
	os.Exit(m.Run())
}
