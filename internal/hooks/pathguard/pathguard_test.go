package pathguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workspace builds a temp tree:
//
//	<tmp>/ws/             workspace root
//	<tmp>/ws/src/a.go
//	<tmp>/ws/in -> src          symlink inside
//	<tmp>/ws/out -> <tmp>/outside  symlink escaping
//	<tmp>/ws/loop1 -> loop2, loop2 -> loop1
//	<tmp>/ws/up -> ..           relative escape
//	<tmp>/outside/secret
func workspace(t *testing.T) (ws, outside string) {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(tmp, "ws")
	outside = filepath.Join(tmp, "outside")
	must(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "src", "a.go"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
	must(t, os.Symlink("src", filepath.Join(ws, "in")))
	must(t, os.Symlink(outside, filepath.Join(ws, "out")))
	must(t, os.Symlink("loop2", filepath.Join(ws, "loop1")))
	must(t, os.Symlink("loop1", filepath.Join(ws, "loop2")))
	must(t, os.Symlink("..", filepath.Join(ws, "up")))
	return ws, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	ws, outside := workspace(t)
	r, err := NewResolver(ws)
	must(t, err)
	home, _ := os.UserHomeDir()
	tmp := filepath.Dir(ws)
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "a relative path joins the workspace root", in: "src/a.go", want: ws + "/src/a.go"},
		{name: "an absolute path stays as it is", in: "/etc/passwd", want: "/etc/passwd"},
		{name: "a symlink inside the workspace resolves to its target", in: "in/a.go", want: ws + "/src/a.go"},
		{name: "a symlink escaping the workspace resolves outside", in: "out/secret", want: outside + "/secret"},
		{name: "dot-dot after a symlink climbs from the link target", in: "out/../ws/src", want: ws + "/src"},
		{name: "dot-dot after a symlinked dir uses the real parent", in: "in/../src", want: ws + "/src"},
		{name: "a relative symlink to the parent escapes", in: "up/outside/secret", want: outside + "/secret"},
		{name: "a missing tail is kept lexically", in: "new/dir/f.txt", want: ws + "/new/dir/f.txt"},
		{name: "dot-dot inside a missing tail is lexical", in: "new/../src/a.go", want: ws + "/src/a.go"},
		{name: "dot-dot out of a missing tail resumes symlink resolution", in: "new/../out/secret", want: outside + "/secret"},
		{name: "doubled and trailing slashes are ignored", in: "src//a.go/", want: ws + "/src/a.go"},
		{name: "dot-dot traversal leaves the workspace", in: "../outside/secret", want: outside + "/secret"},
		{name: "dot-dot above the file system root stops at root", in: "/../../../etc", want: "/etc"},
		{name: "tilde expands to home", in: "~", want: home},
		{name: "tilde slash expands under home", in: "~/x-does-not-exist", want: filepath.Join(home, "x-does-not-exist")},
		{name: "tilde user is an error", in: "~root/x", wantErr: true},
		{name: "an empty path is an error", in: "", wantErr: true},
		{name: "a NUL byte is an error", in: "src/a\x00.go", wantErr: true},
		{name: "a symlink cycle is an error", in: "loop1/x", wantErr: true},
		{name: "a component under a regular file is an error", in: "src/a.go/x", wantErr: true},
		{name: "the temp dir itself is reachable by dot-dot", in: "..", want: tmp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Resolve(%q) = %q, want error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("Resolve(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestResolveCycleIsTooManySymlinks(t *testing.T) {
	ws, _ := workspace(t)
	r, err := NewResolver(ws)
	must(t, err)
	if _, err := r.Resolve("loop1"); !errors.Is(err, ErrTooManySymlinks) {
		t.Fatalf("err = %v, want ErrTooManySymlinks", err)
	}
}

func TestNewResolver(t *testing.T) {
	ws, _ := workspace(t)
	file := filepath.Join(ws, "src", "a.go")
	tests := []struct {
		name, root string
		ok         bool
	}{
		{name: "an existing directory is accepted", root: ws, ok: true},
		{name: "a symlinked root is accepted and resolved", root: ws + "/in", ok: true},
		{name: "an empty root is rejected", root: ""},
		{name: "a relative root is rejected", root: "ws"},
		{name: "a missing root is rejected", root: ws + "/missing"},
		{name: "a file root is rejected", root: file},
		{name: "a root with NUL is rejected", root: ws + "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewResolver(tt.root)
			if (err == nil) != tt.ok {
				t.Fatalf("NewResolver(%q) err = %v, want ok=%v", tt.root, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "workspace root") {
				t.Fatalf("error %q does not name the workspace root", err)
			}
			if r != nil && tt.root == ws+"/in" && r.Real != ws+"/src" {
				t.Fatalf("Real = %q, want %q", r.Real, ws+"/src")
			}
		})
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		name, path, dir string
		want            bool
	}{
		{"the directory itself is within", "/work/a", "/work/a", true},
		{"a child is within", "/work/a/b", "/work/a", true},
		{"a sibling sharing a prefix is not within", "/work/ab", "/work/a", false},
		{"the parent is not within", "/work", "/work/a", false},
		{"a trailing slash on dir is ignored", "/work/a/b", "/work/a/", true},
		{"everything is within root", "/x", "/", true},
		{"an uncleaned escape is cleaned first", "/work/a/../b", "/work/a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Within(tt.path, tt.dir); got != tt.want {
				t.Fatalf("Within(%q, %q) = %v, want %v", tt.path, tt.dir, got, tt.want)
			}
		})
	}
}

