package claudehook_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolhooks/toolhooks/internal/claudehook"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// TestACallWaitingForApprovalAsksThePersonAtTheTerminal drives the adapter
// against a gateway that first answers ask (a ToolCallApproval is pending)
// and, once it is approved, allow.
func TestACallWaitingForApprovalAsksThePersonAtTheTerminal(t *testing.T) {
	var approved atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := wire.DecisionResponse{Decision: wire.DecisionAsk,
			Ask: &wire.Denial{Hook: "AutonomyPolicy/team/coder", Rule: "askCommands",
				Reason: `Shell command "git push origin main" matches "git push *", which needs approval.`,
				Policy: &wire.PolicyRef{Kind: "AutonomyPolicy", Namespace: "team", Name: "coder"}},
			Approval: &wire.Approval{Name: "shell-7x2kq", State: "Pending"}}
		if approved.Load() {
			d = wire.DecisionResponse{Allowed: true, Decision: wire.DecisionAllow, Ask: d.Ask,
				Approval: &wire.Approval{Name: "shell-7x2kq", State: "Approved", DecidedBy: "carol"}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d)
	}))
	defer srv.Close()
	in := `{"session_id":"s","cwd":"/w","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push origin main"}}`

	got := runHook(t, in, claudehook.Options{Gateway: srv.URL})
	if got.code != claudehook.ExitAllow {
		t.Fatalf("ask: exit %d, stderr %q", got.code, got.stderr)
	}
	var out struct {
		HookSpecificOutput struct {
			HookEventName, PermissionDecision, PermissionDecisionReason string
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
		t.Fatalf("stdout %q: %v", got.stdout, err)
	}
	o := out.HookSpecificOutput
	if o.HookEventName != "PreToolUse" || o.PermissionDecision != "ask" ||
		!strings.Contains(o.PermissionDecisionReason, "shell-7x2kq") || !strings.Contains(o.PermissionDecisionReason, "askCommands") {
		t.Fatalf("ask answer %+v", o)
	}

	got = runHook(t, in, claudehook.Options{Gateway: srv.URL, Ask: claudehook.AskDeny})
	if got.code != claudehook.ExitDeny || got.stdout != "" || !strings.Contains(got.stderr, "kubectl toolhooks approve shell-7x2kq") {
		t.Fatalf("--ask=deny: exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
	}

	approved.Store(true)
	got = runHook(t, in, claudehook.Options{Gateway: srv.URL, Ask: claudehook.AskDeny})
	if got.code != claudehook.ExitAllow || got.stdout != "" {
		t.Fatalf("approved: exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
	}
	if err := (&claudehook.Options{Gateway: srv.URL, Ask: "maybe"}).Validate(); err == nil {
		t.Fatal("--ask=maybe accepted")
	}
}
