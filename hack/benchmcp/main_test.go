package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if serveRole() { // re-executed as the upstream or the bare go-sdk proxy
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunAgainstRealGateway builds the gateway and runs a short open-loop
// and closed-loop measurement through it: every call succeeds, latencies and
// the gateway's counters are filled in, and the table has a row per shape.
func TestRunAgainstRealGateway(t *testing.T) {
	gw := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", gw, "../../cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, out)
	}
	var table strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	rows, err := run(ctx, options{gateway: gw, audit: auditLog, sessions: 4,
		sdkProxy: true, rates: []int{100}, inflight: []int{2}, duration: 500 * time.Millisecond, warmup: 100 * time.Millisecond,
		out: &table, progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(rows), table.String())
	}
	for _, r := range rows {
		for name, res := range map[string]result{"direct": r.direct, "sdk proxy": r.proxy, "gated": r.gated} {
			if res.calls == 0 || res.errors != 0 || res.p50 <= 0 || res.p99 < res.p50 || res.max < res.p99 {
				t.Errorf("%s %s: %+v", r.shape, name, res)
			}
		}
		if r.gated.gatewayAllocKB <= 0 || r.gated.gatewaySwitches <= 0 || r.proxy.gatewaySwitches <= 0 {
			t.Errorf("%s: gateway counters not read: %+v", r.shape, r.gated)
		}
	}
	// Open loop at 100/s for 0.5 s schedules 50 calls.
	if got := rows[0].gated.calls + rows[0].gated.dropped; got != 50 {
		t.Errorf("open loop scheduled %d calls, want 50", got)
	}
	if !strings.Contains(table.String(), "| open 100/s |") || !strings.Contains(table.String(), "| closed 2 in flight |") {
		t.Errorf("table:\n%s", table.String())
	}
	// The gated calls went through the hook chain: each has an audit record.
	b, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	measured := 0
	for _, r := range rows {
		measured += r.gated.calls
	}
	if n := strings.Count(string(b), `"up_echo"`); n < measured {
		t.Errorf("%d audit records of up_echo, want at least the %d measured calls", n, measured)
	}
}

func TestInts(t *testing.T) {
	got, err := ints(" 250, 500,,1000 ")
	if err != nil || len(got) != 3 || got[0] != 250 || got[2] != 1000 {
		t.Errorf("ints: %v, %v", got, err)
	}
	for _, bad := range []string{"0", "-1", "x", "1.5"} {
		if _, err := ints(bad); err == nil {
			t.Errorf("ints(%q): no error", bad)
		}
	}
}
