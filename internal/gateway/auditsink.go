package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// AuditFailureHold is how long the gateway stays not ready after a failed
// audit write: traffic comes back after it, and the next failure takes the
// gateway out again (every call whose record fails is denied meanwhile).
const AuditFailureHold = 10 * time.Second

// auditHealth wraps the audit sink: it counts failed writes
// (toolhooks_audit_write_errors_total) and says whether the sink is healthy.
type auditHealth struct {
	sink     audit.Sink
	errs     prometheus.Counter
	lastFail atomic.Pointer[auditFailure]
}

type auditFailure struct {
	at  time.Time
	err error
}

func (h *auditHealth) Emit(ctx context.Context, r audit.Record) error {
	err := h.sink.Emit(ctx, r)
	if err != nil {
		h.errs.Inc()
		h.lastFail.Store(&auditFailure{at: time.Now(), err: err})
	}
	return err
}

// notReady says why the sink makes the gateway not ready, or is empty.
func (h *auditHealth) notReady() string {
	if hs, ok := h.sink.(interface{ Healthy() error }); ok {
		if err := hs.Healthy(); err != nil {
			return fmt.Sprintf("the audit sink is failing, so calls are denied: %v", err)
		}
	}
	if f := h.lastFail.Load(); f != nil && time.Since(f.at) < AuditFailureHold {
		return fmt.Sprintf("an audit write failed at %s, so its call was denied: %v", f.at.UTC().Format(time.RFC3339), f.err)
	}
	return ""
}