func TestResolverWithinFoldsCaseWhenCaseInsensitive(t *testing.T) {
	r := &Resolver{Root: "/Work", Real: "/Work", CaseInsensitive: true}
	if !r.Within("/work/x") {
		t.Fatal("case-insensitive resolver should treat /work/x as within /Work")
	}
	r.CaseInsensitive = false
	if r.Within("/work/x") {
		t.Fatal("case-sensitive resolver should not treat /work/x as within /Work")
	}
}

func TestProbeOnThisFileSystem(t *testing.T) {
	ws, _ := workspace(t)
	r, err := NewResolver(ws)
	must(t, err)
	// The probe must agree with what the file system does for a swapped name.
	_, err = os.Lstat(filepath.Join(ws, "SRC"))
	if got, want := r.CaseInsensitive, err == nil; got != want {
		t.Fatalf("CaseInsensitive = %v, but SRC lookup says %v", got, want)
	}
}

func TestExtract(t *testing.T) {
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		keys    []string
		want    []string
		wantErr bool
	}{
		{name: "no path arguments yields nothing", tool: "web_search", args: map[string]any{"query": "x"}},
		{name: "path is extracted", tool: "read_file", args: map[string]any{"path": "a"}, want: []string{"a"}},
		{name: "git cwd is extracted", tool: "git", args: map[string]any{"cwd": "/tmp"}, want: []string{"/tmp"}},
		{name: "process working_directory is extracted", tool: "process", args: map[string]any{"working_directory": "/tmp"}, want: []string{"/tmp"}},
		{name: "all default keys are extracted in key order", tool: "x", args: map[string]any{"destination": "d", "path": "p", "file_path": "f", "source": "s"}, want: []string{"p", "f", "s", "d"}},
		{name: "arrays of strings are extracted", tool: "x", args: map[string]any{"paths": []any{"a", "b"}}, want: []string{"a", "b"}},
		{name: "keys match case-insensitively", tool: "x", args: map[string]any{"PATH": "/etc"}, want: []string{"/etc"}},
		{name: "extra keys extend the defaults", tool: "x", args: map[string]any{"dir": "d", "path": "p"}, keys: []string{"dir"}, want: []string{"p", "d"}},
		{name: "null counts as absent", tool: "x", args: map[string]any{"path": nil}},
		{name: "a number under a path key is an error", tool: "x", args: map[string]any{"path": 3.0}, wantErr: true},
		{name: "an object under a path key is an error", tool: "x", args: map[string]any{"path": map[string]any{}}, wantErr: true},
		{name: "an array with a non-string element is an error", tool: "x", args: map[string]any{"paths": []any{"a", 1.0}}, wantErr: true},
		{name: "a nested array is an error", tool: "x", args: map[string]any{"files": []any{[]any{"a"}}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Extract(tt.tool, tt.args, tt.keys)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Extract = %q, want error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("Extract = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResolveUnderTheRootMatchesAFullWalkFromSlash(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"src/pkg", "a/b"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"out": outside, "a/b/up": "../..", "loop": "loop", "rel": "src/pkg"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewResolver(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"src/pkg/x.go", "../etc/passwd", "a/b/up/src", "a/b/up/../..", "out/secret", "out/../x",
		"rel/../../..", "loop/x", "missing/../src", "src/missing/../../out/x", r.Real + "/out/y", r.Real + "/../z",
	} {
		got, gotErr := r.Resolve(p)
		full := p
		if !filepath.IsAbs(p) {
			full = r.Real + "/" + p
		}
		want, wantErr := walkFrom(nil, "/", full, full)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("Resolve(%q) = %q, %v; a walk from / gives %q, %v", p, got, gotErr, want, wantErr)
		}
	}
}
