package gatewayconfig

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/plugins"
)

func discard() audit.Sink {
	return audit.SinkFunc(func(context.Context, audit.Record) error { return nil })
}

func newConfig(list ...Hook) *Config {
	list = append([]Hook{{Name: "AuditLog", Kind: KindAuditLog}}, list...)
	return &Config{Revision: ComputeRevision(list), Hooks: list}
}

func executor(t *testing.T, cfg *Config, opts BuildOptions) *hooks.Executor {
	t.Helper()
	if opts.Audit == nil {
		opts.Audit = discard()
	}
	entries, err := Build(cfg, opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	e, err := hooks.NewExecutor(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func decide(e *hooks.Executor, session, tool, args string) hooks.Result {
	call := hooks.NewCall(tool, args)
	call.SessionID, call.SenderID = session, "agent"
	return e.Evaluate(context.Background(), call)
}

func TestValidateRejectsBadEntriesWithTheirClass(t *testing.T) {
	cases := []struct {
		name string
		hook Hook
		want error
	}{
		{"a forbidden glob that does not parse", Hook{Name: "a", Kind: autonomy.KindName,
			Spec: MarshalSpec(&autonomy.Config{WorkspaceRoot: "/w", ForbiddenPathGlobs: []string{"/w/[x"}})}, hooks.ErrInvalidGlob},
		{"a relative workspace root", Hook{Name: "a", Kind: autonomy.KindName,
			Spec: MarshalSpec(&autonomy.Config{WorkspaceRoot: "w", WorkspaceOnly: true})}, hooks.ErrInvalidPath},
		{"an unknown mode", Hook{Name: "a", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{Mode: "yolo"})}, hooks.ErrInvalidSpec},
		{"a contract subject glob that does not parse", Hook{Name: "c", Kind: contract.KindName,
			Spec: MarshalSpec(&contract.Spec{Subjects: hooks.Subjects{Sessions: []string{"s-["}}})}, hooks.ErrInvalidGlob},
		{"an allowed path with a NUL byte", Hook{Name: "c", Kind: contract.KindName,
			Spec: MarshalSpec(&contract.Spec{Contract: contract.Contract{AllowedPaths: []string{"/w\x00"}}})}, hooks.ErrInvalidPath},
		{"a plugin with both transports", Hook{Name: "p", Kind: plugins.KindName, Spec: MarshalSpec(&plugins.Spec{Before: true, TimeoutMillis: 10,
			HTTP: &plugins.HTTPSpec{URL: "http://x"}, Stdio: &plugins.StdioSpec{Command: "node"}})}, hooks.ErrInvalidSpec},
		{"a plugin timeout above 30s", Hook{Name: "p", Kind: plugins.KindName, Spec: MarshalSpec(&plugins.Spec{Before: true, TimeoutMillis: 30001,
			Stdio: &plugins.StdioSpec{Command: "node"}})}, hooks.ErrInvalidSpec},
		{"an entry whose spec does not match its kind", Hook{Name: "x", Kind: autonomy.KindName, Spec: MarshalSpec(&contract.Spec{Contract: contract.Contract{MaxToolCalls: 1}})}, hooks.ErrInvalidSpec},
		{"an unknown action", Hook{Name: "a", Kind: autonomy.KindName, Action: "Audit", Spec: MarshalSpec(&autonomy.Config{})}, hooks.ErrInvalidSpec},
		{"a result policy without its spec", Hook{Name: "r", Kind: resultscan.KindName}, hooks.ErrInvalidSpec},
		{"a result policy looking for nothing", Hook{Name: "r", Kind: resultscan.KindName, Spec: MarshalSpec(&resultscan.Spec{Tools: []string{"*"}})}, hooks.ErrInvalidSpec},
		{"a result policy with an unknown detector", Hook{Name: "r", Kind: resultscan.KindName,
			Spec: MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Detectors: []string{"everything"}})}, hooks.ErrInvalidSpec},
		{"a result policy pattern that does not parse", Hook{Name: "r", Kind: resultscan.KindName,
			Spec: MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Patterns: []resultscan.PatternSpec{{Name: "p", Regex: "a(b"}}})}, hooks.ErrInvalidSpec},
		{"a result policy subject glob that does not parse", Hook{Name: "r", Kind: resultscan.KindName,
			Spec: MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Detectors: []string{"secrets"}, Subjects: hooks.Subjects{Senders: []string{"a["}}})}, hooks.ErrInvalidGlob},
		{"a result policy timeout above 30s", Hook{Name: "r", Kind: resultscan.KindName,
			Spec: MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Detectors: []string{"secrets"}, TimeoutMillis: 30001})}, hooks.ErrInvalidSpec},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Build(newConfig(tc.hook), BuildOptions{}); !errors.Is(err, tc.want) {
				t.Errorf("Build() = %v, want it to refuse the configuration with %v", err, tc.want)
			}
		})
	}
}

