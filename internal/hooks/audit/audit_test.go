package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// secret marks argument and result contents; it must never reach the audit log.
const secret = "S3CRET-b7e1"

var (
	fixedTime = time.Date(2026, 3, 4, 5, 6, 7, 890000000, time.UTC)
	policy    = hooks.PolicyRef{Kind: "AutonomyPolicy", Namespace: "team-a", Name: "strict"}
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records parses one JSON object per line.
// records returns the calls' records (message audit.Message, one per call)
// in out, checking that every line is one JSON object.
func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	return recordsWith(t, out, audit.Message)
}

// recordsWith returns the records in out whose message is msg.
func recordsWith(t *testing.T, out, msg string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line is not one JSON object: %v\n%s", err, line)
		}
		if m["msg"] == msg {
			recs = append(recs, m)
		}
	}
	return recs
}

func TestAuditLogWritesExactlyOneRecordPerCall(t *testing.T) {
	secretArgs := `{"path":"/workspace/` + secret + `","content":"` + secret + `"}`
	denyHook := hooks.HookFuncs{HookName: "Autonomy", BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
		if c.Tool == "write_file" {
			return hooks.Deny("readonly", "write_file mutates and the mode is readonly"), nil
		}
		return hooks.Allow, nil
	}}
	warnHook := hooks.HookFuncs{HookName: "Budget", BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
		if c.Tool == "search" {
			return hooks.Deny("maxToolCalls", "Budget of 10 calls used"), nil
		}
		return hooks.Allow, nil
	}}
	release := make(chan struct{})
	defer close(release)
	tools := []hooks.Tool{
		hooks.ToolFunc{ToolName: "read_file", Func: func(context.Context, map[string]any) (string, error) {
			return "file says " + secret, nil
		}},
		hooks.ToolFunc{ToolName: "write_file", Func: func(context.Context, map[string]any) (string, error) {
			return "written " + secret, nil
		}},
		hooks.ToolFunc{ToolName: "search", Func: func(context.Context, map[string]any) (string, error) {
			return "Error: nothing found for " + secret, nil
		}},
		hooks.ToolFunc{ToolName: "shell", Func: func(context.Context, map[string]any) (string, error) {
			return secret, errors.New("exit status 1: " + secret)
		}},
		hooks.ToolFunc{ToolName: "slow", Func: func(context.Context, map[string]any) (string, error) {
			<-release
			return secret, nil
		}},
	}

	tests := []struct {
		name     string
		tool     string
		args     string
		evaluate bool
		want     map[string]any // expected fields besides the common ones
		absent   []string       // fields that must not be present
		check    func(t *testing.T, rec map[string]any)
	}{
		{
			name: "a succeeded call records its outcome and lengths",
			tool: "read_file", args: secretArgs,
			want:   map[string]any{"outcome": "succeeded", "argumentLength": float64(len(secretArgs)), "resultLength": float64(len("file says " + secret))},
			absent: []string{"denial", "warnings"},
		},
		{
			name: "a denied call records the deciding hook, policy, rule and reason",
			tool: "write_file", args: secretArgs,
			want: map[string]any{
				"outcome": "denied",
				"denial": map[string]any{"allowed": false, "hook": "Autonomy",
					"policy": map[string]any{"kind": "AutonomyPolicy", "namespace": "team-a", "name": "strict"},
					"rule":   "readonly", "reason": "write_file mutates and the mode is readonly", "enforcementAction": "Deny", "layer": "static"},
				"durationMs":   float64(0),
				"resultLength": float64(len(hooks.DenialText + "Autonomy")),
			},
			absent: []string{"warnings"},
		},
		{
			name: "a call with invalid arguments is recorded as denied by the arguments check",
			tool: "read_file", args: `{"` + secret + `":1,"` + secret + `":2}`,
			want: map[string]any{"outcome": "denied", "argumentLength": float64(len(secret)*2 + 11)},
			check: func(t *testing.T, rec map[string]any) {
				d, _ := rec["denial"].(map[string]any)
				if d["hook"] != hooks.ArgumentsHookName || d["rule"] != hooks.RuleInvalidArguments {
					t.Errorf("denial = %#v, want hook arguments and rule InvalidArguments", rec["denial"])
				}
			},
		},
		{
			name: "a warn-mode denial is recorded as a warning on a succeeded call",
			tool: "search", args: secretArgs,
			want: map[string]any{"outcome": "succeeded", "warnings": []any{map[string]any{"allowed": false,
				"hook": "Budget", "rule": "maxToolCalls", "reason": "Budget of 10 calls used", "enforcementAction": "Warn", "layer": "static"}}},
			absent: []string{"denial"},
		},
		{
			name: "a failed call is recorded as failed",
			tool: "shell", args: secretArgs,
			want: map[string]any{"outcome": "failed", "resultLength": float64(len(hooks.FailedText))},
		},
		{
			name: "a timed-out call is recorded as timed out",
			tool: "slow", args: secretArgs,
			want: map[string]any{"outcome": "timed_out", "resultLength": float64(len(hooks.TimedOutText))},
		},
		{
			name: "an unknown tool is recorded",
			tool: "nope_" + "x", args: secretArgs,
			want: map[string]any{"outcome": "unknown_tool", "tool": "nope_x", "durationMs": float64(0)},
		},
		{
			name: "an allowed evaluation is recorded as allowed",
			tool: "agent_tool", args: secretArgs, evaluate: true,
			want: map[string]any{"outcome": "allowed", "resultLength": float64(0)},
		},
		{
			name: "a denied evaluation is recorded as denied",
			tool: "write_file", args: secretArgs, evaluate: true,
			want: map[string]any{"outcome": "denied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := time.Hour
			if tt.tool == "slow" {
				timeout = time.Millisecond // the slow tool blocks until the test ends
			}
			var out bytes.Buffer
			a := audit.New(audit.NewJSONSink(&out), audit.WithClock(func() time.Time { return fixedTime }))
			e, err := hooks.NewExecutor([]hooks.Entry{
				{Hook: a},
				{Hook: denyHook, Policy: policy},
				{Hook: warnHook, Action: hooks.ActionWarn},
			}, tools, hooks.WithToolTimeout(timeout), hooks.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			call := hooks.NewCall(tt.tool, tt.args)
			call.SessionID, call.ChannelID, call.SenderID, call.CorrelationID = "sess-1", "slack", "alice", "corr-9"
			call.Streaming = true
			if tt.evaluate {
				e.Evaluate(context.Background(), call)
			} else {
				e.Execute(context.Background(), call)
			}

			if strings.Contains(out.String(), secret) {
				t.Fatalf("audit log contains argument or result contents:\n%s", out.String())
			}
			recs := records(t, out.String())
			if len(recs) != 1 {
				t.Fatalf("got %d audit records, want exactly 1:\n%s", len(recs), out.String())
			}
			rec := recs[0]
			want := map[string]any{
				"time": "2026-03-04T05:06:07.89Z", "level": "INFO", "msg": "Tool call",
				"tool": tt.tool, "sessionId": "sess-1", "channelId": "slack", "senderId": "alice",
				"correlationId": "corr-9", "streaming": true, "argumentLength": float64(len(tt.args)),
			}
			maps.Copy(want, tt.want)
			for k, v := range want {
				if !reflect.DeepEqual(rec[k], v) {
					t.Errorf("%s = %#v, want %#v", k, rec[k], v)
				}
			}
			for _, k := range []string{"durationMs", "resultLength"} {
				if n, ok := rec[k].(float64); !ok || n < 0 {
					t.Errorf("%s = %#v, want a non-negative number", k, rec[k])
				}
			}
			for _, k := range tt.absent {
				if _, ok := rec[k]; ok {
					t.Errorf("record has %s = %#v, want none", k, rec[k])
				}
			}
			if tt.check != nil {
				tt.check(t, rec)
			}
			if rec["outcome"] == "denied" {
				d, _ := rec["denial"].(map[string]any)
				if d["hook"] == nil || d["rule"] == nil || d["reason"] == nil {
					t.Errorf("a denied call's record does not explain the denial: %#v", rec["denial"])
				}
			}
		})
	}
}

