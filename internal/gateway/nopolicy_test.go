package gateway_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// sentinelCall asks the gateway to create a sentinel file in the workspace
// and reports whether the file exists afterwards.
func (e *env) sentinelCall(name string) (wire.ToolCallResponse, bool) {
	e.t.Helper()
	r := e.call("write_file", `{"path":"`+name+`","content":"ran"}`)
	_, err := os.Stat(filepath.Join(e.ws, name))
	return r, err == nil
}

// requireNoPolicy checks that the gateway denies with NoPolicy, creates no
// file, is not ready and says why in /readyz.
func (e *env) requireNoPolicy(why string) {
	e.t.Helper()
	if e.srv.Ready() {
		e.t.Errorf("%s: the gateway is ready", why)
	}
	r, ran := e.sentinelCall("sentinel-" + strings.ReplaceAll(why, " ", "-"))
	if ran || r.Status != "denied" || r.Denial == nil || r.Denial.Rule != gateway.RuleNoPolicy {
		e.t.Errorf("%s: call %+v (tool ran: %v), want a NoPolicy denial", why, r, ran)
	}
	status, body := e.do(http.MethodGet, "/readyz", "", nil, nil)
	var rr wire.ReadyResponse
	mustUnmarshal(e.t, body, &rr)
	if status != http.StatusServiceUnavailable || rr.Ready || rr.Reason == "" {
		e.t.Errorf("%s: /readyz answered %d %s", why, status, body)
	}
}

func TestNoPolicySelectingTheGatewayDeniesEverything(t *testing.T) {
	cases := map[string]map[string]string{
		"an empty directory":  {},
		"only comments":       {"p.yaml": "# nothing yet\n---\n# still nothing\n"},
		"an empty file":       {"p.yaml": ""},
		"only dot-files":      {".p.yaml": basePolicy, ".#p.yaml": basePolicy},
		"a renamed file":      {"p.yaml.bak": basePolicy, "p.yaml~": basePolicy},
		"another namespace":   {"p.yaml": strings.Replace(basePolicy, "name: coding-agent", "name: coding-agent\n  namespace: other", 1)},
		"a selector mismatch": {"p.yaml": strings.Replace(basePolicy, "spec:", "spec:\n  gatewaySelector: {matchLabels: {track: canary}}", 1)},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			dir := t.TempDir()
			for f, body := range files {
				writeFile(t, filepath.Join(dir, f), strings.ReplaceAll(body, "WORKSPACE", e.ws))
			}
			_, _ = e.srv.LoadPolicies(context.Background(), gateway.StandaloneOptions{Dir: dir})
			e.requireNoPolicy(name)
			if got := e.decide("write_file", `{"path":"x","content":"y"}`); got.Allowed {
				t.Errorf("/v1/decisions allowed: %+v", got)
			}
		})
	}
}

func TestAPushOfOnlyTheAuditLogDeniesEverything(t *testing.T) {
	e := newEnv(t, nil)
	good := e.mustPush(compileYAML(t, e.ws, basePolicy))
	res := e.mustPush(&gatewayconfig.Config{IssuedAt: good.IssuedAt + 1, Hooks: []gatewayconfig.Hook{{Name: audit.Name, Kind: gatewayconfig.KindAuditLog}}})
	if res.Revision == good.Revision || e.srv.Status().Revision != res.Revision {
		t.Errorf("the audit-only push is not reported in force: %+v", res)
	}
	e.requireNoPolicy("audit only")
}

func TestAPushCannotRemoveTheAuditLog(t *testing.T) {
	e := newEnv(t, nil)
	good := e.mustPush(compileYAML(t, e.ws, basePolicy))
	policy := compileYAML(t, e.ws, basePolicy).Hooks[1]
	for name, body := range map[string]string{
		"null":         `null`,
		"no hooks":     `{"hooks":[]}`,
		"no hook list": `{}`,
		"policy first": string(mustJSON(t, &gatewayconfig.Config{IssuedAt: good.IssuedAt + 1, Hooks: []gatewayconfig.Hook{policy, {Name: audit.Name, Kind: gatewayconfig.KindAuditLog}}})),
		"two audit logs": string(mustJSON(t, &gatewayconfig.Config{IssuedAt: good.IssuedAt + 1, Hooks: []gatewayconfig.Hook{
			{Name: audit.Name, Kind: gatewayconfig.KindAuditLog}, {Name: "audit-again", Kind: gatewayconfig.KindAuditLog},
		}})),
		"audit log after the policy": string(mustJSON(t, &gatewayconfig.Config{IssuedAt: good.IssuedAt + 1, Hooks: []gatewayconfig.Hook{
			{Name: audit.Name, Kind: gatewayconfig.KindAuditLog}, policy, {Name: "audit-again", Kind: gatewayconfig.KindAuditLog},
		}})),
		"no audit": string(mustJSON(t, &gatewayconfig.Config{IssuedAt: good.IssuedAt + 1, Hooks: []gatewayconfig.Hook{policy}})),
	} {
		status, resp := e.do(http.MethodPut, "/v1/config", "application/json", []byte(body), map[string]string{"Authorization": "Bearer " + testToken})
		if status != http.StatusUnprocessableEntity {
			t.Errorf("%s: push answered %d %s, want 422", name, status, resp)
		}
	}
	if st := e.srv.Status(); st.Revision != good.Revision {
		t.Errorf("revision %s in force, want %s", st.Revision, good.Revision)
	}
	before := len(e.audit.Records())
	if r := e.call("read_file", `{"path":"README.md"}`); r.Status != "succeeded" {
		t.Errorf("call %+v", r)
	}
	if got := len(e.audit.Records()) - before; got != 1 {
		t.Errorf("%d audit records for one call, want 1", got)
	}
}