func TestBuildRejectsARevisionThatDoesNotMatchTheContent(t *testing.T) {
	cfg := newConfig(Hook{Name: "a", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{Mode: "readonly"})})
	cfg.Hooks[1].Spec = MarshalSpec(&autonomy.Config{Mode: "full"}) // tampered after hashing
	if _, err := Build(cfg, BuildOptions{}); !errors.Is(err, hooks.ErrInvalidSpec) || !strings.Contains(err.Error(), "revision") {
		t.Errorf("Build() = %v, want a revision mismatch", err)
	}
	dup := newConfig(Hook{Name: "AuditLog", Kind: KindAuditLog})
	if _, err := Build(dup, BuildOptions{}); !errors.Is(err, hooks.ErrInvalidSpec) {
		t.Errorf("duplicate hook names: Build() = %v, want hooks.ErrInvalidSpec", err)
	}
}

func TestBuildFailsClosedWhenTheWorkspaceRootIsMissingOnTheGateway(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not-here")
	cfg := newConfig(Hook{Name: "AutonomyPolicy/ns/a", Kind: autonomy.KindName, Policy: hooks.PolicyRef{Kind: "AutonomyPolicy", Name: "a"},
		Spec: MarshalSpec(&autonomy.Config{WorkspaceRoot: missing, WorkspaceOnly: true})})
	e := executor(t, cfg, BuildOptions{})
	res := decide(e, "s", "web_search", `{}`)
	if res.Status != hooks.StatusDenied || res.Denial.Rule != RuleUnenforceable || !strings.Contains(res.Denial.Reason, missing) {
		t.Fatalf("a policy whose root is missing gave %+v / %+v, want a denial naming the root", res.Status, res.Denial)
	}
	if res.Denial.Policy.Name != "a" {
		t.Errorf("denial names policy %+v, want a", res.Denial.Policy)
	}
}

func TestBuildAppliesAPluginsFailurePolicyWhenNoRuntimeExists(t *testing.T) {
	for _, failOpen := range []bool{true, false} {
		cfg := newConfig(Hook{Name: "PluginHook/ns/p", Kind: plugins.KindName,
			Spec: MarshalSpec(&plugins.Spec{Before: true, TimeoutMillis: 100, FailOpen: failOpen, Stdio: &plugins.StdioSpec{Command: "node"}})})
		res := decide(executor(t, cfg, BuildOptions{}), "s", "read_file", `{"path":"x"}`)
		if allowed := res.Status == hooks.StatusAllowed; allowed != failOpen {
			t.Errorf("failOpen=%v: status %s (%+v)", failOpen, res.Status, res.Denial)
		}
	}
}