func TestAuditLogRecordFields(t *testing.T) {
	var got []audit.Record
	a := audit.New(audit.SinkFunc(func(_ context.Context, r audit.Record) error {
		got = append(got, r)
		return nil
	}), audit.WithClock(func() time.Time { return fixedTime }))
	call := hooks.NewCall("read_file", `{"path":"`+secret+`"}`)
	call.SessionID, call.ChannelID, call.SenderID, call.CorrelationID, call.Streaming = "s", "c", "u", "id", true
	call.Caller = &hooks.Identity{Username: "u", UID: "uid-1", Groups: []string{"system:serviceaccounts", "team-a"}}
	denial := &hooks.Decision{Hook: "h", Policy: policy, Rule: "r", Reason: "why", Action: hooks.ActionDeny}
	warnings := []hooks.Decision{{Hook: "w", Rule: "r", Reason: "dry", Action: hooks.ActionWarn}}
	res := &hooks.Result{Status: hooks.StatusDenied, Output: "0123456789", Duration: 1500 * time.Microsecond,
		Denial: denial, Warnings: warnings}

	a.After(context.Background(), call, res)
	want := audit.Record{
		Time: fixedTime, Tool: "read_file", SessionID: "s", ChannelID: "c", SenderID: "u", CorrelationID: "id",
		SenderUID: "uid-1", SenderGroups: []string{"system:serviceaccounts", "team-a"}, Streaming: true, Outcome: hooks.StatusDenied, Denial: denial, Warnings: warnings,
		Duration: 1500 * time.Microsecond, ArgumentLength: len(call.ArgsJSON), ResultLength: 10,
	}
	if len(got) != 1 || got[0].CallID == "" {
		t.Fatalf("After emitted %+v, want one record with a call id", got)
	}
	got[0].CallID = ""
	if !reflect.DeepEqual(got[0], want) {
		t.Fatalf("After emitted %+v, want exactly [%+v]", got, want)
	}
	if got[0].Denial == denial || &got[0].Warnings[0] == &warnings[0] {
		t.Error("the record shares the result's denial or warnings; a sink keeping it would see later changes")
	}

	var out bytes.Buffer
	if err := audit.NewJSONSink(&out).Emit(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if rec := records(t, out.String())[0]; rec["durationMs"] != 1.5 {
		t.Errorf("durationMs = %#v, want 1.5", rec["durationMs"])
	}
}

func TestAuditLogNeverDenies(t *testing.T) {
	a := audit.New(audit.SinkFunc(func(context.Context, audit.Record) error { return nil }))
	for _, call := range []*hooks.Call{hooks.NewCall("shell", `{"command":"rm -rf /"}`), hooks.NewCall("x", "[")} {
		if v, err := a.Before(context.Background(), call); err != nil || !v.Allowed {
			t.Errorf("Before(%s) = %+v, %v; want Allow", call.Tool, v, err)
		}
	}
	if a.Name() != "AuditLog" {
		t.Errorf("Name() = %q, want AuditLog", a.Name())
	}
}

func TestAuditLogSinkErrorDeniesTheCallBeforeTheToolRuns(t *testing.T) {
	a := audit.New(audit.SinkFunc(func(context.Context, audit.Record) error { return errors.New("disk full") }))
	if err := a.TryAfter(context.Background(), hooks.NewCall("t", ""), &hooks.Result{}); err == nil ||
		!strings.Contains(err.Error(), "disk full") {
		t.Errorf("TryAfter = %v, want the sink's error", err)
	}
	var ran atomic.Int64
	var logs lockedBuffer
	e, err := hooks.NewExecutor([]hooks.Entry{{Hook: a, FailOpen: true, Action: hooks.ActionWarn}},
		[]hooks.Tool{hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) { ran.Add(1); return "ok", nil }}},
		hooks.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []hooks.Result{e.Execute(context.Background(), hooks.NewCall("t", "")), e.Evaluate(context.Background(), hooks.NewCall("t", ""))} {
		if res.Status != hooks.StatusDenied || res.Denial == nil || res.Denial.Rule != hooks.RuleAuditFailed || res.Denial.Hook != audit.Name {
			t.Errorf("a failing audit sink (even fail-open, warn) let the call through: %+v %+v", res, res.Denial)
		}
	}
	if ran.Load() != 0 {
		t.Error("the tool ran although its decision could not be recorded")
	}
	if !strings.Contains(logs.String(), "disk full") || !strings.Contains(logs.String(), "hook=AuditLog") {
		t.Errorf("the sink error was not logged: %q", logs.String())
	}
}

