package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replayLog is a decision log by hand: a gateway log line, a decision
// record, and calls recorded allowed, denied, asked and approved, without
// arguments, and denied by the gateway's state.
const replayLog = `not json at all
{"level":"INFO","msg":"Gateway listening","address":"x"}
{"msg":"Tool call started","tool":"read_file","sessionId":"s","outcome":"allowed","arguments":{"path":"a.txt"}}
{"msg":"Tool call","tool":"deploy","sessionId":"s","senderId":"alice","outcome":"succeeded","ask":{"allowed":false,"hook":"ContractPolicy/default/c","rule":"askTools","reason":"r"},"approval":{"name":"tca-1","state":"Approved","decidedBy":"carol"},"arguments":{}}
{"msg":"Tool call","tool":"deploy","sessionId":"s","senderId":"alice","outcome":"denied","denial":{"allowed":false,"hook":"ContractPolicy/default/c","rule":"maxToolCalls","reason":"over"},"arguments":{}}
{"msg":"Tool call","tool":"read_file","sessionId":"s","senderId":"alice","outcome":"denied","denial":{"allowed":false,"hook":"AuditLog","rule":"AuditFailed","reason":"disk full"},"arguments":{"path":"a.txt"}}
{"msg":"Tool call","tool":"read_file","sessionId":"s","senderId":"alice","outcome":"succeeded"}
{"msg":"Tool call","tool":"read_file","sessionId":"s","senderId":"alice","outcome":"succeeded","arguments":{"path":"gone/a.txt"}}
{"msg":"Tool call","tool":"read_file","sessionId":"t","senderId":"alice","outcome":"succeeded","arguments":{"path":"link/a.txt"}}
`

// TestReplayComparesEachSide checks the classes a replay tells apart: an
// approved ask that still asks is unchanged and counts against the budget,
// a denial the budget no longer makes becomes allowed, a recorded
// state denial and a path under a missing directory are not exact, and a
// call without arguments is not evaluated.
func TestReplayComparesEachSide(t *testing.T) {
	ws, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A symlink whose target is gone since the call was recorded.
	if err := os.Symlink(filepath.Join(ws, "moved-away"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	policy := "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ContractPolicy\nmetadata: {name: c}\n" +
		"spec: {maxToolCalls: 3, ask: {tools: [deploy]}}\n"
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	calls, err := ReadDecisionLog(strings.NewReader(replayLog), "log")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 6 || calls[0].Source != "log:4" {
		t.Fatalf("read %d calls (first %+v), want the 5 call records", len(calls), calls)
	}
	l, err := LoadPolicies([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEvaluator(l, Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	rep := Replay(t.Context(), e, ws, calls)
	if len(rep.Changed) != 1 || rep.Changed[0].Source != "log:5" || rep.Changed[0].Replayed.Decision != DecisionAsk {
		t.Fatalf("changed = %+v, want the budget denial of log:5 to become an ask", rep.Changed)
	}
	if len(rep.Inexact) != 3 || !strings.Contains(rep.Inexact[0].Inexact[0], "AuditFailed") ||
		!strings.Contains(rep.Inexact[1].Inexact[0], "does not exist") ||
		!strings.Contains(rep.Inexact[2].Inexact[0], "is a symlink whose target no longer exists") {
		t.Errorf("not exact = %+v", rep.Inexact)
	}
	if len(rep.NotEvaluated) != 1 || !strings.Contains(rep.NotEvaluated[0].NotEvaluated, "decision log was off") {
		t.Errorf("not evaluated = %+v", rep.NotEvaluated)
	}
	if s := rep.Summary; s.Calls != 6 || s.Changed != 1 || s.ToOrFromAsk != 1 || s.EvaluatedExact != 1 {
		t.Errorf("summary = %+v", s)
	}
}
