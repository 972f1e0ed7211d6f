package resultscan

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Go standard library's own source is a corpus of ordinary code: the
// secrets rules must find nothing in its non-test files. Test files and
// testdata hold deliberate fixtures (test keys, sample tokens); their
// findings are counted and reported, not failed on.
func TestGoSourceIsNotASecret(t *testing.T) {
	if testing.Short() {
		t.Skip("reads GOROOT/src")
	}
	root := filepath.Join(goroot(t), "src")
	s := mustNew(t, Config{Detectors: []string{SetSecrets}})
	var files, bytes, fixtureFiles, fixtureHits int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		o, err := s.Scan(context.Background(), string(b))
		if err != nil {
			return err
		}
		fixture := strings.HasSuffix(path, "_test.go") || strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator))
		if fixture {
			if len(o.Findings) > 0 {
				fixtureFiles++
				fixtureHits += len(o.Findings)
			}
			return nil
		}
		files++
		bytes += len(b)
		for _, f := range o.Findings {
			t.Errorf("%s: %d match(es) of %s", strings.TrimPrefix(path, root+"/"), f.Count, f.Rule)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 1000 {
		t.Fatalf("only %d source files under %s", files, root)
	}
	t.Logf("%d non-test files (%.1f MB) of GOROOT/src scanned; test files with fixtures that match: %d (%d rules fired)",
		files, float64(bytes)/1e6, fixtureFiles, fixtureHits)
}

// goroot is the GOROOT of the go command on PATH (the one running the tests).
func goroot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}
