package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

var strict = hooks.PolicyRef{Kind: "AutonomyPolicy", Namespace: "team-a", Name: "strict", UID: "u-1", Generation: 3}

func TestExecute(t *testing.T) {
	ok := func(context.Context, map[string]any) (string, error) { return "ok", nil }
	tests := []struct {
		name      string
		entries   func(tr *trace) []hooks.Entry
		tool      func(context.Context, map[string]any) (string, error) // the "echo" tool; nil means ok
		call      *hooks.Call
		want      hooks.Result
		wantTrace []string
		wantLog   string
	}{
		{
			name: "a call every hook allows runs the tool between the before and after phases",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}, {Hook: traced(tr, "b", allows)}}
			},
			call:      hooks.NewCall("echo", `{"x":1}`),
			want:      hooks.Result{Status: hooks.StatusSucceeded, Output: "ok"},
			wantTrace: []string{"before:a", "before:b", "tool:echo", "after:a:succeeded", "after:b:succeeded"},
		},
		{
			name: "the first denial stops the phase and the caller gets exactly the denial text",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{
					{Hook: traced(tr, "a", allows)},
					{Hook: traced(tr, "b", denies("forbiddenPathGlobs", "The path matches /etc/**")), Policy: strict},
					{Hook: traced(tr, "c", denies("other", "never reached"))},
				}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{
				Status: hooks.StatusDenied,
				Output: "Tool execution denied by hook: b",
				Denial: &hooks.Decision{Hook: "b", Policy: strict, Rule: "forbiddenPathGlobs",
					Reason: "The path matches /etc/**", Action: hooks.ActionDeny, Layer: hooks.LayerStatic},
			},
			wantTrace: []string{"before:a", "before:b", "after:a:denied", "after:b:denied", "after:c:denied"},
		},
		{
			name: "an explicit Deny action denies like the default",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", denies("r", "no")), Action: hooks.ActionDeny}}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "a",
				Denial: &hooks.Decision{Hook: "a", Rule: "r", Reason: "no", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"before:a", "after:a:denied"},
		},
		{
			name: "a denial without rule or reason is still explained",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", denies("", ""))}}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "a",
				Denial: &hooks.Decision{Hook: "a", Rule: hooks.RuleDenied, Reason: "Hook a denied the call", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"before:a", "after:a:denied"},
		},
		{
			name: "a denial from a warn-mode hook is a warning and the call proceeds",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{
					{Hook: traced(tr, "a", denies("readonly", "write_file mutates")), Policy: strict, Action: hooks.ActionWarn},
					{Hook: traced(tr, "b", allows)},
				}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusSucceeded, Output: "ok", Warnings: []hooks.Decision{
				{Hook: "a", Policy: strict, Rule: "readonly", Reason: "write_file mutates", Action: hooks.ActionWarn, Layer: hooks.LayerStatic},
			}},
			wantTrace: []string{"before:a", "before:b", "tool:echo", "after:a:succeeded", "after:b:succeeded"},
		},
		{
			name: "warnings gathered before a denial are kept with it",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{
					{Hook: traced(tr, "a", denies("r1", "first")), Action: hooks.ActionWarn},
					{Hook: traced(tr, "b", denies("r2", "second")), Action: hooks.ActionWarn},
					{Hook: traced(tr, "c", denies("r3", "third"))},
				}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{
				Status: hooks.StatusDenied, Output: hooks.DenialText + "c",
				Denial: &hooks.Decision{Hook: "c", Rule: "r3", Reason: "third", Action: hooks.ActionDeny, Layer: hooks.LayerStatic},
				Warnings: []hooks.Decision{
					{Hook: "a", Rule: "r1", Reason: "first", Action: hooks.ActionWarn, Layer: hooks.LayerStatic},
					{Hook: "b", Rule: "r2", Reason: "second", Action: hooks.ActionWarn, Layer: hooks.LayerStatic},
				},
			},
			wantTrace: []string{"before:a", "before:b", "before:c", "after:a:denied", "after:b:denied", "after:c:denied"},
		},
		{
			name: "a before-callback error denies and names the error",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "plugin:x", fails(errors.New("connection refused"))), Policy: strict},
					{Hook: traced(tr, "b", allows)}}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "plugin:x",
				Denial: &hooks.Decision{Hook: "plugin:x", Policy: strict, Rule: hooks.RuleHookError,
					Reason: "Hook plugin:x failed: connection refused", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"before:plugin:x", "after:plugin:x:denied", "after:b:denied"},
		},
		{
			name: "a before-callback panic denies and names the panic",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", panics("index out of range"))}, {Hook: traced(tr, "b", allows)}}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "a",
				Denial: &hooks.Decision{Hook: "a", Rule: hooks.RuleHookPanic,
					Reason: "Hook a panicked: index out of range", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"before:a", "after:a:denied", "after:b:denied"},
			wantLog:   "Before hook panicked",
		},
		{
			name: "a fail-open hook that errors is logged and allows",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", fails(errors.New("timeout"))), FailOpen: true},
					{Hook: traced(tr, "b", allows)}}
			},
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusSucceeded, Output: "ok"},
			wantTrace: []string{"before:a", "before:b", "tool:echo", "after:a:succeeded", "after:b:succeeded"},
			wantLog:   "allowing because it is fail-open",
		},
		{
			name: "a fail-open hook that panics is logged and allows",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", panics(errors.New("nil map"))), FailOpen: true}}
			},
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusSucceeded, Output: "ok"},
			wantTrace: []string{"before:a", "tool:echo", "after:a:succeeded"},
			wantLog:   "Before hook panicked",
		},
		{
			name: "a fail-open hook that decides to deny still denies",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", denies("r", "no")), FailOpen: true}}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "a",
				Denial: &hooks.Decision{Hook: "a", Rule: "r", Reason: "no", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"before:a", "after:a:denied"},
		},
		{
			name: "a warn-mode hook that errors warns and the call proceeds",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", fails(errors.New("boom"))), Action: hooks.ActionWarn}}
			},
			call: hooks.NewCall("echo", ""),
			want: hooks.Result{Status: hooks.StatusSucceeded, Output: "ok", Warnings: []hooks.Decision{
				{Hook: "a", Rule: hooks.RuleHookError, Reason: "Hook a failed: boom", Action: hooks.ActionWarn, Layer: hooks.LayerStatic},
			}},
			wantTrace: []string{"before:a", "tool:echo", "after:a:succeeded"},
		},
		{
			name: "an unknown tool gets the unknown-tool text, no before-callback runs, and the after phase records it",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", denies("r", "no"))}}
			},
			call:      hooks.NewCall("rm_rf", `{}`),
			want:      hooks.Result{Status: hooks.StatusUnknownTool, Output: "Error: Unknown tool"},
			wantTrace: []string{"after:a:unknown_tool"},
		},
		{
			name: "tool names are matched exactly",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call:      hooks.NewCall("Echo", `{}`),
			want:      hooks.Result{Status: hooks.StatusUnknownTool, Output: hooks.UnknownToolText},
			wantTrace: []string{"after:a:unknown_tool"},
		},
		{
			name: "arguments that are not one JSON object are denied before any hook runs",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call: hooks.NewCall("echo", `["rm","-rf","/"]`),
			want: hooks.Result{Status: hooks.StatusDenied, Output: "Tool execution denied by hook: arguments",
				Denial: &hooks.Decision{Hook: hooks.ArgumentsHookName, Rule: hooks.RuleInvalidArguments,
					Reason: "The arguments must be one JSON object: invalid tool arguments: want one JSON object, got an array",
					Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"after:a:denied"},
		},
		{
			name: "a tool error returns the failed text and sets Failed",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			tool: func(context.Context, map[string]any) (string, error) {
				return "partial output", errors.New("disk full")
			},
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusFailed, Output: "Error: Tool execution failed.", Failed: true},
			wantTrace: []string{"before:a", "tool:echo", "after:a:failed"},
			wantLog:   "disk full",
		},
		{
			name: "a call refused unread for its size is denied before any hook runs, and audited",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call: &hooks.Call{Tool: "echo", Args: map[string]any{}, ArgsErr: fmt.Errorf("%w: over 10 bytes", hooks.ErrTooLarge)},
			want: hooks.Result{Status: hooks.StatusDenied, Output: "Tool execution denied by hook: arguments",
				Denial: &hooks.Decision{Hook: hooks.ArgumentsHookName, Rule: hooks.RuleTooLarge,
					Reason: "The call was refused unread: request too large: over 10 bytes", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"after:a:denied"},
		},
		{
			name: "a refused request is denied by hook request with the refusal's rule before any hook runs, and audited",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call: &hooks.Call{Tool: "echo", Args: map[string]any{}, ArgsErr: &hooks.Refusal{Rule: hooks.RuleUnauthenticated, Err: errors.New("no bearer token")}},
			want: hooks.Result{Status: hooks.StatusDenied, Output: "Tool execution denied by hook: request",
				Denial: &hooks.Decision{Hook: hooks.RequestHookName, Rule: hooks.RuleUnauthenticated,
					Reason: "The request was refused: no bearer token", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"after:a:denied"},
		},
		{
			name: "a ToolError fails the call with the tool's own text",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			tool: func(context.Context, map[string]any) (string, error) {
				return "ignored", fmt.Errorf("reading: %w", &hooks.ToolError{Text: "Error: x.txt does not exist"})
			},
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusFailed, Output: "Error: x.txt does not exist", Failed: true},
			wantTrace: []string{"before:a", "tool:echo", "after:a:failed"},
		},
		{
			name: "a tool panic returns the failed text and sets Failed",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			tool:      func(context.Context, map[string]any) (string, error) { panic("tool bug") },
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusFailed, Output: hooks.FailedText, Failed: true},
			wantTrace: []string{"before:a", "tool:echo", "after:a:failed"},
			wantLog:   "Tool panicked",
		},
		{
			name: "tool output starting with Error: is a success",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			tool: func(context.Context, map[string]any) (string, error) {
				return "Error: file not found", nil
			},
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusSucceeded, Output: "Error: file not found"},
			wantTrace: []string{"before:a", "tool:echo", "after:a:succeeded"},
		},
		{
			name:      "an empty hook list runs the tool",
			entries:   func(*trace) []hooks.Entry { return nil },
			call:      hooks.NewCall("echo", ""),
			want:      hooks.Result{Status: hooks.StatusSucceeded, Output: "ok"},
			wantTrace: []string{"tool:echo"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &trace{}
			fn := tt.tool
			if fn == nil {
				fn = ok
			}
			logger, logs := testLogger()
			e := mustExecutor(t, tt.entries(tr), []hooks.Tool{tracedTool(tr, "echo", fn)}, hooks.WithLogger(logger))
			got := e.Execute(context.Background(), tt.call)
			checkResult(t, got, tt.want)
			if events := tr.get(); !slices.Equal(events, tt.wantTrace) {
				t.Errorf("ran %q, want %q", events, tt.wantTrace)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q does not contain %q", logs.String(), tt.wantLog)
			}
		})
	}
}

