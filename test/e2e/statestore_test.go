//go:build e2e

package e2e

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

const (
	// budgetPolicy is the ContractPolicy of the budget steps.
	budgetPolicy = "e2e-budget"
	// budget is its maxToolCalls; budgetCalls the calls one session makes.
	budget      = 10
	budgetCalls = 40
)

// stateStoreIsRedis checks that every gateway pod counts in the Redis server
// hack/e2e.sh started (the chart's gateway.stateStore.redis with the
// password from a Secret), that the store answers it, and that the pod says
// so on /readyz and in its metrics.
func (s *story) stateStoreIsRedis(t *testing.T) {
	gws, err := gatewayPods()
	if err != nil || len(gws) != 2 {
		t.Fatalf("gateway pods: %d, %v; want 2", len(gws), err)
	}
	want := "redis redis://" + e.redisAddress + "/0: ready"
	for i := range gws {
		addr := s.podAddr(&gws[i])
		r, err := readyz(addr)
		if err != nil {
			t.Fatalf("gateway %s /readyz: %v", gws[i].Name, err)
		}
		if !r.Ready || r.StateStore != want {
			t.Errorf("gateway %s /readyz: ready %v, stateStore %q (reason %q); want ready with stateStore %q",
				gws[i].Name, r.Ready, r.StateStore, r.Reason, want)
		}
		if up, ok, err := metric(addr, "toolhooks_state_store_up"); err != nil || !ok || up != 1 {
			t.Errorf("gateway %s toolhooks_state_store_up = %v (found %v, %v); want 1", gws[i].Name, up, ok, err)
		}
		args := gws[i].Spec.Containers[0].Args
		if got := flagValue(args, "--state-store-redis-address"); got != e.redisAddress {
			t.Errorf("gateway %s --state-store-redis-address=%q, want %q", gws[i].Name, got, e.redisAddress)
		}
		if got := flagValue(args, "--state-store-redis-password-file"); got == "" {
			t.Errorf("gateway %s has no --state-store-redis-password-file: %q", gws[i].Name, args)
		}
		t.Logf("gateway %s: %s", gws[i].Name, r.StateStore)
	}
}

