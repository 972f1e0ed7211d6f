package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// TestTheGatewayBinaryDeniesWhenItCannotAudit runs the gateway with its
// audit output on a closed pipe, on /dev/full and in a file on a full tmpfs:
// the gateway stays alive (no SIGPIPE death), runs no tool, and is not ready.
func TestTheGatewayBinaryDeniesWhenItCannotAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws, policies := filepath.Join(tmp, "ws"), filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(policies, "agent.yaml"), []byte("apiVersion: policy.toolhooks.dev/v1alpha1\nkind: AutonomyPolicy\nmetadata: {name: agent}\nspec:\n  workspace: {root: "+ws+", only: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--policy-debounce", "10ms", "--allow-anonymous"}

	check := func(t *testing.T, g *gatewayProcess, sentinel string) {
		t.Helper()
		body := `{"sessionId":"s","tool":"write_file","arguments":{"path":"` + sentinel + `","content":"ran"}}`
		resp, err := http.Post(g.base+"/v1/tool-calls", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("the gateway did not answer (died?): %v", err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		if out["status"] != "denied" {
			t.Errorf("call answered %v, want denied", out)
		}
		if _, err := os.Stat(filepath.Join(ws, sentinel)); err == nil {
			t.Error("the tool ran although its audit record could not be written")
		}
		ready, err := http.Get(g.base + "/readyz")
		if err != nil {
			t.Fatalf("the gateway died: %v", err)
		}
		_ = ready.Body.Close()
		if ready.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/readyz answered %d, want 503", ready.StatusCode)
		}
	}

	t.Run("closed pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
		g := startGatewayOut(t, w, bin, args...)
		_ = w.Close()
		check(t, g, "pipe-sentinel")
	})
	t.Run("dev full", func(t *testing.T) {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skip(err)
		}
		defer func() { _ = full.Close() }()
		check(t, startGatewayOut(t, full, bin, args...), "full-sentinel")
	})
	t.Run("full tmpfs", func(t *testing.T) {
		mnt := filepath.Join(tmp, "tmpfs")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
			t.Skip("cannot mount a tmpfs here:", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })           // after the gateway is killed
		_ = os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, 256<<10), 0o644) // fills it (ENOSPC)
		g := startGateway(t, bin, append(args, "--audit-file", filepath.Join(mnt, "audit.log"))...)
		check(t, g, "tmpfs-sentinel")
	})
}

// TestTheAuditFileRotatesBySizeAndLosesNoRecord: with --audit-file, records
// go to the file, which is rotated at its size limit into backups; across
// the file and its backups every record is there once, whole.
func TestTheAuditFileRotatesBySizeAndLosesNoRecord(t *testing.T) {
	dir := t.TempDir()
	a := auditFlags{file: filepath.Join(dir, "audit.log"), maxSizeMB: 1, maxBackups: 10}
	sink := a.sink(io.Discard)
	const n = 6000 // about 2.5 MB of records: two rotations
	pad := strings.Repeat("x", 300)
	for i := range n {
		r := audit.Record{Phase: audit.PhaseCompleted, CallID: fmt.Sprint(i), Time: time.Now(), Tool: "read_file",
			SessionID: pad, Outcome: hooks.StatusSucceeded}
		if err := sink.Emit(context.Background(), r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "audit*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("files %v: want the file and at least two backups", files)
	}
	seen := map[string]int{}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s holds %d bytes, over the 1 MB limit", f, st.Size())
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s: a line is not a whole record: %q", f, line)
			}
			seen[fmt.Sprint(rec["callId"])]++
		}
	}
	for i := range n {
		if c := seen[fmt.Sprint(i)]; c != 1 {
			t.Errorf("record %d appears %d times across the files", i, c)
		}
	}
}