func TestExecuteGivesTheToolTheArgumentsTheHooksSaw(t *testing.T) {
	var hookArgs, toolArgs map[string]any
	h := hooks.HookFuncs{HookName: "a", BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
		hookArgs = c.Args
		return hooks.Allow, nil
	}}
	tool := hooks.ToolFunc{ToolName: "read_file", Func: func(_ context.Context, args map[string]any) (string, error) {
		toolArgs = args
		return "", nil
	}}
	e := mustExecutor(t, []hooks.Entry{{Hook: h}}, []hooks.Tool{tool})
	e.Execute(context.Background(), hooks.NewCall("read_file", `{"path":"/workspace/a"}`))
	if hookArgs == nil || reflect.ValueOf(hookArgs).UnsafePointer() != reflect.ValueOf(toolArgs).UnsafePointer() {
		t.Fatalf("the tool got arguments %v, not the map the hook decided on (%v)", toolArgs, hookArgs)
	}
	if toolArgs["path"] != "/workspace/a" {
		t.Errorf("tool got path %v, want /workspace/a", toolArgs["path"])
	}
}

func TestExecuteToolTimeout(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		// tool runs the tool; release is closed when the test ends.
		tool func(ctx context.Context, release <-chan struct{}) (string, error)
		want hooks.Result
	}{
		{
			name:    "a tool that ignores its context is abandoned at the timeout",
			timeout: time.Millisecond,
			tool: func(_ context.Context, release <-chan struct{}) (string, error) {
				<-release
				return "too late", nil
			},
			want: hooks.Result{Status: hooks.StatusTimedOut, Output: "Error: Tool execution timed out.", Failed: true},
		},
		{
			name:    "a tool that returns its context's error at the deadline has timed out",
			timeout: time.Millisecond,
			tool: func(ctx context.Context, _ <-chan struct{}) (string, error) {
				<-ctx.Done()
				return "", fmt.Errorf("waiting: %w", ctx.Err())
			},
			want: hooks.Result{Status: hooks.StatusTimedOut, Output: hooks.TimedOutText, Failed: true},
		},
		{
			name:    "a tool that finishes within the timeout succeeds",
			timeout: time.Hour,
			tool: func(ctx context.Context, _ <-chan struct{}) (string, error) {
				dl, ok := ctx.Deadline()
				if !ok || time.Until(dl) < 59*time.Minute {
					return "", fmt.Errorf("deadline %v (set: %v), want about an hour away", dl, ok)
				}
				return "done", nil
			},
			want: hooks.Result{Status: hooks.StatusSucceeded, Output: "done"},
		},
		{
			name:    "the default timeout is 30 seconds",
			timeout: -1, // not configured
			tool: func(ctx context.Context, _ <-chan struct{}) (string, error) {
				dl, ok := ctx.Deadline()
				if !ok || time.Until(dl) > hooks.DefaultToolTimeout || time.Until(dl) < hooks.DefaultToolTimeout-10*time.Second {
					return "", fmt.Errorf("deadline %v (set: %v), want about 30 s away", dl, ok)
				}
				return "done", nil
			},
			want: hooks.Result{Status: hooks.StatusSucceeded, Output: "done"},
		},
		{
			name:    "a zero timeout means no deadline",
			timeout: 0,
			tool: func(ctx context.Context, _ <-chan struct{}) (string, error) {
				if dl, ok := ctx.Deadline(); ok {
					return "", fmt.Errorf("unexpected deadline %v", dl)
				}
				return "done", nil
			},
			want: hooks.Result{Status: hooks.StatusSucceeded, Output: "done"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			opts := []hooks.Option{hooks.WithLogger(discardLogger())}
			if tt.timeout >= 0 {
				opts = append(opts, hooks.WithToolTimeout(tt.timeout))
			}
			tool := hooks.ToolFunc{ToolName: "slow", Func: func(ctx context.Context, _ map[string]any) (string, error) {
				return tt.tool(ctx, release)
			}}
			e := mustExecutor(t, nil, []hooks.Tool{tool}, opts...)
			checkResult(t, e.Execute(context.Background(), hooks.NewCall("slow", "")), tt.want)
		})
	}
}

