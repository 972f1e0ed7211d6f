package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// guardPolicy asks a runtime guard, as the shell tool does (about the
// workspace's real paths); key is fixed by the test so that starts share
// the cache.
type guardPolicy struct {
	key string
	g   *hooks.Guard
}

var realPaths = pathguard.WithRealPaths(context.Background())

func (p guardPolicy) Key() string                   { return p.key }
func (p guardPolicy) RefusesRead(path string) bool  { return p.g.Refuses(realPaths, path) }
func (p guardPolicy) RefusesWrite(path string) bool { return p.g.RefusesWrite(realPaths, path) }
func (p guardPolicy) RefusesSystem(path string) bool {
	return p.g.RefusesSystem(context.Background(), path)
}
func (p guardPolicy) Err() error { return nil }

// autonomyPolicy returns the path policy of an Autonomy hook over ws.
func autonomyPolicy(t testing.TB, ws, key string, cfg autonomy.Config) (guardPolicy, error) {
	t.Helper()
	cfg.WorkspaceRoot = ws
	auto, err := autonomy.New(cfg)
	if err != nil {
		return guardPolicy{}, err
	}
	g, err := hooks.NewGuard(&hooks.Call{Tool: "shell"}, hooks.Entry{Hook: auto})
	if err != nil {
		t.Fatal(err)
	}
	return guardPolicy{key: key, g: g}, nil
}

// confined runs argv in ws confined to ws under pol.
func confined(t testing.TB, s *sandbox.Sandbox, ws string, pol sandbox.PathPolicy, argv ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = ws, &out, &out
	p, err := s.Start(cmd, sandbox.Confinement{Workspace: ws, Policy: pol})
	if err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	err = waitExit(p)
	return out.String(), err
}

