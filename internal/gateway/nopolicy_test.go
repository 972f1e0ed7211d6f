package gateway_test

import (
	"net/http"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

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