func TestExecuteCancelledWhileTheToolRunsIsCancelled(t *testing.T) {
	for _, timeout := range []time.Duration{0, hooks.DefaultToolTimeout} {
		t.Run(fmt.Sprintf("with timeout %v", timeout), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tool := hooks.ToolFunc{ToolName: "t", Func: func(ctx context.Context, _ map[string]any) (string, error) {
				cancel()
				<-ctx.Done() // the caller's cancellation must reach the tool
				return "", ctx.Err()
			}}
			e := mustExecutor(t, nil, []hooks.Tool{tool}, hooks.WithToolTimeout(timeout), hooks.WithLogger(discardLogger()))
			checkResult(t, e.Execute(ctx, hooks.NewCall("t", "")),
				hooks.Result{Status: hooks.StatusCancelled, Output: hooks.CancelledText, Failed: true})
		})
	}
}

func TestExecuteCallerDeadlineIsATimeoutNotACancellation(t *testing.T) {
	// Only the caller's cancellation is "cancelled": the caller's deadline
	// is a timeout, and a tool that finished despite a cancellation succeeded.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	failing := hooks.ToolFunc{ToolName: "t", Func: func(ctx context.Context, _ map[string]any) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	e := mustExecutor(t, nil, []hooks.Tool{failing}, hooks.WithToolTimeout(0), hooks.WithLogger(discardLogger()))
	checkResult(t, e.Execute(ctx, hooks.NewCall("t", "")),
		hooks.Result{Status: hooks.StatusTimedOut, Output: hooks.TimedOutText, Failed: true})

	cctx, ccancel := context.WithCancel(context.Background())
	finishing := hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) {
		ccancel()
		return "done", nil
	}}
	e = mustExecutor(t, nil, []hooks.Tool{finishing}, hooks.WithToolTimeout(0), hooks.WithLogger(discardLogger()))
	checkResult(t, e.Execute(cctx, hooks.NewCall("t", "")), hooks.Result{Status: hooks.StatusSucceeded, Output: "done"})
}