func write(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The rules are computed once per policy and tree: a start that follows
// only harmless changes (a permitted file created where everything is
// permitted) reuses them; a new file or directory elsewhere gets rules of
// its own; and after every change that could make them grant a refused
// file (a forbidden file created, a hard link to one, a directory renamed
// to a forbidden name, a file renamed to one) the next start refuses it.
func TestTheCachedRulesFollowNewForbiddenFiles(t *testing.T) {
	s := landlock(t)
	ws := mustEval(t, t.TempDir())
	write(t, filepath.Join(ws, ".env"), "SECRET=root\n")
	write(t, filepath.Join(ws, "data/a.txt"), "a\n")
	write(t, filepath.Join(ws, "src/main.go"), "package main\n")
	write(t, filepath.Join(ws, "d/f"), "SECRET=renamed-dir\n")
	pol, err := autonomyPolicy(t, ws, "cache", autonomy.Config{ForbiddenPathGlobs: []string{"**/.env", "**/secrets/**"}})
	if err != nil {
		t.Fatal(err)
	}
	cat := func(p string) (string, error) { return confined(t, s, ws, pol, "/bin/cat", p) }

	if out, err := cat("data/a.txt"); err != nil || out != "a\n" {
		t.Fatalf("permitted read: %q %v", out, err)
	}
	walks := s.Walks()
	if out, err := cat("src/main.go"); err != nil || out != "package main\n" || s.Walks() != walks {
		t.Fatalf("second start: %q %v, walks %d -> %d", out, err, walks, s.Walks())
	}
	write(t, filepath.Join(ws, "src/new.txt"), "new\n")
	if out, err := cat("src/new.txt"); err != nil || out != "new\n" || s.Walks() != walks {
		t.Fatalf("a permitted new file: %q %v, walks %d -> %d", out, err, walks, s.Walks())
	}
	// At the root, where .env keeps the directory's rule to listing, a new
	// permitted file gets a rule of its own and a new forbidden one none.
	write(t, filepath.Join(ws, "root.txt"), "root\n")
	write(t, filepath.Join(ws, "secrets/k"), "SECRET=new-dir\n")
	if out, err := cat("root.txt"); err != nil || out != "root\n" {
		t.Fatalf("a permitted new file at the root: %q %v", out, err)
	}
	if out, err := cat("secrets/k"); err == nil || strings.Contains(out, "SECRET") {
		t.Fatalf("a new forbidden directory at the root: %q %v", out, err)
	}
	walks = s.Walks()
	write(t, filepath.Join(ws, "root2.txt"), "root2\n")
	if out, err := cat("root2.txt"); err != nil || out != "root2\n" || s.Walks() != walks {
		t.Fatalf("a permitted new file at the root: %q %v, walks %d -> %d", out, err, walks, s.Walks())
	}
	// New directories are walked on their own.
	write(t, filepath.Join(ws, "src/nd/deeper/ok"), "ok\n")
	write(t, filepath.Join(ws, "nd2/ok"), "ok2\n")
	if out, err := confined(t, s, ws, pol, "/bin/cat", "src/nd/deeper/ok", "nd2/ok"); err != nil || out != "ok\nok2\n" || s.Walks() != walks {
		t.Fatalf("permitted new directories: %q %v, walks %d -> %d", out, err, walks, s.Walks())
	}
	write(t, filepath.Join(ws, "src/nd3/.env"), "SECRET=nd3\n")
	write(t, filepath.Join(ws, "nd4/x/.env"), "SECRET=nd4\n")
	for _, p := range []string{"src/nd3/.env", "nd4/x/.env"} {
		if out, err := cat(p); err == nil || strings.Contains(out, "SECRET") {
			t.Fatalf("a new directory holding a forbidden file: %q %v", out, err)
		}
	}

	steps := []struct {
		name   string
		change func()
		read   string
	}{
		{"a forbidden file created in a permitted directory", func() {
			write(t, filepath.Join(ws, "data/.env"), "SECRET=data\n")
		}, "data/.env"},
		{"a hard link to a forbidden file", func() {
			if err := os.Link(filepath.Join(ws, ".env"), filepath.Join(ws, "src/innocent")); err != nil {
				t.Fatal(err)
			}
		}, "src/innocent"},
		{"a forbidden directory created", func() {
			write(t, filepath.Join(ws, "src/secrets/k"), "SECRET=k\n")
		}, "src/secrets/k"},
		{"a directory renamed to a forbidden name", func() {
			if err := os.Rename(filepath.Join(ws, "d"), filepath.Join(ws, "src/secrets2")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(ws, "src/secrets2"), filepath.Join(ws, "data/secrets")); err != nil {
				t.Fatal(err)
			}
		}, "data/secrets/f"},
		{"a permitted file renamed to a forbidden name", func() {
			write(t, filepath.Join(ws, "src/plain"), "SECRET=plain\n")
			if err := os.Rename(filepath.Join(ws, "src/plain"), filepath.Join(ws, "src/.env")); err != nil {
				t.Fatal(err)
			}
		}, "src/.env"},
	}
	for _, st := range steps {
		before := s.Walks()
		st.change()
		out, err := cat(st.read)
		if err == nil || strings.Contains(out, "SECRET") || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s: %s was read: %q %v", st.name, st.read, out, err)
		}
		t.Logf("%s: %d walks", st.name, s.Walks()-before)
		// What stays permitted still works under the new rules.
		if out, err := cat("data/a.txt"); err != nil || out != "a\n" {
			t.Errorf("%s: permitted read: %q %v", st.name, out, err)
		}
	}
}

func mustEval(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fuzzNames and fuzzGlobs are what random trees and policies are made of.
var (
	fuzzNames = []string{".env", "a", "b", "secrets", "x.key", "c", "d.txt"}
	fuzzGlobs = []string{"**/.env", "**/secrets/**", "a/**", "**/*.key", "b/*", "**/c", "a/b/**", "**/a",
		"secrets/**", "**/b/.env", "c/**/x.key", "*.txt", "**/a/**/d.txt", "b", "**/secrets"}
)

// buildTree makes a small tree beneath ws from data: directories, files,
// symbolic links to other entries of the tree and hard links.
func buildTree(t testing.TB, ws string, data []byte) {
	t.Helper()
	dirs := []string{""}
	var files []string
	_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(ws, p)
		switch {
		case err != nil || p == ws:
		case d.IsDir():
			dirs = append(dirs, rel)
		case d.Type().IsRegular():
			files = append(files, rel)
		}
		return nil
	})
	for i := 0; i+2 < len(data) && i < 3*30; i += 3 {
		op, name, at := data[i]%5, fuzzNames[int(data[i+1])%len(fuzzNames)], dirs[int(data[i+2])%len(dirs)]
		rel := filepath.Join(at, name)
		p := filepath.Join(ws, rel)
		if _, err := os.Lstat(p); err == nil || strings.Count(rel, "/") > 3 {
			continue
		}
		switch op {
		case 0:
			if err := os.Mkdir(p, 0o755); err == nil {
				dirs = append(dirs, rel)
			}
		case 1, 2:
			if err := os.WriteFile(p, []byte("content of "+rel+"\n"), 0o644); err == nil {
				files = append(files, rel)
			}
		case 3:
			all := append(slices.Clone(dirs[1:]), files...)
			if len(all) > 0 {
				target := all[int(data[i+2])%len(all)]
				rt, err := filepath.Rel(filepath.Dir(p), filepath.Join(ws, target))
				if err == nil {
					_ = os.Symlink(rt, p)
				}
			}
		case 4:
			if len(files) > 0 {
				if err := os.Link(filepath.Join(ws, files[int(data[i+2])%len(files)]), p); err == nil {
					files = append(files, rel)
				}
			}
		}
	}
}

