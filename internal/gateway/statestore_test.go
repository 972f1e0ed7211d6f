package gateway_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gateway/gatewaytest"
	"github.com/toolhooks/toolhooks/internal/statestore"
	"github.com/toolhooks/toolhooks/internal/statestore/redistest"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// sharedBudgetPolicy gives each session three calls; FAILURE is its
// stateFailurePolicy.
const sharedBudgetPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: shared-budget, uid: 7d3c2b10-0000-4000-8000-000000000019}
spec: {maxToolCalls: 3, stateFailurePolicy: FAILURE}
`

// newStoreEnv starts a gateway whose counters live in the Redis server at
// addr, with the state store's metrics in its registry.
func newStoreEnv(t *testing.T, addr string) (*env, *statestore.Redis) {
	t.Helper()
	var store *statestore.Redis
	e := newEnv(t, func(o *gateway.Options) {
		o.Registry = gateway.NewRegistry()
		observe, err := gateway.StateStoreMetrics(o.Registry, func() error { return store.Ready() })
		if err != nil {
			t.Fatal(err)
		}
		// A generous per-call deadline: the race detector and a loaded CI machine are slow.
		if store, err = statestore.New(statestore.Options{Address: addr, Timeout: 500e6, Observe: observe}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		o.StateStore = store
	})
	return e, store
}

func (e *env) ready() (int, wire.ReadyResponse) {
	e.t.Helper()
	code, body := e.do(http.MethodGet, "/readyz", "", nil, nil)
	var r wire.ReadyResponse
	if err := json.Unmarshal(body, &r); err != nil {
		e.t.Fatalf("/readyz answered %d %s: %v", code, body, err)
	}
	return code, r
}

// Two gateways sharing one Redis server share each session's budget: the
// calls of one session, alternated between them, get three allowed in all,
// not three each. Both report the store ready and its latency.
func TestGatewaysSharingAStateStoreShareBudgets(t *testing.T) {
	redis := redistest.Start(t)
	a, _ := newStoreEnv(t, redis.Addr)
	b, _ := newStoreEnv(t, redis.Addr)
	for _, e := range []*env{a, b} {
		e.mustPush(compileYAML(t, e.ws, strings.Replace(sharedBudgetPolicy, "FAILURE", "Fail", 1)))
	}
	var got []string
	for i := range 8 {
		got = append(got, []*env{a, b}[i%2].readAs(agentToken, "s1"))
	}
	want := "succeeded succeeded succeeded denied:maxToolCalls denied:maxToolCalls denied:maxToolCalls denied:maxToolCalls denied:maxToolCalls"
	if strings.Join(got, " ") != want {
		t.Fatalf("calls alternated over two gateways: %v\nwant %s", got, want)
	}
	for _, e := range []*env{a, b} {
		code, r := e.ready()
		if code != http.StatusOK || r.StateStore != "redis redis://"+redis.Addr+"/0: ready" {
			t.Errorf("/readyz: %d %+v", code, r)
		}
		m := e.metrics()
		for _, want := range []string{`toolhooks_state_store_duration_seconds_count{op="reserve"} 4`, `toolhooks_state_store_up 1`,
			`toolhooks_state_store_errors_total{op="reserve"} 0`} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	}
}

// When the store cannot be reached, a Fail policy denies the call with the
// stateStore rule and a reason naming the store, the gateway reports itself
// not ready, and the errors are counted; an Ignore policy allows the call.
// When the store is back, the session's count goes on where it was.
func TestAnUnreachableStateStoreFailsClosedUnlessThePolicySaysIgnore(t *testing.T) {
	redis := redistest.Start(t)
	e, store := newStoreEnv(t, redis.Addr)
	e.mustPush(compileYAML(t, e.ws, strings.Replace(sharedBudgetPolicy, "FAILURE", "Fail", 1)))
	if got := e.readAs(agentToken, "s1"); got != "succeeded" {
		t.Fatalf("first call: %s", got)
	}
	redis.Stop()
	r := e.readResponse(agentToken, "s1")
	if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != "stateStore" ||
		!strings.Contains(r.Denial.Reason, "redis redis://"+redis.Addr+"/0") {
		t.Fatalf("a call while the store is down: %+v %+v, want denied by stateStore naming the store", r, r.Denial)
	}
	// A write while the store is down is denied and writes nothing.
	if w := e.call("write_file", `{"path":"written.txt","content":"x"}`); w.Status != "denied" || w.Denial.Rule != "stateStore" {
		t.Fatalf("a write while the store is down: %+v", w)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "written.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the denied write happened: %v", err)
	}
	gatewaytest.Eventually(t, "the gateway reports the store not ready", func() bool {
		code, rr := e.ready()
		return code == http.StatusServiceUnavailable && strings.Contains(rr.Reason, store.Name()) &&
			strings.Contains(rr.StateStore, "unavailable")
	})
	m := e.metrics()
	if !strings.Contains(m, "toolhooks_state_store_up 0") || strings.Contains(m, `toolhooks_state_store_errors_total{op="reserve"} 0`) {
		t.Errorf("metrics while the store is down:\n%s", grepLines(m, "toolhooks_state_store"))
	}

	// The same policy with Ignore: the call goes through uncounted.
	cfg := compileYAML(t, e.ws, strings.Replace(sharedBudgetPolicy, "FAILURE", "Ignore", 1))
	cfg.IssuedAt = e.srv.Status().IssuedAt + 1
	e.mustPush(cfg)
	if got := e.readAs(agentToken, "s1"); got != "succeeded" {
		t.Fatalf("a call under Ignore while the store is down: %s", got)
	}

	redis.Restart()
	gatewaytest.Eventually(t, "the gateway is ready again", func() bool { code, _ := e.ready(); return code == http.StatusOK })
	// One call was counted before the outage; the uncounted one is not.
	var got []string
	for range 3 {
		got = append(got, e.readAs(agentToken, "s1"))
	}
	if strings.Join(got, " ") != "succeeded succeeded denied:maxToolCalls" {
		t.Fatalf("calls after the store came back: %v, want two more then the budget spent", got)
	}
}