func TestExecuteDurationMeasuresTheToolOnly(t *testing.T) {
	// A fake clock that hooks advance by an hour and the tool by 5 s: the
	// Duration must be exactly the tool's 5 s whatever the hooks cost.
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	slowHook := hooks.HookFuncs{
		HookName: "slow",
		BeforeFunc: func(context.Context, *hooks.Call) (hooks.Verdict, error) {
			clock.Add(int64(time.Hour))
			return hooks.Allow, nil
		},
		AfterFunc: func(context.Context, *hooks.Call, *hooks.Result) { clock.Add(int64(time.Hour)) },
	}
	tool := hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) {
		clock.Add(int64(5 * time.Second))
		return "", nil
	}}
	for _, timeout := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("with timeout %v", timeout), func(t *testing.T) {
			e := mustExecutor(t, []hooks.Entry{{Hook: slowHook}, {Hook: slowHook}}, []hooks.Tool{tool},
				hooks.WithClock(now), hooks.WithToolTimeout(timeout))
			res := e.Execute(context.Background(), hooks.NewCall("t", ""))
			if res.Duration != 5*time.Second {
				t.Errorf("Duration = %v, want the tool's 5s", res.Duration)
			}
		})
	}
}

// mutatingAfter tries to change the result in its after-callback.
type mutatingAfter struct{}