func TestAPluginWithoutRuntimeFailsOnlyTheCallsItSubscribesTo(t *testing.T) {
	writes := Hook{Name: "PluginHook/ns/approvals", Kind: plugins.KindName, Spec: MarshalSpec(&plugins.Spec{Before: true, TimeoutMillis: 100,
		Tools: []string{"write_file", "edit_*"}, Stdio: &plugins.StdioSpec{Command: "node"}})}
	afterOnly := Hook{Name: "PluginHook/ns/recorder", Kind: plugins.KindName, Spec: MarshalSpec(&plugins.Spec{After: true, TimeoutMillis: 100,
		Stdio: &plugins.StdioSpec{Command: "node"}})}
	e := executor(t, newConfig(writes, afterOnly), BuildOptions{})
	for tool, want := range map[string]hooks.Status{
		"write_file": hooks.StatusDenied, "edit_file": hooks.StatusDenied, "read_file": hooks.StatusAllowed, "shell": hooks.StatusAllowed,
	} {
		res := decide(e, "s", tool, `{}`)
		if res.Status != want {
			t.Errorf("%s: %s (%+v), want %s", tool, res.Status, res.Denial, want)
		}
		if want == hooks.StatusDenied && res.Denial.Hook != "PluginHook/ns/approvals" {
			t.Errorf("%s denied by %s, want the approvals plugin", tool, res.Denial.Hook)
		}
	}
}

func TestBudgetsSurviveARebuildWithTheSameState(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	budget := Hook{Name: "ContractPolicy/ns/budget", Kind: contract.KindName, Policy: hooks.PolicyRef{UID: "uid-1"},
		Spec: MarshalSpec(&contract.Spec{Contract: contract.Contract{MaxToolCalls: 3}, RateLimits: []ratelimit.Rule{{Tools: "*", PerSenderPerMinute: 100}}})}
	state := contract.NewState(contract.BudgetConfig{})
	e1 := executor(t, newConfig(budget), BuildOptions{Workspace: ws, Runtime: []any{state}})
	for i := range 2 {
		if res := decide(e1, "s1", "read_file", `{"path":"a.txt"}`); res.Status != hooks.StatusAllowed {
			t.Fatalf("call %d denied: %+v", i, res.Denial)
		}
	}
	// A new revision (another policy joined) rebuilds the hooks; the session keeps its count.
	other := Hook{Name: "AutonomyPolicy/ns/ro", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{Mode: "full"})}
	e2 := executor(t, newConfig(other, budget), BuildOptions{Workspace: ws, Runtime: []any{state}})
	if res := decide(e2, "s1", "read_file", `{"path":"a.txt"}`); res.Status != hooks.StatusAllowed {
		t.Fatalf("third call denied: %+v", res.Denial)
	}
	if res := decide(e2, "s1", "read_file", `{"path":"a.txt"}`); res.Status != hooks.StatusDenied || res.Denial.Rule != "maxToolCalls" {
		t.Fatalf("fourth call = %s %+v, want the budget of 3 to hold across the rebuild", res.Status, res.Denial)
	}
	// Without shared state the budget would restart: prove the test can tell.
	e3 := executor(t, newConfig(budget), BuildOptions{Workspace: ws, Runtime: []any{contract.NewState(contract.BudgetConfig{})}})
	if res := decide(e3, "s1", "read_file", `{"path":"a.txt"}`); res.Status != hooks.StatusAllowed {
		t.Fatalf("fresh state denied: %+v", res.Denial)
	}
	// Once a configuration without the policy was retained, its budget is gone.
	state.RetainLive(newConfig(other).Live())
	e4 := executor(t, newConfig(budget), BuildOptions{Workspace: ws, Runtime: []any{state}})
	for i := range 3 {
		if res := decide(e4, "s1", "read_file", `{"path":"a.txt"}`); res.Status != hooks.StatusAllowed {
			t.Fatalf("call %d after the policy's state was dropped denied: %+v (RetainLive kept its budget)", i, res.Denial)
		}
	}
}

func TestContractRateLimitsApplyOnlyToItsSubjects(t *testing.T) {
	cfg := newConfig(Hook{Name: "ContractPolicy/ns/bots", Kind: contract.KindName, Spec: MarshalSpec(&contract.Spec{
		Subjects: hooks.Subjects{Senders: []string{"bot-*"}}, RateLimits: []ratelimit.Rule{{Tools: "web_*", PerSenderPerMinute: 2}}})},
		Hook{Name: "AutonomyPolicy/ns/everyone", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{})})
	e := executor(t, cfg, BuildOptions{})
	call := func(sender string) hooks.Status {
		c := hooks.NewCall("web_search", `{}`)
		c.SessionID, c.SenderID = "s", sender
		return e.Evaluate(context.Background(), c).Status
	}
	for range 5 {
		if st := call("human"); st != hooks.StatusAllowed {
			t.Fatalf("a sender outside the subjects was limited: %s", st)
		}
	}
	got := []hooks.Status{call("bot-1"), call("bot-1"), call("bot-1")}
	if got[0] != hooks.StatusAllowed || got[1] != hooks.StatusAllowed || got[2] != hooks.StatusDenied {
		t.Errorf("bot-1 statuses = %v, want allowed, allowed, denied", got)
	}
}