func TestAllowedCallsWriteTheDecisionBeforeTheToolAndOneRecordAfter(t *testing.T) {
	var m audit.Memory
	var seenBefore int
	e, err := hooks.NewExecutor([]hooks.Entry{{Hook: audit.New(&m)}},
		[]hooks.Tool{hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) {
			seenBefore = len(m.Started())
			return "ok", nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	res := e.Execute(context.Background(), hooks.NewCall("t", `{"a":1}`))
	if res.Status != hooks.StatusSucceeded || seenBefore != 1 {
		t.Fatalf("result %+v; %d decision records when the tool ran, want 1", res, seenBefore)
	}
	started, recs := m.Started(), m.Records()
	if len(started) != 1 || len(recs) != 1 || started[0].CallID == "" || started[0].CallID != recs[0].CallID ||
		started[0].Outcome != hooks.StatusAllowed || recs[0].Outcome != hooks.StatusSucceeded || started[0].Phase != audit.PhaseStarted {
		t.Errorf("started %+v, records %+v", started, recs)
	}
	// A denied call writes only its record.
	e.Execute(context.Background(), hooks.NewCall("t", `[`))
	if len(m.Started()) != 1 || len(m.Records()) != 2 || m.Records()[1].CallID == recs[0].CallID {
		t.Errorf("after a denial: started %+v, records %+v", m.Started(), m.Records())
	}
}

func TestAuditLogCompletionFailureIsLoggedAndCannotChangeTheResult(t *testing.T) {
	a := audit.New(audit.SinkFunc(func(_ context.Context, r audit.Record) error {
		if r.Phase == audit.PhaseCompleted {
			return errors.New("disk full")
		}
		return nil
	}))
	var logs lockedBuffer
	e, err := hooks.NewExecutor([]hooks.Entry{{Hook: a}},
		[]hooks.Tool{hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) { return "ok", nil }}},
		hooks.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if res := e.Execute(context.Background(), hooks.NewCall("t", "")); res.Status != hooks.StatusSucceeded || res.Output != "ok" {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(logs.String(), "disk full") {
		t.Errorf("the sink error was not logged: %q", logs.String())
	}
}

func TestAuditLogConcurrentCallsEachLeaveOneRecord(t *testing.T) {
	const calls = 1000
	var out lockedBuffer
	e, err := hooks.NewExecutor([]hooks.Entry{{Hook: audit.New(audit.NewJSONSink(&out))}},
		[]hooks.Tool{hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) { return "ok", nil }}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			call := hooks.NewCall("t", "")
			call.CorrelationID = fmt.Sprint(i)
			e.Execute(context.Background(), call)
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, rec := range records(t, out.String()) {
		seen[fmt.Sprint(rec["correlationId"])]++
	}
	for i := range calls {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			t.Errorf("call %d left %d records, want 1", i, n)
		}
	}
}

func TestMemoryKeepsEveryRecordAndHandsOutCopies(t *testing.T) {
	var m audit.Memory
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _ = m.Emit(context.Background(), audit.Record{Tool: fmt.Sprint(i)}) })
	}
	wg.Wait()
	recs := m.Records()
	if len(recs) != 50 {
		t.Fatalf("%d records, want 50", len(recs))
	}
	recs[0].Tool = "changed"
	if m.Records()[0].Tool == "changed" {
		t.Error("Records returned the memory's own slice, not a copy")
	}
}