func (mutatingAfter) Name() string { return "mutator" }
func (mutatingAfter) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (mutatingAfter) After(_ context.Context, _ *hooks.Call, res *hooks.Result) {
	res.Output = "tampered"
	res.Status = hooks.StatusFailed
	res.Failed = true
}

// failingAfter's after-callback returns an error.
type failingAfter struct{ mutatingAfter }

func (failingAfter) Name() string { return "failing" }
func (failingAfter) TryAfter(context.Context, *hooks.Call, *hooks.Result) error {
	return errors.New("sink unavailable")
}

func TestExecuteAfterPhaseFailuresNeverReachTheCaller(t *testing.T) {
	tr := &trace{}
	panicky := hooks.HookFuncs{HookName: "panicky", AfterFunc: func(context.Context, *hooks.Call, *hooks.Result) {
		panic("after bug")
	}}
	var lastSaw hooks.Status
	last := hooks.HookFuncs{HookName: "last", AfterFunc: func(ctx context.Context, _ *hooks.Call, res *hooks.Result) {
		tr.add("after:last")
		lastSaw = res.Status
	}}
	logger, logs := testLogger()
	e := mustExecutor(t,
		[]hooks.Entry{{Hook: panicky}, {Hook: mutatingAfter{}}, {Hook: failingAfter{}}, {Hook: last}},
		[]hooks.Tool{hooks.ToolFunc{ToolName: "t", Func: func(context.Context, map[string]any) (string, error) {
			return "real output", nil
		}}},
		hooks.WithLogger(logger))
	res := e.Execute(context.Background(), hooks.NewCall("t", ""))
	checkResult(t, res, hooks.Result{Status: hooks.StatusSucceeded, Output: "real output"})
	if got := tr.get(); !slices.Equal(got, []string{"after:last"}) {
		t.Errorf("after the failures the remaining after-callbacks ran %q, want [after:last]", got)
	}
	if lastSaw == "" {
		t.Error("the last after-callback saw no result")
	}
	for _, want := range []string{"After hook panicked", "after bug", "After hook failed", "sink unavailable", "hook=failing"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not contain %q:\n%s", want, logs.String())
		}
	}
}

