package tools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// A symlink swapped between the policy check and the open, many times over,
// never lets a file tool read or write outside the workspace or a forbidden
// file: the open itself stays beneath the workspace (openat2) and the real
// path of what was opened is checked again.
func TestASymlinkSwappedAfterTheCheckNeverEscapes(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for p, body := range map[string]string{
		filepath.Join(ws, "inside.txt"):       "inside\n",
		filepath.Join(ws, ".env"):             "SECRET=env\n",
		filepath.Join(dir, "outside.txt"):     "SECRET=outside\n",
		filepath.Join(ws, "sub", "keep.txt"):  "k\n",
		filepath.Join(ws, "d", "f.txt"):       "inside\n",
		filepath.Join(ws, "secrets", "f.txt"): "SECRET=dir\n",
		filepath.Join(dir, "out", "f.txt"):    "SECRET=outdir\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	auto, err := autonomy.New(autonomy.Config{WorkspaceRoot: ws, WorkspaceOnly: true, ForbiddenPathGlobs: []string{"**/.env", "secrets/**"}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := tools.Builtins(ws, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := hooks.NewExecutor([]hooks.Entry{{Hook: auto}}, list)
	if err != nil {
		t.Fatal(err)
	}
	swap := func(name string, targets ...string) {
		for i := 0; ; i++ {
			tmp := filepath.Join(ws, fmt.Sprintf(".swap-%s-%d", name, i%2))
			_ = os.Remove(tmp)
			if err := os.Symlink(targets[i%len(targets)], tmp); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, filepath.Join(ws, name)); err != nil {
				t.Error(err)
				return
			}
			if i%64 == 0 && stop.Load() {
				return
			}
		}
	}
	for name, target := range map[string]string{"link": "inside.txt", "dlink": "sub"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	// d is a real directory the checks see, exchanged atomically with a
	// symlink to the forbidden directory or to one outside the workspace.
	for _, target := range []string{"secrets", "../out"} {
		_ = os.Remove(filepath.Join(ws, "dswap"))
		if err := os.Symlink(target, filepath.Join(ws, "dswap")); err != nil {
			t.Fatal(err)
		}
	}
	exchange := func() {
		for i := 0; ; i++ {
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "d"), unix.AT_FDCWD, filepath.Join(ws, "dswap"), unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			if i%64 == 0 && stop.Load() {
				return
			}
		}
	}
	stop.Store(false)
	var wg sync.WaitGroup
	wg.Go(exchange)
	wg.Go(func() { swap("link", "inside.txt", ".env", "../outside.txt", filepath.Join(dir, "outside.txt")) })
	wg.Go(func() { swap("dlink", "sub", "..", dir) })
	iterations := 2000
	if testing.Short() {
		iterations = 200
	}
	var reads, denied int
	for i := range iterations {
		res := exec.Execute(context.Background(), hooks.NewCall(tools.ReadFile, `{"path":"link"}`))
		if strings.Contains(res.Output, "SECRET") {
			t.Fatalf("iteration %d read %q", i, res.Output)
		}
		if res.Output == "inside\n" {
			reads++
		}
		if res.Status == hooks.StatusDenied {
			denied++
		}
		res = exec.Execute(context.Background(), hooks.NewCall(tools.ReadFile, `{"path":"d/f.txt"}`))
		if strings.Contains(res.Output, "SECRET") {
			t.Fatalf("iteration %d read %q", i, res.Output)
		}
		res = exec.Execute(context.Background(), hooks.NewCall(tools.WriteFile, fmt.Sprintf(`{"path":"dlink/w%d.txt","content":"w"}`, i%4)))
		_ = res
		res = exec.Execute(context.Background(), hooks.NewCall(tools.ListDir, `{"path":"dlink"}`))
		if strings.Contains(res.Output, "outside.txt") {
			t.Fatalf("iteration %d listed outside: %q", i, res.Output)
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, p := range []string{filepath.Join(dir, "w0.txt"), filepath.Join(dir, "w1.txt"), filepath.Join(filepath.Dir(dir), "w0.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a write escaped to %s", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".env")); string(b) != "SECRET=env\n" {
		t.Errorf(".env changed: %q", b)
	}
	// The race was real: both outcomes happened.
	t.Logf("reads %d, denials %d, other outcomes %d of %d", reads, denied, iterations-reads-denied, iterations)
	if reads == 0 || denied == 0 {
		t.Error("the swaps never raced the calls")
	}
}

var stop atomic.Bool

// swapOnCheck denies the forbidden directory and, on its first check,
// exchanges the checked directory with a symlink to it: the race of the test
// above, made certain.
type swapOnCheck struct {
	ws      string
	swapped atomic.Bool
}

func (h *swapOnCheck) Name() string { return "swap" }
func (h *swapOnCheck) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (h *swapOnCheck) After(context.Context, *hooks.Call, *hooks.Result) {}
func (h *swapOnCheck) CheckExec(context.Context, *hooks.Call, string, []string, []string) hooks.Verdict {
	return hooks.Allow
}
func (h *swapOnCheck) CheckOpen(_ context.Context, _ *hooks.Call, path string, _ bool) hooks.Verdict {
	if strings.Contains(path, "/secrets") {
		return hooks.Deny("forbidden", path)
	}
	if !h.swapped.Swap(true) {
		_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(h.ws, "d"), unix.AT_FDCWD, filepath.Join(h.ws, "dswap"), unix.RENAME_EXCHANGE)
	}
	return hooks.Allow
}

func TestWhatWasOpenedIsCheckedAgainByItsRealPath(t *testing.T) {
	for _, tc := range []struct{ tool, args string }{
		{tools.ReadFile, `{"path":"d/f.txt"}`},
		{tools.ListDir, `{"path":"d"}`},
		{tools.EditFile, `{"path":"d/f.txt","old_string":"SECRET","new_string":"gone"}`},
		{tools.WriteFile, `{"path":"d/f.txt","content":"overwritten"}`},
		{tools.Shell, `{"command":"[ -s d/f.txt ] && echo SECRET-exists"}`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			ws := t.TempDir()
			for p, body := range map[string]string{"d/f.txt": "inside\n", "secrets/f.txt": "SECRET=dir\n"} {
				if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("secrets", filepath.Join(ws, "dswap")); err != nil {
				t.Fatal(err)
			}
			list, err := tools.Builtins(ws, tools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			h := &swapOnCheck{ws: ws}
			exec, err := hooks.NewExecutor([]hooks.Entry{{Hook: h}}, list)
			if err != nil {
				t.Fatal(err)
			}
			res := exec.Execute(context.Background(), hooks.NewCall(tc.tool, tc.args))
			if !h.swapped.Load() {
				t.Fatal("the swap did not happen")
			}
			if res.Status != hooks.StatusDenied || strings.Contains(res.Output, "SECRET") {
				t.Errorf("got %+v", res)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "secrets/f.txt")); string(b) != "SECRET=dir\n" {
				t.Errorf("the forbidden file changed: %q", b)
			}
		})
	}
}
