package hooks

import "context"

// HookFuncs is a Hook built from functions, for tests and small built-in hooks. A nil
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
