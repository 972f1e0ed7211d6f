package gateway_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// A gateway whose audit output fails (a full device, a pipe nobody reads)
// runs no tool, counts the failures and is not ready.
func TestAFailingAuditSinkDeniesCallsAndMakesTheGatewayNotReady(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	t.Cleanup(func() { _ = full.Close() })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	_, _ = unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096)
	for name, sink := range map[string]audit.Sink{
		"/dev/full":    audit.NewJSONSink(full, audit.WithWriteTimeout(time.Second)),
		"stalled pipe": audit.NewJSONSink(w, audit.WithWriteTimeout(50*time.Millisecond)),
	} {
		t.Run(strings.TrimPrefix(name, "/"), func(t *testing.T) {
			e := newEnv(t, func(o *gateway.Options) { o.Audit = sink })
			e.mustPush(compileYAML(t, e.ws, basePolicy))
			var denied bool
			for i := 0; i < 200 && !denied; i++ { // the stalled pipe takes a few records first
				r := e.call("read_file", `{"path":"README.md"}`)
				denied = r.Status == "denied"
				if denied && (r.Denial.Rule != "AuditFailed" || r.Denial.Hook != audit.Name) {
					t.Errorf("denial %+v", r.Denial)
				}
			}
			if !denied {
				t.Fatal("calls kept being allowed while the audit sink failed")
			}
			if r, ran := e.sentinelCall("sentinel"); ran || r.Status != "denied" {
				t.Errorf("the tool ran without its audit record: %+v", r)
			}
			if e.srv.Ready() || !strings.Contains(e.srv.NotReadyReason(), "audit") {
				t.Errorf("ready=%v reason=%q, want not ready because of the audit sink", e.srv.Ready(), e.srv.NotReadyReason())
			}
			if m := e.metrics(); !strings.Contains(m, "toolhooks_audit_write_errors_total ") || strings.Contains(m, "toolhooks_audit_write_errors_total 0\n") {
				t.Errorf("toolhooks_audit_write_errors_total not counted:\n%s", grepLines(m, "toolhooks_audit"))
			}
		})
	}
}
