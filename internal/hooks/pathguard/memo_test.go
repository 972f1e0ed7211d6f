package pathguard

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoGivesTheSameResults resolves adversarial paths with and without a
// memo, twice with the memo (the second time from it), and expects the same
// paths and errors every time.
func TestMemoGivesTheSameResults(t *testing.T) {
	ws, _ := workspace(t)
	r, err := NewResolver(ws)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"src/a.go", "in/a.go", "out/secret", "loop1/x", "up/ws/src", "src/a.go/x", "missing/../src",
		"in/../in/a.go", "/etc/passwd", r.Real + "/out/../src", "src//./a.go/"}
	var m Memo
	for round := range 2 {
		for _, p := range paths {
			want, wantErr := r.Resolve(p)
			got, gotErr := r.ResolveFromMemo(&m, r.Real, p)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("round %d: ResolveFromMemo(%q) = %q, %v; without a memo %q, %v", round, p, got, gotErr, want, wantErr)
			}
		}
	}
	if m.Len() == 0 {
		t.Fatal("the memo remembered no lookup")
	}
}

// TestMemoIsPerDecision shows what the memo trades: within one memo a
// retargeted symlink is not seen (one decision sees one file system state),
// and a new memo, as every call gets, sees the new target.
func TestMemoIsPerDecision(t *testing.T) {
	ws, outside := workspace(t)
	r, err := NewResolver(ws)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(r.Real, "link")
	if err := os.Symlink("src", link); err != nil {
		t.Fatal(err)
	}
	ctx := WithMemo(context.Background())
	m := MemoFrom(ctx)
	if m == nil || MemoFrom(context.Background()) != nil {
		t.Fatal("MemoFrom does not find exactly the memo WithMemo installed")
	}
	first, err := r.ResolveMemo(m, "link/a.go")
	if err != nil || first != filepath.Join(r.Real, "src", "a.go") {
		t.Fatalf("link/a.go = %q, %v", first, err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if again, _ := r.ResolveMemo(m, "link/a.go"); again != first {
		t.Errorf("within one memo: %q, want the first lookup's %q", again, first)
	}
	fresh, err := r.ResolveMemo(MemoFrom(WithMemo(context.Background())), "link/a.go")
	if err != nil || fresh != filepath.Join(outside, "a.go") {
		t.Errorf("with a new memo: %q, %v; want the new target %q", fresh, err, filepath.Join(outside, "a.go"))
	}
}

// TestMemoIsBounded fills a memo past MaxMemoEntries and checks that it
// stops growing and still resolves correctly.
func TestMemoIsBounded(t *testing.T) {
	ws, _ := workspace(t)
	r, err := NewResolver(ws)
	if err != nil {
		t.Fatal(err)
	}
	var m Memo
	for i := range MaxMemoEntries + 10 {
		p := filepath.Join("src", "missing-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		got, err := r.ResolveMemo(&m, p)
		if err != nil || got != filepath.Join(r.Real, p) {
			t.Fatalf("%q = %q, %v", p, got, err)
		}
	}
	if n := m.Len(); n != MaxMemoEntries {
		t.Fatalf("the memo holds %d lookups, want the bound %d", n, MaxMemoEntries)
	}
	if got, err := r.ResolveMemo(&m, "in/a.go"); err != nil || got != filepath.Join(r.Real, "src", "a.go") {
		t.Fatalf("in/a.go with a full memo = %q, %v", got, err)
	}
}

// FuzzClean checks Clean against filepath.Clean for any input.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"/", "//", "/a", "/a/", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/.a/..b/...", "a/b", "", ".", "/a/b/c.go"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := Clean(p), filepath.Clean(p); got != want {
			t.Fatalf("Clean(%q) = %q, filepath.Clean gives %q", p, got, want)
		}
	})
}

// FuzzJoin checks that join always returns cur + "/" + c (or "/" + c),
// whether or not it can reuse orig.
func FuzzJoin(f *testing.F) {
	for _, s := range [][3]string{{"/w/src/a.go", "/w", "src"}, {"/w/src/a.go", "/", "w"}, {"/w/src", "/w/src", "a.go"},
		{"/w/srcx", "/w", "src"}, {"/x/src", "/w", "src"}, {"", "/", ""}, {"/", "/", ""}, {"/a", "/", "ab"}, {"w/src", "w", "src"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, orig, cur, c string) {
		want := cur + "/" + c
		if cur == "/" {
			want = "/" + c
		}
		if got := join(orig, cur, c); got != want {
			t.Fatalf("join(%q, %q, %q) = %q, want %q", orig, cur, c, got, want)
		}
	})
}

func TestLookupFSKinds(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		kind   lookupKind
		target string
		err    bool
	}{
		{dir, kindOther, "", false},
		{file, kindOther, "", false},
		{filepath.Join(dir, "l"), kindSymlink, "f", false},
		{filepath.Join(dir, "missing"), kindMissing, "", false},
		{filepath.Join(file, "under-a-file"), 0, "", true}, // ENOTDIR is not "missing"
		{filepath.Join(dir, string(make([]byte, 300))), 0, "", true},
	} {
		kind, target, err := lookupFS(c.path)
		if kind != c.kind || target != c.target || (err != nil) != c.err {
			t.Errorf("lookupFS(%q) = %v, %q, %v; want %v, %q, error %v", c.path, kind, target, err, c.kind, c.target, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "lstat "+c.path) {
			t.Errorf("lookupFS(%q) error %q does not name the lookup", c.path, err)
		}
	}
}