// TestAuditLogMasksReasons: WithReasonMask rewrites the reason of every
// decision a record holds, in the decision record and the call's record,
// and leaves the result's decisions (the caller's answer) as they are.
func TestAuditLogMasksReasons(t *testing.T) {
	var got []audit.Record
	a := audit.New(audit.SinkFunc(func(_ context.Context, r audit.Record) error {
		got = append(got, r)
		return nil
	}), audit.WithReasonMask(func(_ context.Context, s string) string { return strings.ReplaceAll(s, "hunter2", "[MASKED]") }))
	call := hooks.NewCall("shell", `{"command":"x"}`)
	res := &hooks.Result{Status: hooks.StatusDenied,
		Denial:   &hooks.Decision{Hook: "h", Rule: "r", Reason: `Shell command "x --password=hunter2" is not allowed`},
		Warnings: []hooks.Decision{{Hook: "w", Reason: "w hunter2"}}, Ask: &hooks.Decision{Reason: "a hunter2"},
		Withheld: &hooks.Decision{Reason: "h hunter2"}}
	if err := a.BeforeTool(context.Background(), call, res); err != nil {
		t.Fatal(err)
	}
	a.After(context.Background(), call, res)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
	for _, r := range got {
		for _, d := range []*hooks.Decision{r.Denial, &r.Warnings[0], r.Ask, r.Withheld} {
			if strings.Contains(d.Reason, "hunter2") || !strings.Contains(d.Reason, "[MASKED]") {
				t.Errorf("reason %q is not masked", d.Reason)
			}
		}
	}
	if !strings.Contains(res.Denial.Reason, "hunter2") || !strings.Contains(res.Warnings[0].Reason, "hunter2") {
		t.Error("the result's own reasons were changed")
	}
}
