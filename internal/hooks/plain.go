package hooks

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// PlainHook is a hook that needs only the tool name and the raw arguments
// text, as the seed's IToolHook (and the plugin bridge) does. Adapt it with
// FromPlain. Implementations must be safe for concurrent use.
type PlainHook interface {
	// Name identifies the hook in denials and logs.
	Name() string
	// BeforeExecute returns false to deny the call; an error denies it unless
	// the hook's Entry is fail-open.
	BeforeExecute(ctx context.Context, tool, args string) (bool, error)
	// AfterExecute observes a call whose tool ran; its error is logged.
	AfterExecute(ctx context.Context, tool, args, result string, d time.Duration, failed bool) error
}

// FromPlain adapts a PlainHook to Hook. A false from BeforeExecute becomes a
// denial with rule PlainHookDenied. The arguments text passed is exactly what
// the caller sent, or "{}" when that was blank. AfterExecute runs only for
// calls whose tool ran (succeeded, failed, timed out), as in the seed; its
// error reaches the executor's logger through FallibleAfterHook.
func FromPlain(h PlainHook) Hook {
	return plainHook{h: h}
}

// plainHook adapts a PlainHook to Hook and FallibleAfterHook.
type plainHook struct {
	h PlainHook
}

var _ FallibleAfterHook = plainHook{}

// Name returns the plain hook's name.
func (p plainHook) Name() string { return p.h.Name() }

// Before calls BeforeExecute with the tool name and the arguments text.
func (p plainHook) Before(ctx context.Context, call *Call) (Verdict, error) {
	ok, err := p.h.BeforeExecute(ctx, call.Tool, call.ArgsText())
	if err != nil {
		return Verdict{}, fmt.Errorf("before-execute: %w", err)
	}
	if !ok {
		return Deny(RulePlainHookDenied, "Hook "+p.h.Name()+" denied the call"), nil
	}
	return Allow, nil
}

// After calls TryAfter and logs its error to slog.Default(); the executor
// calls TryAfter directly and logs with its own logger.
func (p plainHook) After(ctx context.Context, call *Call, res *Result) {
	if err := p.TryAfter(ctx, call, res); err != nil {
		slog.Default().WarnContext(ctx, "After hook failed", "hook", p.h.Name(), "tool", call.Tool, "error", err)
	}
}

// TryAfter calls AfterExecute for calls whose tool ran.
func (p plainHook) TryAfter(ctx context.Context, call *Call, res *Result) error {
	switch res.Status {
	case StatusSucceeded, StatusFailed, StatusTimedOut:
	default:
		return nil
	}
	if err := p.h.AfterExecute(ctx, call.Tool, call.ArgsText(), res.Output, res.Duration, res.Failed); err != nil {
		return fmt.Errorf("after-execute: %w", err)
	}
	return nil
}

// HookFuncs is a Hook built from functions, for native hooks and tests. A nil
// BeforeFunc allows every call; a nil AfterFunc does nothing.
type HookFuncs struct {
	// HookName is returned by Name.
	HookName string
	// BeforeFunc implements Before.
	BeforeFunc func(ctx context.Context, call *Call) (Verdict, error)
	// AfterFunc implements After.
	AfterFunc func(ctx context.Context, call *Call, res *Result)
}

// Name returns HookName.
func (h HookFuncs) Name() string { return h.HookName }

// Before calls BeforeFunc, or allows when it is nil.
func (h HookFuncs) Before(ctx context.Context, call *Call) (Verdict, error) {
	if h.BeforeFunc == nil {
		return Allow, nil
	}
	return h.BeforeFunc(ctx, call)
}

// After calls AfterFunc when it is set.
func (h HookFuncs) After(ctx context.Context, call *Call, res *Result) {
	if h.AfterFunc != nil {
		h.AfterFunc(ctx, call, res)
	}
}
