package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// trace records, in order, the phases hooks and the audit sink went through.
type trace struct {
	mu    sync.Mutex
	steps []string
}

func (tr *trace) add(step string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.steps = append(tr.steps, step)
}

// take returns the steps so far and forgets them.
func (tr *trace) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.steps
	tr.steps = nil
	return out
}

// tracedHook records its before and after calls; it denies the tools in deny.
func (tr *trace) hook(name string, deny ...string) hooks.Hook {
	return hooks.HookFuncs{
		HookName: name,
		BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
			tr.add("before " + name)
			if slices.Contains(deny, c.Tool) {
				return hooks.Deny("NoDeletes", name+" never deletes"), nil
			}
			return hooks.Allow, nil
		},
		AfterFunc: func(context.Context, *hooks.Call, *hooks.Result) { tr.add("after " + name) },
	}
}

func okTools(names ...string) []hooks.Tool {
	out := make([]hooks.Tool, 0, len(names))
	for _, n := range names {
		out = append(out, hooks.ToolFunc{ToolName: n, Func: func(context.Context, map[string]any) (string, error) {
			return n + " done", nil
		}})
	}
	return out
}

// pluginAndPolicy is a configuration with an AutonomyPolicy denying drop_*
// and a PluginHook on every tool.
const pluginAndPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: no-drops}
spec: {tools: {deny: ["drop_*"]}}
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: PluginHook
metadata: {name: plugin}
spec:
  events: ["tool:before", "tool:after"]
  transport: {http: {url: "http://127.0.0.1:9/"}}
