package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// fakePlain is a PlainHook recording what it was given.
type fakePlain struct {
	allow     bool
	beforeErr error
	afterErr  error

	mu     sync.Mutex
	events []string
}

func (f *fakePlain) Name() string { return "plain" }

func (f *fakePlain) BeforeExecute(_ context.Context, tool, args string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("before(%s, %s)", tool, args))
	return f.allow, f.beforeErr
}

func (f *fakePlain) AfterExecute(_ context.Context, tool, args, result string, d time.Duration, failed bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("after(%s, %s, %s, %v, %v)", tool, args, result, d, failed))
	return f.afterErr
}

func (f *fakePlain) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func TestFromPlain(t *testing.T) {
	echo := hooks.ToolFunc{ToolName: "echo", Func: func(context.Context, map[string]any) (string, error) {
		return "out", nil
	}}
	broken := hooks.ToolFunc{ToolName: "broken", Func: func(context.Context, map[string]any) (string, error) {
		return "", errors.New("broken")
	}}
	tests := []struct {
		name       string
		hook       *fakePlain
		entry      hooks.Entry // Hook is filled in
		call       *hooks.Call
		want       hooks.Result
		wantEvents []string
		wantLog    string
	}{
		{
			name:       "a plain hook that allows gets the tool name and raw arguments, then the result",
			hook:       &fakePlain{allow: true},
			call:       hooks.NewCall("echo", ` {"path":"a"} `),
			want:       hooks.Result{Status: hooks.StatusSucceeded, Output: "out"},
			wantEvents: []string{`before(echo,  {"path":"a"} )`, `after(echo,  {"path":"a"} , out, 0s, false)`},
		},
		{
			name:       "absent arguments reach a plain hook as {}",
			hook:       &fakePlain{allow: true},
			call:       hooks.NewCall("echo", ""),
			want:       hooks.Result{Status: hooks.StatusSucceeded, Output: "out"},
			wantEvents: []string{`before(echo, {})`, `after(echo, {}, out, 0s, false)`},
		},
		{
			name:       "a plain hook sees a failed tool as failed",
			hook:       &fakePlain{allow: true},
			call:       hooks.NewCall("broken", "{}"),
			want:       hooks.Result{Status: hooks.StatusFailed, Output: hooks.FailedText, Failed: true},
			wantEvents: []string{`before(broken, {})`, `after(broken, {}, Error: Tool execution failed., 0s, true)`},
		},
		{
			name:  "false from a plain hook denies with rule PlainHookDenied and its after-callback is not called",
			hook:  &fakePlain{allow: false},
			entry: hooks.Entry{Policy: strict},
			call:  hooks.NewCall("echo", "{}"),
			want: hooks.Result{Status: hooks.StatusDenied, Output: "Tool execution denied by hook: plain",
				Denial: &hooks.Decision{Hook: "plain", Policy: strict, Rule: hooks.RulePlainHookDenied,
					Reason: "Hook plain denied the call", Action: hooks.ActionDeny}},
			wantEvents: []string{`before(echo, {})`},
		},
		{
			name: "an error from a plain hook denies",
			hook: &fakePlain{allow: true, beforeErr: errors.New("bridge down")},
			call: hooks.NewCall("echo", "{}"),
			want: hooks.Result{Status: hooks.StatusDenied, Output: hooks.DenialText + "plain",
				Denial: &hooks.Decision{Hook: "plain", Rule: hooks.RuleHookError,
					Reason: "Hook plain failed: before-execute: bridge down", Action: hooks.ActionDeny}},
			wantEvents: []string{`before(echo, {})`},
		},
		{
			name:       "an error from a fail-open plain hook allows",
			hook:       &fakePlain{allow: false, beforeErr: errors.New("bridge down")},
			entry:      hooks.Entry{FailOpen: true},
			call:       hooks.NewCall("echo", "{}"),
			want:       hooks.Result{Status: hooks.StatusSucceeded, Output: "out"},
			wantEvents: []string{`before(echo, {})`, `after(echo, {}, out, 0s, false)`},
			wantLog:    "bridge down",
		},
		{
			name:       "an after-callback error is logged by the executor and changes nothing",
			hook:       &fakePlain{allow: true, afterErr: errors.New("plugin crashed")},
			call:       hooks.NewCall("echo", "{}"),
			want:       hooks.Result{Status: hooks.StatusSucceeded, Output: "out"},
			wantEvents: []string{`before(echo, {})`, `after(echo, {}, out, 0s, false)`},
			wantLog:    "after-execute: plugin crashed",
		},
		{
			name:       "an unknown tool reaches neither callback of a plain hook",
			hook:       &fakePlain{allow: true},
			call:       hooks.NewCall("nope", "{}"),
			want:       hooks.Result{Status: hooks.StatusUnknownTool, Output: hooks.UnknownToolText},
			wantEvents: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entry := tt.entry
			entry.Hook = hooks.FromPlain(tt.hook)
			logger, logs := testLogger()
			frozen := time.Unix(0, 0)
			e := mustExecutor(t, []hooks.Entry{entry}, []hooks.Tool{echo, broken}, hooks.WithLogger(logger),
				hooks.WithClock(func() time.Time { return frozen }))
			checkResult(t, e.Execute(context.Background(), tt.call), tt.want)
			if got := tt.hook.get(); !slices.Equal(got, tt.wantEvents) {
				t.Errorf("plain hook saw %q, want %q", got, tt.wantEvents)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q does not contain %q", logs.String(), tt.wantLog)
			}
		})
	}
}

func TestFromPlainKeepsTheName(t *testing.T) {
	if got := hooks.FromPlain(&fakePlain{}).Name(); got != "plain" {
		t.Errorf("Name() = %q, want plain", got)
	}
}

func TestHookFuncsWithoutFunctionsAllows(t *testing.T) {
	h := hooks.HookFuncs{HookName: "empty"}
	v, err := h.Before(context.Background(), hooks.NewCall("t", ""))
	if err != nil || !v.Allowed {
		t.Errorf("Before = %+v, %v; want Allow", v, err)
	}
	h.After(context.Background(), hooks.NewCall("t", ""), &hooks.Result{}) // must not panic
}
