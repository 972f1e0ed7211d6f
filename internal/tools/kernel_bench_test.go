package tools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// largeWorkspace writes a workspace of n files, 100 per directory in
// directories two levels deep, with a forbidden .env and secrets directory
// at the root (so the root is split) and a .git directory.
func largeWorkspace(b *testing.B, n int) string {
	b.Helper()
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{".env", "secrets/key", ".git/config", ".git/HEAD", "go.mod"} {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		dir := filepath.Join(ws, "pkg"+strconv.Itoa(i/1000), "d"+strconv.Itoa(i/100%10))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".go"), []byte("package p\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// What changes in the workspace before every call of benchLargeWorkspace.
const (
	changeNothing = "hit"       // the cached rules are used as they are
	changeNewFile = "new-file"  // a file appears at the root: the rules gain one
	changeNewDir  = "new-dir"   // a directory appears at the root: it alone is walked
	changeRename  = "full-walk" // a directory is renamed: the workspace is walked again
)

// benchLargeWorkspace measures shell calls through an executor with a
// coder-like Autonomy policy in the workspace ws, with change made before
// every call. It reports the median call (p50-ms) and the gateway's CPU
// per call.
func benchLargeWorkspace(b *testing.B, ws, change string) {
	auto, err := autonomy.New(autonomy.Config{WorkspaceRoot: ws, WorkspaceOnly: true, AllowShell: true,
		AllowedShellCommands: []string{"*"}, ForbiddenPathGlobs: []string{"**/.env", "**/secrets/**", "/etc/**"}})
	if err != nil {
		b.Fatal(err)
	}
	list, err := tools.Builtins(ws, tools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ex, err := hooks.NewExecutor([]hooks.Entry{{Hook: auto}}, list)
	if err != nil {
		b.Fatal(err)
	}
	call := func() {
		res := ex.Execute(context.Background(), hooks.NewCall(tools.Shell, `{"command":"/bin/true"}`))
		if res.Status != hooks.StatusSucceeded || res.Failed {
			b.Fatalf("%+v", res)
		}
	}
	call() // the first call computes what later ones may reuse
	var times []time.Duration
	defer reportCPU(b)()
	i := 0
	for b.Loop() {
		if change != changeNothing {
			b.StopTimer()
			i++
			p := filepath.Join(ws, fmt.Sprintf("new%d-%d", time.Now().UnixNano(), i))
			var err error
			switch change {
			case changeNewDir:
				err = os.Mkdir(p, 0o755)
			case changeRename:
				from, to := filepath.Join(ws, "pkg0"), filepath.Join(ws, "pkg0-renamed")
				if i%2 == 0 {
					from, to = to, from
				}
				err = os.Rename(from, to)
			default:
				err = os.WriteFile(p, nil, 0o644)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		start := time.Now()
		call()
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkShellLargeWorkspace is /bin/true (a program, not the builtin)
// through the executor in workspaces of 10,000 and 100,000 files, with the
// kernel rules cached (hit), cached and extended by one file (new-file) or
// one directory (new-dir), and computed again by walking the whole
// workspace (full-walk).
func BenchmarkShellLargeWorkspace(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		ws := largeWorkspace(b, n)
		for _, change := range []string{changeNothing, changeNewFile, changeNewDir, changeRename} {
			b.Run(fmt.Sprintf("files=%d/%s", n, change), func(b *testing.B) { benchLargeWorkspace(b, ws, change) })
		}
	}
}