`

func TestNativeHooksRunAfterTheCompiledHooksInOrder(t *testing.T) {
	tr := &trace{}
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = okTools("query", "delete_db", "drop_db")
		o.Audit = audit.SinkFunc(func(_ context.Context, r audit.Record) error {
			tr.add("audit " + string(r.Outcome))
			return nil
		})
		o.Plugins = func(h gatewayconfig.Hook) (hooks.Hook, error) { return tr.hook(h.Name), nil }
		o.Native = []hooks.Entry{{Hook: tr.hook("native-1", "delete_db")}, {Hook: tr.hook("native-2")}}
	})

	// Before the first configuration the gateway denies without them.
	if r := e.call("query", `{}`); r.Denial == nil || r.Denial.Hook != gateway.GatewayHookName {
		t.Fatalf("call before the first configuration: %+v", r)
	}
	if got, want := tr.take(), []string{"audit denied"}; !slices.Equal(got, want) {
		t.Errorf("before the first configuration: steps %q, want %q", got, want)
	}

	e.mustPush(compileYAML(t, e.ws, pluginAndPolicy))
	const plugin = "PluginHook/default/plugin"
	for _, tc := range []struct {
		tool, status, hook string
		steps              []string
	}{
		{"query", "succeeded", "", []string{
			"before " + plugin, "before native-1", "before native-2",
			"audit allowed", // the decision record, before the tool runs
			"audit succeeded", "after " + plugin, "after native-1", "after native-2",
		}},
		{"delete_db", "denied", "native-1", []string{
			"before " + plugin, "before native-1",
			"audit denied", "after " + plugin, "after native-1", "after native-2",
		}},
		// The policy denies first: no native before-callback runs, every after-callback does.
		{"drop_db", "denied", "AutonomyPolicy/default/no-drops", []string{
			"audit denied", "after " + plugin, "after native-1", "after native-2",
		}},
	} {
		r := e.call(tc.tool, `{}`)
		if r.Status != tc.status || (r.Denial == nil) != (tc.hook == "") || (r.Denial != nil && r.Denial.Hook != tc.hook) {
			t.Errorf("%s: %+v, want %s by %q", tc.tool, r, tc.status, tc.hook)
		}
		if got := tr.take(); !slices.Equal(got, tc.steps) {
			t.Errorf("%s: steps\n %q\nwant\n %q", tc.tool, got, tc.steps)
		}
	}
}

func TestANativeDenialIsStructuredWithItsHookAndNoPolicy(t *testing.T) {
	sunk := make(chan hooks.Decision, 1)
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = okTools("query", "delete_db")
		o.DenialSink = gateway.DenialSinkFunc(func(_ context.Context, _ *hooks.Call, d hooks.Decision) { sunk <- d })
		o.Native = []hooks.Entry{{Hook: (&trace{}).hook("no-deletes", "delete_db")}}
	})
	e.mustPush(compileYAML(t, e.ws, basePolicy))

	want := wire.Denial{Hook: "no-deletes", Rule: "NoDeletes", Reason: "no-deletes never deletes", EnforcementAction: "Deny"}
	r := e.call("delete_db", `{}`)
	if r.Status != "denied" || r.Result != hooks.DenialText+"no-deletes" || r.Denial == nil || *r.Denial != want {
		t.Errorf("tool call: %+v denial %+v, want %+v", r, r.Denial, want)
	}
	if d := e.decide("delete_db", `{}`); d.Allowed || d.Denial == nil || *d.Denial != want {
		t.Errorf("decision: %+v, want denial %+v", d, want)
	}
	d := <-sunk
	if d.Hook != "no-deletes" || d.Policy != (hooks.PolicyRef{}) || d.Rule != "NoDeletes" || d.Action != hooks.ActionDeny {
		t.Errorf("denial sink got %+v", d)
	}
	if r := e.call("query", `{}`); r.Status != "succeeded" {
		t.Errorf("allowed call: %+v", r)
	}
	if m := e.metrics(); !strings.Contains(m, `toolhooks_denials_total{hook="no-deletes",tool="delete_db"} 2`) {
		t.Errorf("the native denial is not counted under its hook name:\n%s", grepLines(m, "toolhooks_denials_total"))
	}
}

func TestAWarnModeNativeHookOnlyWarns(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = okTools("delete_db")
		o.Native = []hooks.Entry{{Hook: (&trace{}).hook("no-deletes", "delete_db"), Action: hooks.ActionWarn}}
	})
	e.mustPush(compileYAML(t, e.ws, basePolicy))

	want := []wire.Denial{{Hook: "no-deletes", Rule: "NoDeletes", Reason: "no-deletes never deletes", EnforcementAction: "Warn"}}
	if r := e.call("delete_db", `{}`); r.Status != "succeeded" || r.Result != "delete_db done" || r.Denial != nil || !slices.Equal(r.Warnings, want) {
		t.Errorf("tool call: %+v, want success with warnings %+v", r, want)
	}
	if d := e.decide("delete_db", `{}`); !d.Allowed || !slices.Equal(d.Warnings, want) {
		t.Errorf("decision: %+v", d)
	}
	if m := e.metrics(); !strings.Contains(m, `toolhooks_warnings_total{hook="no-deletes",tool="delete_db"} 2`) {
		t.Errorf("the native warning is not counted under its hook name:\n%s", grepLines(m, "toolhooks_warnings_total"))
	}
}

func TestAFailOpenNativeHookThatErrorsAllows(t *testing.T) {
	failing := hooks.HookFuncs{HookName: "flaky", BeforeFunc: func(context.Context, *hooks.Call) (hooks.Verdict, error) {
		return hooks.Verdict{}, errors.New("backend down")
	}}
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = okTools("query")
		o.Native = []hooks.Entry{{Hook: failing, FailOpen: true}, {Hook: hooks.HookFuncs{HookName: "strict", BeforeFunc: failing.BeforeFunc}}}
	})
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	r := e.call("query", `{}`)
	if r.Status != "denied" || r.Denial == nil || r.Denial.Hook != "strict" || r.Denial.Rule != hooks.RuleHookError || r.Denial.Policy != nil {
		t.Errorf("got %+v denial %+v: want the fail-closed hook to deny and the fail-open one to allow", r, r.Denial)
	}
}

func TestNewRejectsInvalidNativeHooks(t *testing.T) {
	a := hooks.HookFuncs{HookName: "a"}
	tests := []struct {
		name    string
		native  []hooks.Entry
		wantErr string
	}{
		{"a nil hook", []hooks.Entry{{}}, "native hook 0: hook is nil"},
		{"an empty name", []hooks.Entry{{Hook: hooks.HookFuncs{}}}, "native hook 0: hook has an empty name"},
		{"a name with a slash", []hooks.Entry{{Hook: hooks.HookFuncs{HookName: "AutonomyPolicy/default/x"}}}, `may not contain "/"`},
		{"the AuditLog name", []hooks.Entry{{Hook: hooks.HookFuncs{HookName: audit.Name}}}, `native hook "AuditLog": the name is reserved`},
		{"the gateway's name", []hooks.Entry{{Hook: hooks.HookFuncs{HookName: gateway.GatewayHookName}}}, "reserved"},
		{"the arguments pseudo-hook's name", []hooks.Entry{{Hook: hooks.HookFuncs{HookName: hooks.ArgumentsHookName}}}, "reserved"},
		{"the context pseudo-hook's name", []hooks.Entry{{Hook: hooks.HookFuncs{HookName: hooks.ContextHookName}}}, "reserved"},
		{"a duplicate name", []hooks.Entry{{Hook: a}, {Hook: a, Action: hooks.ActionWarn}}, `native hook "a" is given twice`},
		{"an unknown action", []hooks.Entry{{Hook: a, Action: "Maybe"}}, `unknown enforcement action "Maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gateway.New(gateway.Options{Workspace: t.TempDir(), Tools: okTools("query"), Native: tt.native, Logger: discardLogger()})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestAConfigurationNamingANativeHookIsRejected(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = okTools("query")
		o.Native = []hooks.Entry{{Hook: hooks.HookFuncs{HookName: "mine"}}}
	})
	first := e.mustPush(compileYAML(t, e.ws, basePolicy))
	clash := &gatewayconfig.Config{IssuedAt: first.IssuedAt + 1, Hooks: []gatewayconfig.Hook{
		{Name: audit.Name, Kind: gatewayconfig.KindAuditLog},
		{Name: "mine", Kind: gatewayconfig.KindAutonomyPolicy, Autonomy: &gatewayconfig.Autonomy{ToolDeny: []string{"query"}}},
	}}
	status, body := e.push(clash)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), `hook name \"mine\" is taken by a native hook`) {
		t.Errorf("push answered %d %s", status, body)
	}
	if _, err := e.srv.Apply(context.Background(), clash, "test"); !errors.Is(err, gateway.ErrInvalidConfig) {
		t.Errorf("Apply = %v, want ErrInvalidConfig", err)
	}
	if st := e.srv.Status(); st.Revision != first.Revision {
		t.Errorf("revision in force %s, want %s (the rejected push must change nothing)", st.Revision, first.Revision)
	}
}

func TestNewCopiesTheNativeHooks(t *testing.T) {
	tr := &trace{}
	native := []hooks.Entry{{Hook: tr.hook("mine")}}
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = okTools("query")
		o.Native = native
	})
	native[0] = hooks.Entry{Hook: tr.hook("mine", "query")}
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	if r := e.call("query", `{}`); r.Status != "succeeded" {
		t.Errorf("changing the caller's slice after New changed the gateway's hooks: %+v", r)
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return fmt.Sprint(out)
}

func TestConfigStatusReportsDegradedPlugins(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Degraded = func() []string { return []string{"PluginHook/default/approvals"} }
	})
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	var st wire.ConfigStatus
	_, body := e.do(http.MethodGet, "/v1/config", "", nil, nil)
	mustUnmarshal(t, body, &st)
	if len(st.Degraded) != 1 || st.Degraded[0] != "PluginHook/default/approvals" {
		t.Errorf("GET /v1/config degraded = %v, want the approvals plugin", st.Degraded)
	}
}