// budgetExactAcrossReplicas applies a ContractPolicy with maxToolCalls
// budget for sessions e2e-budget-* and makes budgetCalls calls of one
// session through both gateway pods, each pod called directly: exactly
// budget of them are allowed, the rest denied by rule maxToolCalls. Counted
// in each pod's memory, each pod would allow budget calls of its own.
// First in turn (the first budget calls alternate between the pods, so each
// allows budget/2), then all at once from both pods.
func (s *story) budgetExactAcrossReplicas(t *testing.T) {
	policy := fmt.Sprintf(`apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: %s, namespace: %s}
spec:
  subjects: {sessions: ["e2e-budget-*"]}
  maxToolCalls: %d
`, budgetPolicy, e.namespace, budget)
	if _, err := run(policy, e.kubectl, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The uninstall step checks that the namespace is left empty.
		if _, err := kubectl("delete", "contractpolicy", "-n", e.namespace, budgetPolicy, "--ignore-not-found", "--wait"); err != nil {
			t.Errorf("removing the ContractPolicy: %v", err)
		}
	})
	poll(t, "the ContractPolicy enforced by both gateways", enforceTimout, func() (bool, string) {
		var p policyv1alpha1.ContractPolicy
		if err := getJSON(&p, "get", "contractpolicy", "-n", e.namespace, budgetPolicy); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionEnforced)
		if c == nil {
			return false, "no Enforced condition yet"
		}
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation &&
				p.Status.Gateways.Enforcing == 2 && p.Status.Gateways.Selected == 2,
			fmt.Sprintf("Enforced=%s/%s selected=%d enforcing=%d", c.Status, c.Reason, p.Status.Gateways.Selected, p.Status.Gateways.Enforcing)
	})
	gws, err := gatewayPods()
	if err != nil || len(gws) != 2 {
		t.Fatalf("gateway pods: %d, %v; want 2", len(gws), err)
	}
	pods := []string{s.podAddr(&gws[0]), s.podAddr(&gws[1])}
	countedBefore := make([]float64, len(pods))
	for i, addr := range pods {
		if countedBefore[i], _, err = metric(addr, "toolhooks_state_store_duration_seconds_count"); err != nil {
			t.Fatal(err)
		}
	}

	// outcome checks one answer: allowed (the tool ran) or denied by the
	// budget, nothing else (a state store failure would be rule stateStore).
	outcome := func(t *testing.T, r callResult, err error, what string) (allowed bool) {
		t.Helper()
		switch {
		case err != nil:
			t.Fatalf("%s: %v", what, err)
		case r.Status == "succeeded":
			return true
		case r.Status == "denied" && r.Denial != nil && r.Denial.Rule == "maxToolCalls" && r.Denial.Policy != nil &&
			r.Denial.Policy.Kind == "ContractPolicy" && r.Denial.Policy.Name == budgetPolicy:
			return false
		default:
			t.Fatalf("%s = %+v / %+v; want succeeded or denied by the budget (rule maxToolCalls)", what, r, r.Denial)
		}
		return false
	}

	t.Run("InTurn", func(t *testing.T) {
		const session = "e2e-budget-in-turn"
		allowedBy := make([]int, len(pods))
		for i := range budgetCalls {
			pod := i % len(pods)
			r, err := callInSession(pods[pod], session, "list_dir", `{"path":"."}`)
			if outcome(t, r, err, fmt.Sprintf("call %d through %s", i+1, pods[pod])) {
				allowedBy[pod]++
				if i >= budget {
					t.Errorf("call %d through %s allowed beyond the budget of %d", i+1, pods[pod], budget)
				}
			} else if i < budget {
				t.Errorf("call %d through %s denied within the budget of %d: %s", i+1, pods[pod], budget, r.Denial.Reason)
			}
		}
		for pod, n := range allowedBy {
			if n != budget/len(pods) {
				t.Errorf("gateway %s allowed %d calls, want %d (every pod counts the session's calls of the other)",
					pods[pod], n, budget/len(pods))
			}
		}
		t.Logf("%d calls of session %s in turn through %v: allowed %v", budgetCalls, session, pods, allowedBy)
	})

	t.Run("AllAtOnce", func(t *testing.T) {
		const session = "e2e-budget-at-once"
		var mu sync.Mutex
		allowedBy := make([]int, len(pods))
		calledBy := make([]int, len(pods))
		var wg sync.WaitGroup
		for i := range budgetCalls {
			pod := i % len(pods)
			wg.Go(func() {
				r, err := callInSession(pods[pod], session, "list_dir", `{"path":"."}`)
				mu.Lock()
				defer mu.Unlock()
				calledBy[pod]++
				if err != nil {
					t.Errorf("call %d through %s: %v", i+1, pods[pod], err)
					return
				}
				if r.Status == "succeeded" {
					allowedBy[pod]++
				} else if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != "maxToolCalls" {
					t.Errorf("call %d through %s = %+v / %+v; want succeeded or denied by the budget (rule maxToolCalls)",
						i+1, pods[pod], r, r.Denial)
				}
			})
		}
		wg.Wait()
		total := 0
		for _, n := range allowedBy {
			total += n
		}
		if total != budget {
			t.Errorf("%d concurrent calls of one session through both gateways: %d allowed (%v by pod), want exactly %d",
				budgetCalls, total, allowedBy, budget)
		}
		t.Logf("%d concurrent calls of session %s, %v by pod: allowed %v", budgetCalls, session, calledBy, allowedBy)
	})

	// Both pods asked the store: their operation counts grew.
	for i, addr := range pods {
		after, ok, err := metric(addr, "toolhooks_state_store_duration_seconds_count")
		if err != nil || !ok || after <= countedBefore[i] {
			t.Errorf("gateway %s: toolhooks_state_store_duration_seconds_count %v -> %v (%v, %v); want it to grow",
				addr, countedBefore[i], after, ok, err)
		}
	}
}
