package autonomy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// benchHook has 20 forbidden globs and 20 shell command globs.
func benchHook(b *testing.B) *Hook { return newHook(b, benchConfig(b)) }

// benchConfig is benchHook's configuration, in a workspace whose path
// does not depend on the benchmark's name (as t.TempDir's does): every
// benchmark resolves paths of the same length, so their costs compare. Its
// random part is upper-case letters: digits in it would make the byte-set
// prefilter of the secretN globs pass or fail from one run to the next.
func benchConfig(b *testing.B) Config {
	name := []byte("autonomy-bench-XXXXXXXXXX")
	for i := len(name) - 10; i < len(name); i++ {
		name[i] = 'A' + byte(rand.IntN(26))
	}
	dir := filepath.Join(os.TempDir(), string(name))
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := newFixtureIn(b, dir)
	cfg := f.config()
	cfg.ForbiddenPathGlobs = nil
	cfg.AllowedShellCommands = nil
	for i := range 20 {
		cfg.ForbiddenPathGlobs = append(cfg.ForbiddenPathGlobs, fmt.Sprintf("**/secret%d/**", i))
		cfg.AllowedShellCommands = append(cfg.AllowedShellCommands, fmt.Sprintf("tool%d *", i))
	}
	cfg.AllowedShellCommands[17] = "cat *"
	cfg.AllowedShellCommands[18] = "grep *"
	cfg.AllowedShellCommands[19] = "wc *"
	return cfg
}

func benchBefore(b *testing.B, h *Hook, call *hooks.Call) {
	benchBeforeIn(b, h, call, context.Background)
}

// benchBeforeIn is benchBefore with a context from ctx per call.
func benchBeforeIn(b *testing.B, h *Hook, call *hooks.Call, ctx func() context.Context) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v, _ := h.Before(ctx(), call)
		if !v.Allowed {
			b.Fatalf("denied: %s", v.Reason)
		}
	}
}

func BenchmarkAutonomyNoPath(b *testing.B) {
	h := benchHook(b)
	benchBefore(b, h, hooks.NewCall("web_search", `{"query":"golang generics"}`))
}

func BenchmarkAutonomyReadFile(b *testing.B) {
	h := benchHook(b)
	benchBefore(b, h, hooks.NewCall("read_file", `{"path":"src/pkg/sub/x.go"}`))
}

func BenchmarkAutonomyShellPipeline(b *testing.B) {
	h := benchHook(b)
	benchBefore(b, h, hooks.NewCall("shell", `{"command":"cat src/a.go | grep foo | wc -l"}`))
}

// benchAskHook is benchHook with ask rules that the benchmarks' calls do not match.
func benchAskHook(b *testing.B) *Hook {
	cfg := benchConfig(b)
	cfg.Ask = &AskConfig{Tools: []string{"deploy_*"}, PathGlobs: []string{"deploy/**", "**/prod/**"}, Commands: []string{"git push *", "rm *"}}
	return newHook(b, cfg)
}

func BenchmarkAutonomyNoPathAskNoMatch(b *testing.B) {
	benchBefore(b, benchAskHook(b), hooks.NewCall("web_search", `{"query":"golang generics"}`))
}

func BenchmarkAutonomyReadFileAskNoMatch(b *testing.B) {
	benchBefore(b, benchAskHook(b), hooks.NewCall("read_file", `{"path":"src/pkg/sub/x.go"}`))
}

func BenchmarkAutonomyShellPipelineAskNoMatch(b *testing.B) {
	benchBefore(b, benchAskHook(b), hooks.NewCall("shell", `{"command":"cat src/a.go | grep foo | wc -l"}`))
}

// benchBeforeInExecutor is benchBefore with a path memo per call, as the
// executor gives each decision: the hook and its ask rules then look each
// path component up once.
func benchBeforeInExecutor(b *testing.B, h *Hook, call *hooks.Call) {
	benchBeforeIn(b, h, call, func() context.Context { return pathguard.WithMemo(context.Background()) })
}

func BenchmarkAutonomyReadFileInExecutor(b *testing.B) {
	benchBeforeInExecutor(b, benchHook(b), hooks.NewCall("read_file", `{"path":"src/pkg/sub/x.go"}`))
}

func BenchmarkAutonomyReadFileAskNoMatchInExecutor(b *testing.B) {
	benchBeforeInExecutor(b, benchAskHook(b), hooks.NewCall("read_file", `{"path":"src/pkg/sub/x.go"}`))
}

func BenchmarkAutonomyShellPipelineInExecutor(b *testing.B) {
	benchBeforeInExecutor(b, benchHook(b), hooks.NewCall("shell", `{"command":"cat src/a.go | grep foo | wc -l"}`))
}

func BenchmarkAutonomyShellPipelineAskNoMatchInExecutor(b *testing.B) {
	benchBeforeInExecutor(b, benchAskHook(b), hooks.NewCall("shell", `{"command":"cat src/a.go | grep foo | wc -l"}`))
}

// benchProtected runs call under benchHook with the default protected set
// and with every entry lifted: the difference is what protection costs.
func benchProtected(b *testing.B, call *hooks.Call) {
	b.Run("protected", func(b *testing.B) { benchBefore(b, benchHook(b), call) })
	b.Run("lifted", func(b *testing.B) {
		cfg := benchConfig(b)
		cfg.ProtectedPaths = &ProtectedConfig{Lift: defaultNames()}
		benchBefore(b, newHook(b, cfg), call)
	})
}

func BenchmarkAutonomyWriteFile(b *testing.B) {
	benchProtected(b, hooks.NewCall("write_file", `{"path":"src/pkg/sub/x.go","content":"package sub"}`))
}

func BenchmarkAutonomyShellRedirect(b *testing.B) {
	benchProtected(b, hooks.NewCall("shell", `{"command":"cat src/a.go | grep foo > notes.txt"}`))
}

// BenchmarkProtectedMatch is the matching a written path adds: its forms
// against the compiled default set (no file system access).
func BenchmarkProtectedMatch(b *testing.B) {
	h := newHook(b, Config{WorkspaceRoot: b.TempDir()})
	var pf pathForms
	p := h.root + "/src/pkg/sub/x.go"
	h.forms(&pf, "src/pkg/sub/x.go", h.root, p)
	b.ReportAllocs()
	for b.Loop() {
		if matchGlob(h.protected, &pf) != nil {
			b.Fatal("matched")
		}
	}
}