// runStandalone runs e.srv.RunStandalone on dir until the test ends.
func (e *env) runStandalone(o gateway.StandaloneOptions) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.srv.RunStandalone(ctx, o) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	})
}

func TestStandaloneEmptiedOrRemovedFileDeniesEverything(t *testing.T) {
	for _, how := range []string{"emptied", "comments only", "renamed", "removed"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, nil)
			dir := t.TempDir()
			file := filepath.Join(dir, "policies.yaml")
			writeFile(t, file, strings.ReplaceAll(basePolicy, "WORKSPACE", e.ws))
			e.runStandalone(gateway.StandaloneOptions{Dir: dir, Interval: 10 * time.Millisecond, Debounce: 50 * time.Millisecond})
			eventually(t, "the policies are in force", e.srv.Ready)
			switch how {
			case "emptied":
				writeFile(t, file, "")
			case "comments only":
				writeFile(t, file, "# TODO\n")
			case "renamed":
				if err := os.Rename(file, file+".old"); err != nil {
					t.Fatal(err)
				}
			case "removed":
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the gateway is not ready", func() bool { return !e.srv.Ready() })
			e.requireNoPolicy(how)
			// Filling the file again restores enforcement.
			writeFile(t, file, strings.ReplaceAll(basePolicy, "WORKSPACE", e.ws))
			eventually(t, "the policies are in force again", e.srv.Ready)
			if r := e.call("read_file", `{"path":"config/.env"}`); r.Status != "denied" || r.Denial.Rule == gateway.RuleNoPolicy {
				t.Errorf("forbidden read: %+v", r)
			}
		})
	}
}

// TestStandaloneHalfWrittenSavesNeverLoosenEnforcement saves the policy file
// the way a non-atomic editor does (truncate, write a part, write the rest)
// many times while callers try a forbidden read and a write outside the
// policy: no call may be allowed and no weaker configuration applied.
func TestStandaloneHalfWrittenSavesNeverLoosenEnforcement(t *testing.T) {
	e := newEnv(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.yaml")
	full := strings.ReplaceAll(basePolicy, "WORKSPACE", e.ws)
	writeFile(t, file, full)
	e.runStandalone(gateway.StandaloneOptions{Dir: dir, Interval: 5 * time.Millisecond, Debounce: 500 * time.Millisecond})
	eventually(t, "the policies are in force", e.srv.Ready)
	good := e.srv.Status().Revision

	// The prefix that drops forbiddenPathGlobs still parses as a valid, weaker policy.
	weak := full[:strings.Index(full, "  forbiddenPathGlobs")]
	var stop atomic.Bool
	var allowed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if r := e.call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
				allowed.Add(1)
			}
		}
	})
	for range 30 {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range []string{weak, full[len(weak):]} {
			if _, err := f.WriteString(part); err != nil {
				t.Fatal(err)
			}
			if st := e.srv.Status(); st.Revision != good {
				t.Errorf("revision %s in force mid-save, want %s", st.Revision, good)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := allowed.Load(); n > 0 {
		t.Errorf("%d forbidden reads were allowed during the saves", n)
	}
	if st := e.srv.Status(); st.Revision != good || !e.srv.Ready() {
		t.Errorf("after the saves: %+v ready=%v", st, e.srv.Ready())
	}
}

// A PluginHook that leaves failurePolicy out fails closed: when its plugin
// cannot run, the call is denied and the tool does not run.
func TestAPluginHookWithoutFailurePolicyFailsClosed(t *testing.T) {
	e := newEnv(t, nil) // no plugin factory: every plugin fails
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), strings.ReplaceAll(basePolicy, "WORKSPACE", e.ws)+`---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: PluginHook
metadata: {name: approvals}
spec:
  events: ["tool:before"]
  transport: {stdio: {command: /nonexistent/plugin}}
`)
	if _, err := e.srv.LoadPolicies(context.Background(), gateway.StandaloneOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	r, ran := e.sentinelCall("sentinel")
	if ran || r.Status != "denied" || r.Denial.Hook != "PluginHook/default/approvals" {
		t.Errorf("call %+v (tool ran: %v), want a denial by the failing plugin", r, ran)
	}
}

// TestAnAuditOnlyPushKeepsBudgets: a push that selects no policy denies every
// call, and the budgets spent before it are still spent when the policies
// return; emptying the list is no way to reset them.
func TestAnAuditOnlyPushKeepsBudgets(t *testing.T) {
	e := newEnv(t, nil)
	withBudget := compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy)
	good := e.mustPush(withBudget)
	status := func() string { t.Helper(); return e.readAs(agentToken, "s1") }
	for range 3 {
		if got := status(); got != "succeeded" {
			t.Fatalf("call within the budget: %s", got)
		}
	}
	e.mustPush(&gatewayconfig.Config{IssuedAt: good.IssuedAt + 1, Hooks: []gatewayconfig.Hook{{Name: audit.Name, Kind: gatewayconfig.KindAuditLog}}})
	e.requireNoPolicy("audit only")
	if got := status(); got != "denied:"+gateway.RuleNoPolicy {
		t.Errorf("call with no policy in force: %s", got)
	}
	again := compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy)
	again.IssuedAt = good.IssuedAt + 2
	e.mustPush(again)
	if got := status(); got != "denied:maxToolCalls" {
		t.Errorf("fourth call after the policies returned: %s, want the budget still spent", got)
	}
}