func TestCancelledContextDenies(t *testing.T) {
	cancelling := func(cancel context.CancelFunc) before {
		return func(context.Context, *hooks.Call) (hooks.Verdict, error) {
			cancel()
			return hooks.Allow, nil
		}
	}
	tests := []struct {
		name      string
		entries   func(tr *trace, cancel context.CancelFunc) []hooks.Entry
		cancelNow bool
		wantTrace []string
		wantWhy   string
	}{
		{
			name: "a context cancelled before the call denies without consulting any hook",
			entries: func(tr *trace, _ context.CancelFunc) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}, {Hook: traced(tr, "b", allows)}}
			},
			cancelNow: true,
			wantTrace: []string{"after:a:denied", "after:b:denied"},
			wantWhy:   "The call's context ended before hook z could decide: context canceled",
		},
		{
			name: "a context cancelled during the phase denies and later hooks do not run",
			entries: func(tr *trace, cancel context.CancelFunc) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", cancelling(cancel))}, {Hook: traced(tr, "b", allows)}}
			},
			wantTrace: []string{"before:a", "after:a:denied", "after:b:denied"},
			wantWhy:   "The call's context ended before hook b could decide: context canceled",
		},
		{
			name: "a context cancelled by the last hook denies",
			entries: func(tr *trace, cancel context.CancelFunc) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}, {Hook: traced(tr, "b", cancelling(cancel))}}
			},
			wantTrace: []string{"before:a", "before:b", "after:a:denied", "after:b:denied"},
			wantWhy:   "The call's context ended before the before phase completed: context canceled",
		},
		{
			name: "a fail-open hook failing because of cancellation does not let the call through",
			entries: func(tr *trace, cancel context.CancelFunc) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", func(ctx context.Context, _ *hooks.Call) (hooks.Verdict, error) {
					cancel()
					return hooks.Verdict{}, ctx.Err()
				}), FailOpen: true}}
			},
			wantTrace: []string{"before:a", "after:a:denied"},
			wantWhy:   "The call's context ended before the before phase completed: context canceled",
		},
	}
	for _, tt := range tests {
		for _, method := range []string{"Execute", "Evaluate"} {
			t.Run(method+": "+tt.name, func(t *testing.T) {
				tr := &trace{}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				// The after phase must see a live context so the call is still audited.
				afterCtx := hooks.HookFuncs{HookName: "z", AfterFunc: func(ctx context.Context, _ *hooks.Call, _ *hooks.Result) {
					if ctx.Err() != nil {
						tr.add("after:z:cancelled-context")
					}
				}}
				entries := append([]hooks.Entry{{Hook: afterCtx}}, tt.entries(tr, cancel)...)
				e := mustExecutor(t, entries, []hooks.Tool{tracedTool(tr, "t", func(context.Context, map[string]any) (string, error) {
					return "ran", nil
				})}, hooks.WithLogger(discardLogger()))
				if tt.cancelNow {
					cancel()
				}
				run := e.Execute
				if method == "Evaluate" {
					run = e.Evaluate
				}
				got := run(ctx, hooks.NewCall("t", ""))
				checkResult(t, got, hooks.Result{Status: hooks.StatusDenied, Output: "Tool execution denied by hook: context",
					Denial: &hooks.Decision{Hook: hooks.ContextHookName, Rule: hooks.RuleCancelled, Reason: tt.wantWhy,
						Action: hooks.ActionDeny, Layer: hooks.LayerStatic}})
				if events := tr.get(); !slices.Equal(events, tt.wantTrace) {
					t.Errorf("ran %q, want %q", events, tt.wantTrace)
				}
			})
		}
	}
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name      string
		entries   func(tr *trace) []hooks.Entry
		call      *hooks.Call
		want      hooks.Result
		wantTrace []string
	}{
		{
			name: "an allowed call is allowed, the tool does not run, and the after phase records it",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call:      hooks.NewCall("t", ""),
			want:      hooks.Result{Status: hooks.StatusAllowed},
			wantTrace: []string{"before:a", "after:a:allowed"},
		},
		{
			name: "a tool the executor does not know is evaluated by the hooks",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call:      hooks.NewCall("agent_side_tool", ""),
			want:      hooks.Result{Status: hooks.StatusAllowed},
			wantTrace: []string{"before:a", "after:a:allowed"},
		},
		{
			name: "a denied call gets the denial text and decision",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", denies("r", "no")), Policy: strict}, {Hook: traced(tr, "b", allows)}}
			},
			call: hooks.NewCall("agent_side_tool", ""),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "a",
				Denial: &hooks.Decision{Hook: "a", Policy: strict, Rule: "r", Reason: "no", Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
			wantTrace: []string{"before:a", "after:a:denied", "after:b:denied"},
		},
		{
			name: "warn-mode denials are reported on an allowed call",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", denies("r", "no")), Action: hooks.ActionWarn}}
			},
			call: hooks.NewCall("t", ""),
			want: hooks.Result{Status: hooks.StatusAllowed, Warnings: []hooks.Decision{
				{Hook: "a", Rule: "r", Reason: "no", Action: hooks.ActionWarn, Layer: hooks.LayerStatic}}},
			wantTrace: []string{"before:a", "after:a:allowed"},
		},
		{
			name: "invalid arguments are denied",
			entries: func(tr *trace) []hooks.Entry {
				return []hooks.Entry{{Hook: traced(tr, "a", allows)}}
			},
			call:      hooks.NewCall("t", `{"a":1} trailing`),
			wantTrace: []string{"after:a:denied"},
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "arguments",
				Denial: &hooks.Decision{Hook: "arguments", Rule: hooks.RuleInvalidArguments,
					Reason: "The arguments must be one JSON object: invalid tool arguments: unexpected data after the object at byte offset 7",
					Action: hooks.ActionDeny, Layer: hooks.LayerStatic}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &trace{}
			e := mustExecutor(t, tt.entries(tr), []hooks.Tool{tracedTool(tr, "t", func(context.Context, map[string]any) (string, error) {
				return "ran", nil
			})})
			checkResult(t, e.Evaluate(context.Background(), tt.call), tt.want)
			if events := tr.get(); !slices.Equal(events, tt.wantTrace) {
				t.Errorf("ran %q, want %q", events, tt.wantTrace)
			}
		})
	}
}