// FuzzKernelRulesMatchThePolicy builds a random tree and a random policy
// (forbidden globs, readonly or not) and checks that the files a confined
// program can open for reading, and for writing, are exactly those the
// guard permits under every name of their inode.
func FuzzKernelRulesMatchThePolicy(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 0, 1, 1, 1, 0, 0, 3, 0, 1, 4, 2, 3, 0, 3, 4, 0, 2}, []byte{0, 1}, false)
	f.Add([]byte{0, 1, 0, 0, 2, 1, 1, 3, 2, 1, 4, 0, 4, 0, 3, 3, 5, 1, 1, 6, 2}, []byte{2, 5}, false)
	f.Add([]byte{0, 3, 0, 1, 4, 1, 0, 1, 0, 1, 0, 2, 3, 6, 1, 4, 2, 2, 1, 1, 1}, []byte{14, 3, 6}, true)
	f.Add([]byte{1, 0, 0, 4, 1, 0, 0, 2, 0, 1, 6, 1, 3, 0, 2, 0, 5, 0, 1, 2, 3}, []byte{7, 11}, false)
	// c/.env appears in a permitted directory between the two starts.
	f.Add([]byte{0, 5, 0, 1, 6, 1, 3, 1, 0, 1, 6, 0, 2, 2}, []byte{0}, false)
	s := landlock(f)
	f.Fuzz(func(t *testing.T, tree, globs []byte, readOnly bool) {
		ws := mustEval(t, t.TempDir())
		buildTree(t, ws, tree)
		// The tree changes between two starts under the same policy: the
		// second start's rules (kept or computed again) must match too.
		key := ws
		checkKernelRules(t, s, ws, key, globs, readOnly)
		if len(tree) > 6 {
			buildTree(t, ws, append(tree[len(tree)/2:], tree[:len(tree)/2]...))
			checkKernelRules(t, s, ws, key, globs, readOnly)
		}
	})
}

// checkKernelRules compares what a confined program can open in ws with
// what the policy of globs permits.
func checkKernelRules(t *testing.T, s *sandbox.Sandbox, ws, key string, globs []byte, readOnly bool) {
	{
		var forbidden []string
		for i, b := range globs {
			if i == 3 {
				break
			}
			forbidden = append(forbidden, fuzzGlobs[int(b)%len(fuzzGlobs)])
		}
		cfg := autonomy.Config{ForbiddenPathGlobs: forbidden}
		if readOnly {
			cfg.Mode = autonomy.ModeReadOnly
		}
		pol, err := autonomyPolicy(t, ws, key, cfg)
		if err != nil {
			t.Skip(err)
		}
		// Every name beneath ws that leads to a regular file, and the names of each inode.
		var names []string
		byIno := map[uint64][]string{}
		_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == ws {
				return nil
			}
			var st syscall.Stat_t
			if syscall.Stat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
				return nil
			}
			rel, _ := filepath.Rel(ws, p)
			names = append(names, rel)
			if d.Type().IsRegular() {
				byIno[st.Ino] = append(byIno[st.Ino], p)
			}
			return nil
		})
		want := map[string]bool{}
		for _, rel := range names {
			real, err := filepath.EvalSymlinks(filepath.Join(ws, rel))
			if err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(real, &st); err != nil {
				t.Fatal(err)
			}
			r, w := true, true
			for _, n := range byIno[st.Ino] {
				// The oracle resolves every name itself.
				if pol.g.Refuses(context.Background(), n) {
					r = false
				}
				if pol.g.RefusesWrite(context.Background(), n) {
					w = false
				}
			}
			if r {
				want["R "+rel] = true
				if w {
					want["W "+rel] = true
				}
			}
		}
		if len(names) == 0 {
			return
		}
		script := `for f; do if cat -- "$f" >/dev/null 2>&1; then echo "R $f"; fi; if (: >> "$f") 2>/dev/null; then echo "W $f"; fi; done`
		out, err := confined(t, s, ws, pol, append([]string{"/bin/sh", "-c", script, "sh"}, names...)...)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got := map[string]bool{}
		for l := range strings.Lines(out) {
			got[strings.TrimSuffix(l, "\n")] = true
		}
		var diff []string
		for k := range want {
			if !got[k] {
				diff = append(diff, "refused but permitted: "+k)
			}
		}
		for k := range got {
			if !want[k] {
				diff = append(diff, "PERMITTED BUT REFUSED BY THE POLICY: "+k)
			}
		}
		if len(diff) > 0 {
			slices.Sort(diff)
			t.Fatalf("globs %q readonly %v, tree:\n%s\n%s", forbidden, readOnly, listTree(ws), strings.Join(diff, "\n"))
		}
	}
}