func TestBuildFailsClosedWhenThePolicyNamesAnotherWorkspace(t *testing.T) {
	gateway, other := t.TempDir(), t.TempDir()
	cfg := newConfig(Hook{Name: "AutonomyPolicy/ns/a", Kind: autonomy.KindName,
		Spec: MarshalSpec(&autonomy.Config{WorkspaceRoot: other, WorkspaceOnly: true})})
	res := decide(executor(t, cfg, BuildOptions{Workspace: gateway}), "s", "read_file", `{"path":"x"}`)
	if res.Status != hooks.StatusDenied || res.Denial.Rule != RuleUnenforceable ||
		!strings.Contains(res.Denial.Reason, other) || !strings.Contains(res.Denial.Reason, gateway) {
		t.Fatalf("a policy rooted elsewhere gave %s %+v, want a denial naming both directories", res.Status, res.Denial)
	}
	// Without a root of its own the policy uses the gateway's workspace.
	cfg = newConfig(Hook{Name: "AutonomyPolicy/ns/a", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{WorkspaceOnly: true})})
	e := executor(t, cfg, BuildOptions{Workspace: gateway})
	if res := decide(e, "s", "read_file", `{"path":"x"}`); res.Status != hooks.StatusAllowed {
		t.Errorf("a path inside the gateway's workspace: %s %+v", res.Status, res.Denial)
	}
	if res := decide(e, "s", "read_file", `{"path":"`+filepath.Join(other, "x")+`"}`); res.Status != hooks.StatusDenied || res.Denial.Rule != "workspaceOnly" {
		t.Errorf("a path outside the gateway's workspace: %s %+v", res.Status, res.Denial)
	}
}

