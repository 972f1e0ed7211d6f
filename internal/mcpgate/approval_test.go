package mcpgate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// approvals answers every request for approval with its current state.
type approvals struct {
	mu    sync.Mutex
	state hooks.ApprovalState
	reqs  []hooks.ApprovalRequest
}

func (a *approvals) RequestApproval(_ context.Context, req hooks.ApprovalRequest) (hooks.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, req)
	return hooks.Approval{Name: "write-file-x7k2p", State: a.state, DecidedBy: "carol", Reason: "release day"}, nil
}

func (a *approvals) set(s hooks.ApprovalState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state = s
}

const askPolicy = codingPolicy + `---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: releases}
spec:
  ask: {pathGlobs: ["release/**"]}
`

// An MCP tools/call that a policy asks a person to approve waits for the
// decision; while nobody has decided it is an error naming the approval
// (rule approvalPending) and nothing runs; once approved the same call
// runs, and a denial's reason reaches the caller.
func TestAskedCallsOverMCP(t *testing.T) {
	a := &approvals{state: hooks.ApprovalPending}
	e := newEnv(t, envOptions{approver: a})
	e.apply(askPolicy)
	cs := connect(t, e.url, aliceToken)
	args := `{"path":"release/NOTES.md","content":"v1"}`
	written := func() bool {
		_, err := os.Stat(filepath.Join(e.ws, "release", "NOTES.md"))
		return err == nil
	}

	res := call(t, cs, "write_file", args)
	d := denialOf(t, res)
	if !res.IsError || d == nil || d.Rule != hooks.RuleApprovalPending || !strings.Contains(text(res), "write-file-x7k2p") || written() {
		t.Fatalf("pending: isError=%v denial=%+v text=%q written=%v", res.IsError, d, text(res), written())
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusDenied || rec.Approval == nil || rec.Approval.Name != "write-file-x7k2p" {
		t.Fatalf("audit of the pending call: %+v", rec)
	}

	a.set(hooks.ApprovalDenied)
	res = call(t, cs, "write_file", args)
	if !res.IsError || !strings.Contains(text(res), "release day") || written() {
		t.Fatalf("denied: isError=%v text=%q written=%v", res.IsError, text(res), written())
	}

	a.set(hooks.ApprovalApproved)
	res = call(t, cs, "write_file", args)
	if res.IsError || !written() {
		t.Fatalf("approved: isError=%v text=%q written=%v", res.IsError, text(res), written())
	}
	if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusSucceeded || rec.Approval == nil || rec.Approval.DecidedBy != "carol" {
		t.Fatalf("audit of the approved call: %+v", rec)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, r := range a.reqs {
		if !r.Wait || r.Call == nil || r.Call.SenderID != "alice" || r.Call.ChannelID != "mcp" {
			t.Errorf("request %d: %+v", i, r)
		}
	}
	// A call no ask rule matches asks nobody.
	before := len(a.reqs)
	a.mu.Unlock()
	if res := call(t, cs, "write_file", `{"path":"src.txt","content":"x"}`); res.IsError {
		t.Errorf("unasked call: %q", text(res))
	}
	a.mu.Lock()
	if len(a.reqs) != before {
		t.Errorf("an unasked call requested approval")
	}
}
