package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// runtimeHook allows every call in the before phase and denies, at run time,
// any argv or path containing "forbidden". It counts its after-callbacks.
type runtimeHook struct {
	name   string
	afters atomic.Int32
	panic  bool
}

func (h *runtimeHook) Name() string { return h.name }
func (h *runtimeHook) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (h *runtimeHook) After(context.Context, *hooks.Call, *hooks.Result) { h.afters.Add(1) }

func (h *runtimeHook) CheckExec(_ context.Context, _ *hooks.Call, dir string, env, argv []string) hooks.Verdict {
	if h.panic {
		panic("boom")
	}
	if strings.Contains(strings.Join(argv, " "), "forbidden") {
		return hooks.Deny("argvRule", fmt.Sprintf("argv %q in %s", argv, dir))
	}
	return hooks.Allow
}

func (h *runtimeHook) CheckOpen(_ context.Context, _ *hooks.Call, path string, write bool) hooks.Verdict {
	if h.panic {
		panic("boom")
	}
	if strings.Contains(path, "forbidden") {
		return hooks.Deny("pathRule", fmt.Sprintf("open %s write=%v", path, write))
	}
	return hooks.Allow
}

// guardedTool asks the guard about argv, then about path, and records
// whether it acted.
func guardedTool(acted *atomic.Bool) hooks.Tool {
	return hooks.ToolFunc{ToolName: "run", Func: func(ctx context.Context, args map[string]any) (string, error) {
		g, err := hooks.GuardFromContext(ctx)
		if err != nil {
			return "", err
		}
		argv, _ := args["argv"].(string)
		if err := g.Exec(ctx, "/ws", nil, strings.Fields(argv)); err != nil {
			return "", fmt.Errorf("running: %w", err)
		}
		path, _ := args["path"].(string)
		if err := g.Open(ctx, path, true); err != nil {
			return "", err
		}
		acted.Store(true)
		return "done", nil
	}}
}

func TestARuntimeDenialIsADeniedResultWithItsDecision(t *testing.T) {
	h := &runtimeHook{name: "rt"}
	var acted atomic.Bool
	pol := hooks.PolicyRef{Kind: "AutonomyPolicy", Namespace: "ns", Name: "p"}
	e := mustExecutor(t, []hooks.Entry{{Hook: h, Policy: pol}}, []hooks.Tool{guardedTool(&acted)})

	res := e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"ls forbidden","path":"ok"}`))
	if res.Status != hooks.StatusDenied || res.Output != hooks.DenialText+"rt" || acted.Load() {
		t.Fatalf("got %+v (acted %v)", res, acted.Load())
	}
	d := res.Denial
	if d == nil || d.Allowed || d.Hook != "rt" || d.Policy != pol || d.Rule != "argvRule" || d.Action != hooks.ActionDeny ||
		d.Layer != hooks.LayerRuntime || !strings.Contains(d.Reason, `"ls" "forbidden"`) {
		t.Errorf("decision %+v", d)
	}
	if n := h.afters.Load(); n != 1 {
		t.Errorf("after-callbacks: %d, want exactly one per call", n)
	}

	res = e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"ls","path":"a/forbidden"}`))
	if res.Status != hooks.StatusDenied || res.Denial.Rule != "pathRule" || acted.Load() {
		t.Errorf("open denial: %+v", res)
	}
	res = e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"ls","path":"fine"}`))
	if res.Status != hooks.StatusSucceeded || !acted.Load() {
		t.Errorf("allowed call: %+v", res)
	}
}

func TestAWarnEntryRecordsARuntimeWarningOnceAndDoesNotBlock(t *testing.T) {
	h := &runtimeHook{name: "rt"}
	var acted atomic.Bool
	e := mustExecutor(t, []hooks.Entry{{Hook: h, Action: hooks.ActionWarn}}, []hooks.Tool{guardedTool(&acted)})
	res := e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"forbidden forbidden","path":"forbidden"}`))
	if res.Status != hooks.StatusSucceeded || !acted.Load() {
		t.Fatalf("a warn entry blocked: %+v", res)
	}
	if len(res.Warnings) != 2 || res.Warnings[0].Rule != "argvRule" || res.Warnings[1].Rule != "pathRule" ||
		res.Warnings[0].Action != hooks.ActionWarn || res.Warnings[0].Layer != hooks.LayerRuntime {
		t.Errorf("warnings %+v", res.Warnings)
	}
}

func TestAPanickingRuntimeCheckDeniesUnlessFailOpen(t *testing.T) {
	var acted atomic.Bool
	e := mustExecutor(t, []hooks.Entry{{Hook: &runtimeHook{name: "rt", panic: true}}}, []hooks.Tool{guardedTool(&acted)},
		hooks.WithLogger(discardLogger()))
	res := e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"ls","path":"x"}`))
	if res.Status != hooks.StatusDenied || res.Denial.Rule != hooks.RuleRuntimeGuardPanic || acted.Load() {
		t.Errorf("panic: %+v", res)
	}
	e = mustExecutor(t, []hooks.Entry{{Hook: &runtimeHook{name: "rt", panic: true}, FailOpen: true}},
		[]hooks.Tool{guardedTool(&acted)}, hooks.WithLogger(discardLogger()))
	if res := e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"ls","path":"x"}`)); res.Status != hooks.StatusSucceeded {
		t.Errorf("fail-open panic: %+v", res)
	}
}

func TestEveryToolGetsAGuardAndNoneOutsideAnExecutor(t *testing.T) {
	var acted atomic.Bool
	tool := guardedTool(&acted)
	if _, err := tool.Execute(context.Background(), map[string]any{"argv": "ls", "path": "x"}); !errors.Is(err, hooks.ErrNoGuard) || acted.Load() {
		t.Errorf("without a guard: %v (acted %v)", err, acted.Load())
	}
	e := mustExecutor(t, nil, []hooks.Tool{tool})
	if res := e.Execute(context.Background(), hooks.NewCall("run", `{"argv":"ls","path":"x"}`)); res.Status != hooks.StatusSucceeded || !acted.Load() {
		t.Errorf("an executor without runtime hooks still attaches a guard: %+v", res)
	}
}

func TestRefusesAsksOnlyEnforcedEntriesAndRecordsNoWarning(t *testing.T) {
	call := &hooks.Call{Tool: "run"}
	for _, tc := range []struct {
		name  string
		entry hooks.Entry
		path  string
		want  bool
	}{
		{"a denying entry", hooks.Entry{Hook: &runtimeHook{name: "rt"}}, "/ws/forbidden", true},
		{"an allowing entry", hooks.Entry{Hook: &runtimeHook{name: "rt"}}, "/ws/fine", false},
		{"a Warn entry's denial", hooks.Entry{Hook: &runtimeHook{name: "rt"}, Action: hooks.ActionWarn}, "/ws/forbidden", false},
		{"a panicking entry", hooks.Entry{Hook: &runtimeHook{name: "rt", panic: true}}, "/ws/fine", true},
		{"a panicking fail-open entry", hooks.Entry{Hook: &runtimeHook{name: "rt", panic: true}, FailOpen: true}, "/ws/fine", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := hooks.NewGuard(call, tc.entry)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Refuses(context.Background(), tc.path); got != tc.want {
				t.Errorf("Refuses(%s) = %v", tc.path, got)
			}
			if w := g.Warnings(); len(w) != 0 {
				t.Errorf("warnings %+v", w)
			}
		})
	}
	g, err := hooks.NewGuard(call)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if !g.Refuses(ctx, "/ws/fine") {
		t.Error("an abandoned call's guard let a name through")
	}
}
