package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// switchApprover answers every request with its current state and records
// whether the caller waited.
type switchApprover struct {
	mu    sync.Mutex
	state hooks.ApprovalState
	waits []bool
}

func (a *switchApprover) RequestApproval(_ context.Context, req hooks.ApprovalRequest) (hooks.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waits = append(a.waits, req.Wait)
	return hooks.Approval{Name: "write-file-abc12", State: a.state, DecidedBy: "carol"}, nil
}

func (a *switchApprover) set(s hooks.ApprovalState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state = s
}

// TestAskedCallsThroughTheHTTPAPIs checks how the HTTP APIs answer a
// call a policy asks a person to approve, and that only an approved call
// writes its file.
func TestAskedCallsThroughTheHTTPAPIs(t *testing.T) {
	a := &switchApprover{state: hooks.ApprovalPending}
	e := newEnv(t, func(o *gateway.Options) { o.Approver = a })
	e.mustPush(compileYAML(t, e.ws, basePolicy+`
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: releases, namespace: default}
spec:
  ask: {pathGlobs: ["release/**"]}
`))
	args := `{"path":"release/NOTES.md","content":"v1"}`
	written := func() bool {
		_, err := os.Stat(filepath.Join(e.ws, "release/NOTES.md"))
		return err == nil
	}

	d := e.decide("write_file", args)
	if d.Allowed || d.Decision != wire.DecisionAsk || d.Ask == nil || d.Ask.Rule != "askPathGlobs" ||
		d.Approval == nil || d.Approval.Name != "write-file-abc12" || d.Approval.State != "Pending" {
		t.Fatalf("/v1/decisions = %+v", d)
	}
	r := e.call("write_file", args)
	if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != hooks.RuleApprovalPending || r.Approval == nil ||
		!strings.Contains(r.Denial.Reason, "write-file-abc12") || written() {
		t.Fatalf("/v1/tool-calls = %+v %+v, file written %v", r, r.Denial, written())
	}

	a.set(hooks.ApprovalApproved)
	if r := e.call("write_file", args); r.Status != "succeeded" || r.Approval == nil || r.Approval.DecidedBy != "carol" || !written() {
		t.Fatalf("approved call = %+v, file written %v", r, written())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waits) != 3 || a.waits[0] || !a.waits[1] || !a.waits[2] {
		t.Fatalf("waits %v: /v1/decisions must answer at once, the others wait", a.waits)
	}
	rec := e.audit.Records()
	last := rec[len(rec)-1]
	if last.Approval == nil || last.Approval.DecidedBy != "carol" || last.Ask == nil || last.Outcome != hooks.StatusSucceeded {
		t.Fatalf("the approved call's audit record %+v", last)
	}
}
