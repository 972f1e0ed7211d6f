package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/gateway"
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

// TestAStalledAuditFileDeniesAtOnceAndRecovers runs the gateway with
// --audit-file on a FIFO whose reader stops reading. Once a write has been
// blocked past --audit-write-timeout, the gateway is live (/healthz 200) but
// not ready (/readyz 503, naming the stall), and a burst of concurrent calls
// is denied at once with rule AuditFailed: every one of them finishes
// before a deadline shorter than the twice the write timeout each used to
// wait, and no tool runs. Once the reader reads again the first blocked
// write returns, calls run and are recorded again, and the gateway is
// ready again.
func TestAStalledAuditFileDeniesAtOnceAndRecovers(t *testing.T) {
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
	fifo := filepath.Join(tmp, "audit.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The reader holds the FIFO open (so the gateway's open for writing
	// does not wait) and does not read: the smallest pipe fills after a
	// few records.
	reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Close() }()
	if rc, err := reader.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 4096) })
	}
	const writeTimeout = 3 * time.Second
	g := startGateway(t, bin, "--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--policy-debounce", "10ms",
		"--allow-anonymous", "--audit-file", fifo, "--audit-write-timeout", writeTimeout.String())

	call := func(ctx context.Context, name string) (map[string]any, error) {
		body := `{"sessionId":"s","tool":"write_file","arguments":{"path":"` + name + `","content":"ran"}}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/tool-calls", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, err
		}
		return out, nil
	}
	rule := func(out map[string]any) string {
		d, _ := out["denial"].(map[string]any)
		r, _ := d["rule"].(string)
		return r
	}
	getStatus := func(path string) (int, string) {
		resp, err := http.Get(g.base + path)
		if err != nil {
			t.Fatalf("the gateway did not answer %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(b)
	}

	// Fill the pipe: calls run until one's decision record cannot be written.
	filled := false
	for i := 0; i < 200 && !filled; i++ {
		out, err := call(context.Background(), fmt.Sprintf("fill-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		filled = out["status"] == "denied" && rule(out) == hooks.RuleAuditFailed
	}
	if !filled {
		t.Fatal("200 calls were audited into a pipe of 4 KiB nobody reads")
	}
	if code, body := getStatus("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "blocked since") {
		t.Errorf("/readyz while the audit file is stalled: %d %s, want 503 naming the stall", code, body)
	}
	if code, _ := getStatus("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the audit file is stalled: %d, want 200 (restarting would not unblock the disk)", code)
	}

	// A burst of calls against the stalled sink, each bounded by a deadline
	// each would miss had it waited for its decision record and for its
	// completion record, twice the write timeout.
	const burst = 100
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout*3/2)
	defer cancel()
	type answer struct {
		out map[string]any
		err error
	}
	answers := make(chan answer, burst)
	for i := range burst {
		go func() {
			out, err := call(ctx, fmt.Sprintf("burst-%d", i))
			answers <- answer{out, err}
		}()
	}
	finished, auditFailed := 0, 0
	for range burst {
		a := <-answers
		if a.err != nil {
			continue
		}
		finished++
		if a.out["status"] == "denied" && rule(a.out) == hooks.RuleAuditFailed {
			auditFailed++
		}
	}
	if finished != burst || auditFailed != burst {
		t.Errorf("%d of %d calls against the stalled audit file finished within %s, %d denied with rule %s; want all",
			finished, burst, writeTimeout*3/2, auditFailed, hooks.RuleAuditFailed)
	}
	for i := range burst {
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("burst-%d", i))); err == nil {
			t.Fatalf("burst-%d: the tool ran although its decision record could not be written", i)
		}
	}

	// The reader reads again: the blocked write returns and calls run.
	var got syncBuffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&got, reader); close(copied) }()
	deadline := time.Now().Add(30 * time.Second)
	var out map[string]any
	for {
		if out, err = call(context.Background(), "after"); err != nil {
			t.Fatal(err)
		}
		if out["status"] == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the reader resumed, a call still answers %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "after")); err != nil || string(b) != "ran" {
		t.Errorf("the call after recovery: %q %v", b, err)
	}
	for time.Now().Before(deadline.Add(gateway.AuditFailureHold)) {
		if code, _ := getStatus("/readyz"); code == http.StatusOK {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := getStatus("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the audit file recovered: %d %s", code, body)
	}
	// A read after recovery is the one read_file call: its record is in the file.
	body := `{"sessionId":"s","tool":"read_file","arguments":{"path":"after"}}`
	resp, err := http.Post(g.base+"/v1/tool-calls", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	_ = g.wait()
	<-copied
	if !strings.Contains(got.String(), `"msg":"Tool call","callId"`) ||
		!regexp.MustCompile(`"msg":"Tool call","callId":"[^"]+","tool":"read_file".*"outcome":"succeeded"`).MatchString(got.String()) {
		t.Errorf("the call after recovery left no record in the audit file:\n%s", got.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