func TestDecideRunsNoAfterCallback(t *testing.T) {
	tr := &trace{}
	e := mustExecutor(t, []hooks.Entry{{Hook: traced(tr, "a", allows)}}, nil)
	checkResult(t, e.Decide(context.Background(), hooks.NewCall("t", "")), hooks.Result{Status: hooks.StatusAllowed})
	if events := tr.get(); !slices.Equal(events, []string{"before:a"}) {
		t.Errorf("ran %q, want only [before:a]", events)
	}
}

func TestNewExecutorRejectsBadConfiguration(t *testing.T) {
	tool := hooks.ToolFunc{ToolName: "t"}
	tests := []struct {
		name    string
		entries []hooks.Entry
		tools   []hooks.Tool
		wantErr string
	}{
		{name: "an entry without a hook", entries: []hooks.Entry{{}}, wantErr: "hook entry 0: hook is nil"},
		{name: "a hook without a name", entries: []hooks.Entry{{Hook: hooks.HookFuncs{}}}, wantErr: "empty name"},
		{name: "an unknown enforcement action", entries: []hooks.Entry{{Hook: hooks.HookFuncs{HookName: "a"}, Action: "Audit"}},
			wantErr: `unknown enforcement action "Audit"`},
		{name: "a nil tool", tools: []hooks.Tool{nil}, wantErr: "tool 0 is nil"},
		{name: "a tool without a name", tools: []hooks.Tool{hooks.ToolFunc{}}, wantErr: "tool 0 has an empty name"},
		{name: "a tool registered twice", tools: []hooks.Tool{tool, tool}, wantErr: `tool "t" is registered twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := hooks.NewExecutor(tt.entries, tt.tools)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewExecutor = %v, %v; want error containing %q", e, err, tt.wantErr)
			}
		})
	}
}

func TestNewExecutorCopiesItsInputs(t *testing.T) {
	tr := &trace{}
	entries := []hooks.Entry{{Hook: traced(tr, "a", denies("r", "no"))}}
	tools := []hooks.Tool{tracedTool(tr, "t", func(context.Context, map[string]any) (string, error) { return "", nil })}
	e := mustExecutor(t, entries, tools)
	entries[0] = hooks.Entry{Hook: traced(tr, "b", allows)}
	tools[0] = tracedTool(tr, "u", func(context.Context, map[string]any) (string, error) { return "", nil })
	if got := e.Execute(context.Background(), hooks.NewCall("t", "")); got.Output != hooks.DenialText+"a" {
		t.Errorf("after the caller changed its slices, Output = %q, want the original hook's denial", got.Output)
	}
}

func TestExecuteIsSafeForConcurrentUse(t *testing.T) {
	const calls = 1000
	var befores, afters, ran atomic.Int64
	counter := hooks.HookFuncs{
		HookName: "counter",
		BeforeFunc: func(context.Context, *hooks.Call) (hooks.Verdict, error) {
			befores.Add(1)
			return hooks.Allow, nil
		},
		AfterFunc: func(context.Context, *hooks.Call, *hooks.Result) { afters.Add(1) },
	}
	denyOdd := hooks.HookFuncs{HookName: "odd", BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
		if c.SessionID == "odd" {
			return hooks.Deny("odd", "odd calls are denied"), nil
		}
		return hooks.Allow, nil
	}}
	warn := hooks.HookFuncs{HookName: "warn", BeforeFunc: func(context.Context, *hooks.Call) (hooks.Verdict, error) {
		return hooks.Deny("w", "dry run"), nil
	}}
	echo := hooks.ToolFunc{ToolName: "echo", Func: func(_ context.Context, args map[string]any) (string, error) {
		ran.Add(1)
		return fmt.Sprint(args["n"]), nil
	}}
	e := mustExecutor(t, []hooks.Entry{{Hook: counter}, {Hook: warn, Action: hooks.ActionWarn}, {Hook: denyOdd}},
		[]hooks.Tool{echo})

	var wg sync.WaitGroup
	errs := make(chan error, calls)
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			call := hooks.NewCall("echo", fmt.Sprintf(`{"n":%d}`, i))
			call.SessionID = "even"
			if i%2 == 1 {
				call.SessionID = "odd"
			}
			<-start
			res := e.Execute(context.Background(), call)
			switch {
			case len(res.Warnings) != 1 || res.Warnings[0].Reason != "dry run":
				errs <- fmt.Errorf("call %d: warnings %+v", i, res.Warnings)
			case i%2 == 1 && (res.Status != hooks.StatusDenied || res.Output != hooks.DenialText+"odd"):
				errs <- fmt.Errorf("call %d: got %q %q, want a denial by odd", i, res.Status, res.Output)
			case i%2 == 0 && (res.Status != hooks.StatusSucceeded || res.Output != fmt.Sprint(i)):
				errs <- fmt.Errorf("call %d: got %q %q, want its own output %d", i, res.Status, res.Output, i)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if befores.Load() != calls || afters.Load() != calls || ran.Load() != calls/2 {
		t.Errorf("before ran %d times, after %d, tool %d; want %d, %d, %d",
			befores.Load(), afters.Load(), ran.Load(), calls, calls, calls/2)
	}
}
