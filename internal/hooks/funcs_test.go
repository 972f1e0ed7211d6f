package hooks_test

import (
	"context"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestHookFuncsWithoutFunctionsAllows(t *testing.T) {
	h := hooks.HookFuncs{HookName: "empty"}
	v, err := h.Before(context.Background(), hooks.NewCall("t", ""))
	if err != nil || !v.Allowed {
		t.Errorf("Before = %+v, %v; want Allow", v, err)
	}
	h.After(context.Background(), hooks.NewCall("t", ""), &hooks.Result{}) // must not panic
}
