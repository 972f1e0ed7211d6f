package policyfile_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/config/samples"
	"github.com/toolhooks/toolhooks/internal/policyfile"
)

// BenchmarkLoadDir reads a directory of 200 policy files, the shipped
// samples renamed, as the gateway's standalone mode does on every change.
// Run with -benchtime=1x in a fresh process to see the first load, which
// also compiles the CRDs' schemas and CEL rules.
func BenchmarkLoadDir(b *testing.B) {
	const files = 200
	names, err := fs.Glob(samples.FS, "policy_*.yaml")
	if err != nil || len(names) == 0 {
		b.Fatalf("no samples: %v", err)
	}
	dir := b.TempDir()
	for i := range files {
		data, err := samples.FS.ReadFile(names[i%len(names)])
		if err != nil {
			b.Fatal(err)
		}
		doc := strings.Replace(string(data), "\n  name: ", fmt.Sprintf("\n  name: n%03d-", i), 1)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("p%03d.yaml", i)), []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := policyfile.LoadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		if n := p.Len(); n != files {
			b.Fatalf("loaded %d objects, want %d", n, files)
		}
	}
}
