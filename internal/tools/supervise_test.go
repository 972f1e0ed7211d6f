package tools_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// alive lists the host's processes whose command line holds tok.
func alive(tok string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), tok) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func TestShellEndsWhatACommandLeavesRunningAndSaysSo(t *testing.T) {
	ws, tl := workspace(t, tools.Options{})
	tok := fmt.Sprintf("2000%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
	// A session of its own, a double fork and a disowned nohup job, each of
	// which would still be running (and writing the sentinel) afterwards.
	cmd := fmt.Sprintf(`bash -c 'setsid sleep %[1]s & (sleep %[1]s &); nohup sh -c "sleep %[1]s; echo late > sentinel" >/dev/null 2>&1 & disown; echo started'`, tok)
	out := run(t, tl[tools.Shell], map[string]any{"command": cmd})
	if !regexp.MustCompile(`^started\n\[[0-9]+ processes left running were ended\]\n$`).MatchString(out) {
		t.Errorf("output %q", out)
	}
	if left := alive(tok); len(left) > 0 {
		t.Errorf("still running after the call: %v", left)
	}
	if _, err := os.Stat(filepath.Join(ws, "sentinel")); err == nil {
		t.Error("a process left behind wrote the sentinel")
	}
	// A command that leaves nothing behind gets no note.
	if out := run(t, tl[tools.Shell], map[string]any{"command": "bash -c 'sleep 0 & wait; echo done'"}); out != "done\n" {
		t.Errorf("output %q", out)
	}
}

func TestShellEndsACommandThatExceedsALimitAndKeepsServing(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{Limits: sandbox.Limits{CPUTime: time.Second, FileSize: 1 << 16}})
	if err != nil {
		t.Fatal(err)
	}
	ws, tl := workspace(t, tools.Options{Sandbox: sb})
	tok := fmt.Sprintf("3000%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
	out := run(t, tl[tools.Shell], map[string]any{"command": "sh -c 'sleep " + tok + " & while :; do :; done'; echo after"})
	if !strings.HasPrefix(out, "Error: ") || !strings.Contains(out, "sh exceeded its CPU time limit") ||
		!strings.Contains(out, "1 process left running was ended") || strings.Contains(out, "after") {
		t.Errorf("output %q", out)
	}
	if left := alive(tok); len(left) > 0 {
		t.Errorf("still running after the call: %v", left)
	}
	out = run(t, tl[tools.Shell], map[string]any{"command": "head -c 100000 /dev/zero > big"})
	if !strings.Contains(out, "head exceeded its file size limit") {
		t.Errorf("output %q", out)
	}
	if st, err := os.Stat(filepath.Join(ws, "big")); err != nil || st.Size() > 1<<16 {
		t.Errorf("the file written: %v %v", st, err)
	}
	if out := run(t, tl[tools.Shell], map[string]any{"command": "echo still serving"}); out != "still serving\n" {
		t.Errorf("the next call: %q", out)
	}
}