func TestAContractWithRateLimitsStillGuardsTheToolAtRunTime(t *testing.T) {
	cfg := newConfig(Hook{Name: "ContractPolicy/ns/c", Kind: contract.KindName, Spec: MarshalSpec(&contract.Spec{
		Contract:   contract.Contract{ScopedCapabilities: []contract.Capability{{Tool: "shell", AllowedPaths: []string{"/w"}}}},
		RateLimits: []ratelimit.Rule{{Tools: "*", PerSenderPerMinute: 100}}})})
	entries, err := Build(cfg, BuildOptions{Audit: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := entries[1].Hook.(hooks.RuntimeGuard); !ok {
		t.Fatalf("the contract's hook %T is no RuntimeGuard: a running shell's commands would go unchecked", entries[1].Hook)
	}
}

// When every policy binds only the calls its subjects select, a call none of
// them binds is denied, by Before and by DeniesOutright alike; one policy
// without subjects binds every call and no such denial is made.
func TestACallNoPolicyBindsIsDenied(t *testing.T) {
	bots := Hook{Name: "ContractPolicy/ns/bots", Kind: contract.KindName, Spec: MarshalSpec(&contract.Spec{
		Subjects: hooks.Subjects{Senders: []string{"bot-*"}}})}
	admins := Hook{Name: "AutonomyPolicy/ns/admins", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{
		Subjects: hooks.Subjects{Callers: []hooks.CallerSubject{{Kind: hooks.CallerGroup, Name: "admins"}}}})}
	everyone := Hook{Name: "AutonomyPolicy/ns/everyone", Kind: autonomy.KindName, Spec: MarshalSpec(&autonomy.Config{})}
	results := Hook{Name: "ResultPolicy/ns/results", Kind: resultscan.KindName, Spec: MarshalSpec(&resultscan.Spec{
		Tools: []string{"*"}, Detectors: []string{resultscan.SetSecrets}})}
	call := func(sender string, groups ...string) *hooks.Call {
		c := hooks.NewCall("list_dir", `{}`)
		c.SessionID, c.SenderID = "s", sender
		c.Caller = &hooks.Identity{Username: sender, Groups: groups}
		return c
	}
	for _, tc := range []struct {
		name   string
		list   []Hook
		call   *hooks.Call
		denied bool
	}{
		{"a sender one policy's globs bind", []Hook{bots, admins}, call("bot-1"), false},
		{"a caller one policy's callers bind", []Hook{bots, admins}, call("carol", "admins"), false},
		{"a caller no policy binds", []Hook{bots, admins}, call("carol", "devs"), true},
		{"a call without a verified caller", []Hook{admins}, hooks.NewCall("list_dir", `{}`), true},
		{"a caller only a policy without subjects binds", []Hook{bots, admins, everyone}, call("carol"), false},
		// A result policy binds nobody: it decides nothing before a call.
		{"a caller only a result policy scans", []Hook{bots, admins, results}, call("carol", "devs"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newConfig(tc.list...)
			entries, err := Build(cfg, BuildOptions{Audit: discard()})
			if err != nil {
				t.Fatal(err)
			}
			var outright bool
			for _, e := range entries {
				if d, ok := e.Hook.(hooks.OutrightDenier); ok {
					if v, denied := d.DeniesOutright(tc.call); denied {
						outright = v.Rule == RuleNoPolicyBindsCaller
					}
				}
			}
			res := executor(t, cfg, BuildOptions{}).Evaluate(context.Background(), tc.call)
			gotDenied := res.Status == hooks.StatusDenied && res.Denial.Rule == RuleNoPolicyBindsCaller
			if gotDenied != tc.denied || outright != tc.denied {
				t.Errorf("denied by the call = %v (%+v), by DeniesOutright = %v, want %v", gotDenied, res.Denial, outright, tc.denied)
			}
		})
	}
}

// TestAPushFromAnOlderControllerIsRefusedAsSuch reads a configuration in the
// format controllers used before the opaque spec (each kind's spec under its
// own key): it is refused with a message naming the old format, never read
// as an entry without its spec.
func TestAPushFromAnOlderControllerIsRefusedAsSuch(t *testing.T) {
	old := `{"revision":"r","hooks":[{"name":"AuditLog","kind":"AuditLog"},` +
		`{"name":"ContractPolicy/ns/c","kind":"ContractPolicy","contract":{"maxToolCalls":1}}]}`
	var cfg Config
	err := json.Unmarshal([]byte(old), &cfg)
	if !errors.Is(err, ErrOldFormat) || !strings.Contains(err.Error(), `"contract"`) {
		t.Fatalf("old push: err = %v, want ErrOldFormat naming the contract key", err)
	}
	unknown := `{"name":"ContractPolicy/ns/c","kind":"ContractPolicy","budget":1}`
	var h Hook
	if err := json.Unmarshal([]byte(unknown), &h); err == nil || errors.Is(err, ErrOldFormat) {
		t.Fatalf("entry with an unknown key: err = %v, want an unknown field error", err)
	}
	twice := Hook{Name: "ContractPolicy/ns/c", Kind: contract.KindName, Spec: json.RawMessage(`{"maxToolCalls":1,"MaxToolCalls":500}`)}
	if _, err := Build(newConfig(twice), BuildOptions{}); !errors.Is(err, hooks.ErrInvalidSpec) {
		t.Fatalf("spec with a key twice, in another case: err = %v, want ErrInvalidSpec", err)
	}
	wrongSpec := Hook{Name: "ContractPolicy/ns/c", Kind: contract.KindName, Spec: json.RawMessage(`{"maxToolCalls":1,"mode":"full"}`)}
	if _, err := Build(newConfig(wrongSpec), BuildOptions{}); !errors.Is(err, hooks.ErrInvalidSpec) || !strings.Contains(err.Error(), "mode") {
		t.Fatalf("spec with a field of another kind: err = %v, want ErrInvalidSpec naming it", err)
	}
}
