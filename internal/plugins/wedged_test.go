package plugins

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A plugin whose event loop is stuck in a busy loop is killed (its whole
// process group) after MaxTimeouts consecutive timeouts and restarted.
func TestWedgedPluginIsKilledAndRestarted(t *testing.T) {
	m := newManager(t, Options{RestartBackoff: 20 * time.Millisecond, MaxTimeouts: 2})
	pids := filepath.Join(t.TempDir(), "pids.log")
	h := spec("wedged", Spec{TimeoutMillis: 200, Stdio: nodePlugin(t, "wedged.mjs", map[string]string{"PID_LOG": pids})})
	hk := build(t, m, h)
	ctx := context.Background()
	eventually(t, "the plugin answers", func() bool { // the first start may take longer than the timeout
		v, err := hk.Before(ctx, newCall("read_file", `{}`))
		return err == nil && v.Allowed
	})
	first, err := strconv.Atoi(readLines(t, pids)[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = hk.Before(ctx, newCall("wedge", `{}`))
	wantKind(t, err, KindTimeout)
	_, err = hk.Before(ctx, newCall("read_file", `{}`))
	wantKind(t, err, KindTimeout)
	eventually(t, "the wedged process is gone", func() bool {
		return syscall.Kill(first, 0) == syscall.ESRCH
	})
	eventually(t, "a new process answers", func() bool {
		v, err := hk.Before(ctx, newCall("read_file", `{}`))
		return err == nil && v.Allowed
	})
	if starts := readLines(t, pids); len(starts) < 2 || starts[0] == starts[len(starts)-1] {
		t.Errorf("plugin starts %q, want a new process", starts)
	}
}
