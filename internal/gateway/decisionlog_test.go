package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/argmask"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

const decisionLogPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: recorded}
spec:
  requireDecisionLog: true
  workspace: {root: WORKSPACE, only: true}
`

// TestDecisionLogRecordsMaskedArguments checks that a gateway with the
// decision log on writes each call's masked canonical arguments into the
// call's record (not the decision record), allowed and denied alike.
func TestDecisionLogRecordsMaskedArguments(t *testing.T) {
	m, err := argmask.New(argmask.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *gateway.Options) { o.DecisionLog = m.Mask })
	e.mustPush(compileYAML(t, e.ws, decisionLogPolicy))
	// The tool refuses the unknown key; the call is recorded all the same.
	if r := e.call("write_file", `{"path":"a.txt","content":"x","token":"s3cret"}`); r.Status != "failed" {
		t.Fatalf("write_file = %+v %+v", r, r.Denial)
	}
	if r := e.call("read_file", `{"path":"/etc/passwd"}`); r.Status != "denied" {
		t.Fatalf("read outside the workspace = %+v", r)
	}
	recs := e.audit.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for i, want := range []string{`{"content":"x","path":"a.txt","token":"[MASKED]"}`, `{"path":"/etc/passwd"}`} {
		a := recs[i].Arguments
		if a == nil || a.JSON != want {
			t.Errorf("record %d arguments = %+v, want %s", i, a, want)
		}
	}
	if got := recs[0].Arguments.Masked; len(got) != 1 || got[0] != "/token" {
		t.Errorf("masked = %q, want [/token]", got)
	}
	for _, r := range e.audit.Started() {
		if r.Arguments != nil {
			t.Errorf("a decision record carries arguments: %+v", r.Arguments)
		}
	}
	// Written by the JSON sink as one object.
	var line strings.Builder
	if err := audit.NewJSONSink(&line).Emit(t.Context(), recs[0]); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Arguments map[string]string `json:"arguments"`
		Masked    []string          `json:"maskedArguments"`
	}
	if err := json.Unmarshal([]byte(line.String()), &got); err != nil || got.Arguments["path"] != "a.txt" || len(got.Masked) != 1 {
		t.Errorf("JSON record %s: %+v %v", line.String(), got, err)
	}
}

// TestAPolicyRequiringTheDecisionLogIsUnenforceableWithout checks that a
// gateway without the decision log denies every call of a policy that
// requires it, naming why, and writes no arguments.
func TestAPolicyRequiringTheDecisionLogIsUnenforceableWithout(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, decisionLogPolicy))
	r := e.call("read_file", `{"path":"a.txt"}`)
	if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != gatewayconfig.RuleUnenforceable ||
		!strings.Contains(r.Denial.Reason, "decision log") {
		t.Fatalf("a call under a policy requiring the decision log = %+v %+v", r, r.Denial)
	}
	for _, rec := range e.audit.Records() {
		if rec.Arguments != nil {
			t.Errorf("arguments recorded without the decision log: %+v", rec.Arguments)
		}
	}
}
