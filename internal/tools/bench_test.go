package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/tools"
)

// benchShell measures one shell tool call running command in a workspace
// whose src directory holds a few files.
func benchShell(b *testing.B, command string) {
	ws := b.TempDir()
	for _, n := range []string{"a.go", "b.go", "c.txt", "d.go"} {
		p := filepath.Join(ws, "src", n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	list, err := tools.Builtins(ws, tools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	sh := list[4]
	ctx := guarded(b, context.Background())
	args := map[string]any{"command": command}
	b.ReportAllocs()
	for b.Loop() {
		out, err := sh.Execute(ctx, args)
		if err != nil || strings.HasPrefix(out, "Error") || strings.Contains(out, "exit status") {
			b.Fatalf("%q: %q %v", command, out, err)
		}
	}
}

// BenchmarkShellLsWc is the target: `ls src | wc -l`.
func BenchmarkShellLsWc(b *testing.B) { benchShell(b, "ls src | wc -l") }

// BenchmarkShellPipeline3 is a three-command pipeline.
func BenchmarkShellPipeline3(b *testing.B) { benchShell(b, "ls src | grep go | wc -l") }