func listTree(ws string) string {
	var b strings.Builder
	_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(ws, p)
		if d != nil && d.Type()&fs.ModeSymlink != 0 {
			tg, _ := os.Readlink(p)
			fmt.Fprintf(&b, "  %s -> %s\n", rel, tg)
		} else if d != nil {
			fmt.Fprintf(&b, "  %s %v\n", rel, d.Type())
		}
		return nil
	})
	return b.String()
}

// TestPathRulesAsAnUnprivilegedUser runs this package's path-rule tests
// and fuzz seeds again in a copy of this test binary running as nobody:
// the guarantees must not depend on the gateway's user.
func TestPathRulesAsAnUnprivilegedUser(t *testing.T) {
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
	bin := filepath.Join(dir, "sandbox.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^(TestTheCachedRulesFollowNewForbiddenFiles|FuzzKernelRulesMatchThePolicy|TestAConfinedProcessReachesOnlyTheWorkspaceAndSystemDirectories|TestPathRulesRunAsUID)$",
		"-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TOOLHOOKS_EXPECT_UID="+nobody.Uid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	for _, name := range []string{"TestTheCachedRulesFollowNewForbiddenFiles", "FuzzKernelRulesMatchThePolicy", "TestPathRulesRunAsUID"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Fatalf("as nobody, %s did not pass: %v\n%s", name, err, out)
		}
	}
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// TestPathRulesRunAsUID checks, in the run as nobody, that it is one.
func TestPathRulesRunAsUID(t *testing.T) {
	want := os.Getenv("TOOLHOOKS_EXPECT_UID")
	if want == "" {
		t.Skip("only in the run as another user")
	}
	if got := strconv.Itoa(os.Getuid()); got != want {
		t.Fatalf("running as uid %s, want %s", got, want)
	}
}

// Starts under one policy share its rules from several goroutines while
// the tree changes; every one refuses the forbidden files that existed
// when it started (each goroutine reads its own, which it made before
// starting; the others' may appear while its command runs, which the
// kernel rules do not cover).
func TestConcurrentStartsShareTheRules(t *testing.T) {
	s := landlock(t)
	ws := mustEval(t, t.TempDir())
	write(t, filepath.Join(ws, ".env"), "SECRET=root\n")
	write(t, filepath.Join(ws, "src/a"), "a\n")
	pol, err := autonomyPolicy(t, ws, "concurrent", autonomy.Config{ForbiddenPathGlobs: []string{"**/.env"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5 {
				write(t, filepath.Join(ws, fmt.Sprintf("src/d%d-%d/.env", g, i)), "SECRET=new\n")
				out, _ := confined(t, s, ws, pol, "/bin/sh", "-c", fmt.Sprintf("cat .env src/d%d-*/.env; cat src/a", g))
				if strings.Contains(out, "SECRET") || !strings.Contains(out, "a\n") {
					t.Errorf("%q", out)
				}
			}
		})
	}
	wg.Wait()
}
