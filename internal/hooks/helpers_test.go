package hooks_test

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// trace records, in order, which callbacks and tools ran.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (tr *trace) add(event string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, event)
}

func (tr *trace) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.events)
}

// before is what a traced hook's Before does after recording itself.
type before func(ctx context.Context, call *hooks.Call) (hooks.Verdict, error)

func allows(context.Context, *hooks.Call) (hooks.Verdict, error) { return hooks.Allow, nil }

func denies(rule, reason string) before {
	return func(context.Context, *hooks.Call) (hooks.Verdict, error) { return hooks.Deny(rule, reason), nil }
}

func fails(err error) before {
	return func(context.Context, *hooks.Call) (hooks.Verdict, error) { return hooks.Verdict{}, err }
}

func panics(v any) before {
	return func(context.Context, *hooks.Call) (hooks.Verdict, error) { panic(v) }
}

// traced returns a hook that records "before:<name>" and
// "after:<name>:<status>" in tr and decides with b.
func traced(tr *trace, name string, b before) hooks.Hook {
	return hooks.HookFuncs{
		HookName: name,
		BeforeFunc: func(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
			tr.add("before:" + name)
			return b(ctx, call)
		},
		AfterFunc: func(_ context.Context, _ *hooks.Call, res *hooks.Result) {
			tr.add("after:" + name + ":" + string(res.Status))
		},
	}
}

// tracedTool returns a tool named name that records "tool:<name>" in tr and runs fn.
func tracedTool(tr *trace, name string, fn func(ctx context.Context, args map[string]any) (string, error)) hooks.Tool {
	return hooks.ToolFunc{ToolName: name, Func: func(ctx context.Context, args map[string]any) (string, error) {
		tr.add("tool:" + name)
		return fn(ctx, args)
	}}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers, for loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger returns a logger writing text records to the returned buffer.
func testLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

// mustExecutor builds an Executor or fails the test.
func mustExecutor(t testing.TB, entries []hooks.Entry, tools []hooks.Tool, opts ...hooks.Option) *hooks.Executor {
	t.Helper()
	e, err := hooks.NewExecutor(entries, tools, opts...)
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	return e
}

// checkResult compares everything in a Result but Duration.
func checkResult(t *testing.T, got, want hooks.Result) {
	t.Helper()
	if got.Status != want.Status {
		t.Errorf("Status = %q, want %q", got.Status, want.Status)
	}
	if got.Output != want.Output {
		t.Errorf("Output = %q, want %q", got.Output, want.Output)
	}
	if got.Failed != want.Failed {
		t.Errorf("Failed = %v, want %v", got.Failed, want.Failed)
	}
	if !reflect.DeepEqual(got.Denial, want.Denial) {
		t.Errorf("Denial = %+v, want %+v", deref(got.Denial), deref(want.Denial))
	}
	if !reflect.DeepEqual(got.Warnings, want.Warnings) {
		t.Errorf("Warnings = %+v, want %+v", got.Warnings, want.Warnings)
	}
}

func deref(d *hooks.Decision) any {
	if d == nil {
		return nil
	}
	return *d
}

// discardLogger returns a logger that drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
