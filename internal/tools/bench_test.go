package tools_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// benchShell measures one shell tool call running command in a workspace
// whose src directory holds a few files.
func benchShell(b *testing.B, command string, opts tools.Options) {
	ws := benchWorkspace(b)
	list, err := tools.Builtins(ws, opts)
	if err != nil {
		b.Fatal(err)
	}
	sh := list[4]
	ctx := guarded(b, context.Background())
	args := map[string]any{"command": command}
	defer reportCPU(b)()
	b.ReportAllocs()
	for b.Loop() {
		out, err := sh.Execute(ctx, args)
		if err != nil || strings.HasPrefix(out, "Error") || strings.Contains(out, "exit status") {
			b.Fatalf("%q: %q %v", command, out, err)
		}
	}
}

// benchWorkspace is a workspace whose src directory holds a few files.
func benchWorkspace(b *testing.B) string {
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
	return ws
}

// benchBinSh runs command the way the shell tool once did, as /bin/sh -c
// in the workspace, unconfined: the baseline of the figures above.
func benchBinSh(b *testing.B, command string) {
	ws := benchWorkspace(b)
	defer reportCPU(b)()
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%q: %q %v", command, out, err)
		}
	}
}

// BenchmarkShellLsWcBinSh is `ls src | wc -l` under /bin/sh -c.
func BenchmarkShellLsWcBinSh(b *testing.B) { benchBinSh(b, "ls src | wc -l") }

// BenchmarkShellPipeline3BinSh is the three-command pipeline under /bin/sh -c.
func BenchmarkShellPipeline3BinSh(b *testing.B) { benchBinSh(b, "ls src | grep go | wc -l") }

// BenchmarkShellLsWc is `ls src | wc -l`, each command started confined.
func BenchmarkShellLsWc(b *testing.B) { benchShell(b, "ls src | wc -l", tools.Options{}) }

// BenchmarkShellPipeline3 is a three-command pipeline, started confined.
func BenchmarkShellPipeline3(b *testing.B) {
	benchShell(b, "ls src | grep go | wc -l", tools.Options{})
}

// BenchmarkShellLsWcUnconfined isolates the interpreter from Landlock.
func BenchmarkShellLsWcUnconfined(b *testing.B) {
	benchShell(b, "ls src | wc -l", tools.Options{Sandbox: sandboxOff(b)})
}

// BenchmarkShellPipeline3Unconfined isolates the interpreter from Landlock.
func BenchmarkShellPipeline3Unconfined(b *testing.B) {
	benchShell(b, "ls src | grep go | wc -l", tools.Options{Sandbox: sandboxOff(b)})
}

// BenchmarkShellLsWcSmallSupervisor runs the programs under the supervisor
// the image ships (cmd/toolhooks-sandbox) rather than this test binary.
func BenchmarkShellLsWcSmallSupervisor(b *testing.B) {
	p := filepath.Join(b.TempDir(), sandbox.SupervisorName)
	if out, err := exec.Command("go", "build", "-ldflags=-s", "-o", p, "github.com/toolhooks/toolhooks/cmd/toolhooks-sandbox").CombinedOutput(); err != nil {
		b.Fatalf("building the supervisor: %v\n%s", err, out)
	}
	s, err := sandbox.New(sandbox.Config{Supervisor: p})
	if err != nil {
		b.Fatal(err)
	}
	benchShell(b, "ls src | wc -l", tools.Options{Sandbox: s})
}

func sandboxOff(b *testing.B) *sandbox.Sandbox {
	s, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeOff})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// reportCPU reports the CPU time this process (not its children) spent per
// operation, which a loaded machine disturbs far less than wall time.
func reportCPU(b *testing.B) func() {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	return func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		ns := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
		b.ReportMetric(float64(ns(end)-ns(start))/float64(b.N), "cpu-ns/op")
	}
}
