package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolhooks/toolhooks/internal/statestore/redistest"
)

// fleet is three gateway processes sharing one redis-server, in standalone
// mode on the same policy files.
type fleet struct {
	t        *testing.T
	bin      string
	args     []string
	redis    *redistest.Server
	mu       sync.Mutex
	gateways []*gatewayProcess
	client   *http.Client
}

const (
	fleetBudget = 100
	fleetRate   = 50
	fleetCalls  = 1000
)

// fleetPolicies: callers named budget-* have a session budget, callers
// named rate-* a per-minute rate limit on read_file, callers named
// ignore-* a budget that lets calls through uncounted when the store fails,
// callers named big-* a budget that a test's load does not reach.
const fleetPolicies = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget, namespace: team}
spec:
  subjects: {senders: ["budget-*"]}
  maxToolCalls: 100
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: rate, namespace: team}
spec:
  subjects: {senders: ["rate-*"]}
  rateLimits: [{tools: read_file, perSenderPerMinute: 50}]
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: lenient, namespace: team}
spec:
  subjects: {senders: ["ignore-*"]}
  maxToolCalls: 100
  stateFailurePolicy: Ignore
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: big, namespace: team}
spec:
  subjects: {senders: ["big-*"]}
  maxToolCalls: 1000000
`

// fleetFiles builds the gateway and writes a workspace holding notes.txt and
// a policy directory holding fleetPolicies, under the returned tmp.
func fleetFiles(t *testing.T) (tmp, bin, ws, policies string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a binary and runs redis-server")
	}
	tmp, bin = buildGateway(t)
	ws, policies = filepath.Join(tmp, "workspace"), filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "notes.txt"), "hello\n")
	writeFile(t, filepath.Join(policies, "contracts.yaml"), fleetPolicies)
	return tmp, bin, ws, policies
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	// A generous deadline per call: 100 calls in flight on a loaded 2-core
	// machine must not be decided by a slow store.
	return startFleetTimeout(t, "2s")
}

// startFleetTimeout starts three gateways whose calls wait timeout for the
// store.
func startFleetTimeout(t *testing.T, timeout string) *fleet {
	t.Helper()
	tmp, bin, ws, policies := fleetFiles(t)
	var tokens strings.Builder
	tokens.WriteString("tokens:\n")
	for _, id := range []string{"budget-a", "ignore-a", "big-a", "rate-1", "rate-2", "rate-3", "rate-4", "rate-5"} {
		fmt.Fprintf(&tokens, "- {identity: %s, token: %s-token-0123456789}\n", id, id)
	}
	tokensFile := filepath.Join(tmp, "tokens.yaml")
	writeFile(t, tokensFile, tokens.String())
	redis := redistest.Start(t)
	f := &fleet{t: t, bin: bin, redis: redis,
		args: []string{"--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--namespace", "team",
			"--auth-tokens-file", tokensFile, "--state-store-redis-address", redis.Addr,
			"--state-store-timeout", timeout},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}},
	}
	for range 3 {
		f.gateways = append(f.gateways, f.start())
	}
	return f
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start starts one gateway whose audit records go to a discarded file.
func (f *fleet) start() *gatewayProcess {
	f.t.Helper()
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = out.Close() })
	return startGatewayOut(f.t, out, f.bin, f.args...)
}

// restart kill -9s gateway i and starts a new one in its place.
func (f *fleet) kill(i int) {
	f.mu.Lock()
	g := f.gateways[i]
	f.mu.Unlock()
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	_ = g.wait()
}

func (f *fleet) replace(i int) {
	g := f.start()
	f.mu.Lock()
	f.gateways[i] = g
	f.mu.Unlock()
}

func (f *fleet) base(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gateways[i%len(f.gateways)].base
}

// call makes one read_file call as caller in session through gateway i and
// returns "succeeded", "denied:<rule>" or "error: ..." (no answer).
func (f *fleet) call(i int, caller, session string) string {
	body := fmt.Sprintf(`{"sessionId":%q,"tool":"read_file","arguments":{"path":"notes.txt"}}`, session)
	req, err := http.NewRequest(http.MethodPost, f.base(i)+"/v1/tool-calls", strings.NewReader(body))
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+caller+"-token-0123456789")
	resp, err := f.client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Status string
		Denial *struct{ Rule, Reason string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("error: %d %v", resp.StatusCode, err)
	}
	if out.Denial != nil {
		if out.Denial.Rule == "stateStore" && !strings.Contains(out.Denial.Reason, "redis redis://"+f.redis.Addr+"/0") {
			return "denied:stateStore without the store's name: " + out.Denial.Reason
		}
		return out.Status + ":" + out.Denial.Rule
	}
	return out.Status
}

// load makes n calls as caller in session, 100 at a time, spread over the
// gateways in turn; during(k) runs after the k-th answer (from one
// goroutine at a time). It returns the count of each outcome and of
// successes per gateway.
func (f *fleet) load(n int, caller, session string, during func(done int)) (map[string]int, [3]int) {
	return f.loadBy(100, n, caller, session, during)
}

// loadBy is load with clients calls at a time.
func (f *fleet) loadBy(clients, n int, caller, session string, during func(done int)) (map[string]int, [3]int) {
	var (
		mu        sync.Mutex
		outcomes  = map[string]int{}
		byGateway [3]int
		next      atomic.Int64
		wg        sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				got := f.call(k%3, caller, session)
				if strings.HasPrefix(got, "error: ") {
					got = "error"
				}
				mu.Lock()
				outcomes[got]++
				if got == "succeeded" {
					byGateway[k%3]++
				}
				done := 0
				for _, c := range outcomes {
					done += c
				}
				if during != nil {
					during(done)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return outcomes, byGateway
}

func (f *fleet) waitReady() {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := range 3 {
		for {
			resp, err := http.Get(f.base(i) + "/readyz")
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("gateway %d did not become ready again", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Three gateways sharing one Redis server count as one: 1,000 concurrent
// calls of one session spread over all three get exactly the budget, and
// 1,000 of one caller exactly the rate limit, every time.
func TestThreeGatewaysShareExactBudgetsAndRateLimits(t *testing.T) {
	f := startFleet(t)
	for rep := range 5 {
		outcomes, byGateway := f.load(fleetCalls, "budget-a", fmt.Sprintf("exact-%d", rep), nil)
		if outcomes["succeeded"] != fleetBudget || outcomes["denied:maxToolCalls"] != fleetCalls-fleetBudget {
			t.Errorf("repeat %d: budget %d over three gateways: %v", rep, fleetBudget, outcomes)
		}
		if byGateway[0] == 0 || byGateway[1] == 0 || byGateway[2] == 0 {
			t.Errorf("repeat %d: allowed calls per gateway %v: the load did not reach all three", rep, byGateway)
		}
	}
	for rep := range 5 {
		caller := fmt.Sprintf("rate-%d", rep+1)
		outcomes, _ := f.load(fleetCalls, caller, "s", nil)
		if outcomes["succeeded"] != fleetRate || outcomes["denied:rateLimit"] != fleetCalls-fleetRate {
			t.Errorf("repeat %d: %d a minute over three gateways: %v", rep, fleetRate, outcomes)
		}
	}
}

// A gateway killed with SIGKILL in the middle of a load and started again
// takes up the session's count where the others have it: it never starts
// from zero, and the session never gets more than its budget.
func TestAGatewayKilledMidLoadContinuesTheCount(t *testing.T) {
	f := startFleet(t)
	first, _ := f.load(40, "budget-a", "k", nil)
	if first["succeeded"] != 40 {
		t.Fatalf("the first 40 calls: %v", first)
	}
	var killed sync.Once
	second, _ := f.load(fleetCalls, "budget-a", "k", func(done int) {
		if done >= 20 {
			killed.Do(func() { f.kill(1) })
		}
	})
	f.replace(1)
	// Calls through the restarted gateway alone: the budget is spent.
	third := map[string]int{}
	for range 20 {
		third[f.call(1, "budget-a", "k")]++
	}
	allowed := first["succeeded"] + second["succeeded"] + third["succeeded"]
	// Calls in flight on the killed gateway may have taken a slot and died
	// before answering: they count against the budget, unanswered.
	if allowed > fleetBudget || allowed+second["error"] < fleetBudget {
		t.Errorf("allowed %d (unanswered %d) of a budget of %d: %v then %v then %v", allowed, second["error"], fleetBudget,
			first, second, third)
	}
	if second["error"] == 0 {
		t.Errorf("no call failed while a gateway was killed: was it? %v", second)
	}
	if third["denied:maxToolCalls"] != 20 {
		t.Errorf("the restarted gateway's calls: %v, want the budget spent", third)
	}
}

// When the Redis server stops in the middle of a load, every call still gets
// an answer: denied by the stateStore rule naming the store, nothing
// allowed uncounted, except under a policy that says Ignore; when it is
// back, the count resumes and the session gets exactly its budget in all.
func TestStoppingRedisMidLoadFailsClosedAndResumesExact(t *testing.T) {
	f := startFleet(t)
	var stopped sync.Once
	during, _ := f.load(fleetCalls, "budget-a", "o", func(done int) {
		if done >= 30 {
			stopped.Do(f.redis.Stop)
		}
	})
	for outcome := range during {
		if outcome != "succeeded" && outcome != "denied:stateStore" && outcome != "denied:maxToolCalls" {
			t.Errorf("while Redis stopped: outcome %q (%v)", outcome, during)
		}
	}
	if during["denied:stateStore"] == 0 {
		t.Fatalf("no call was denied for the store while it was stopped: %v", during)
	}
	// Redis is down: a policy with stateFailurePolicy Ignore lets every call
	// through, beyond its budget, uncounted.
	if lenient, _ := f.load(150, "ignore-a", "o", nil); lenient["succeeded"] != 150 {
		t.Errorf("calls under Ignore while Redis is down: %v, want all allowed", lenient)
	}
	f.redis.Restart()
	f.waitReady()
	allowed := during["succeeded"]
	// Reservations the server took just before it stopped, for calls then
	// denied, are given back by the gateways once it answers again; keep
	// calling until the session has had its budget, never more.
	deadline := time.Now().Add(2 * time.Minute)
	for allowed < fleetBudget && time.Now().Before(deadline) {
		after, _ := f.load(50, "budget-a", "o", nil)
		allowed += after["succeeded"]
		if after["succeeded"] == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	after, _ := f.load(300, "budget-a", "o", nil)
	allowed += after["succeeded"]
	if allowed != fleetBudget {
		t.Errorf("the session had %d calls allowed in all, want exactly %d (during the outage: %v)", allowed, fleetBudget, during)
	}
}

// A gateway authenticates to a Redis server that requires a password with
// the password from its file (or environment); with a wrong one it is not
// ready, says why naming the store, and denies the calls it cannot count.
func TestTheStateStorePassword(t *testing.T) {
	tmp, bin, ws, policies := fleetFiles(t)
	tokensFile := filepath.Join(tmp, "tokens.yaml")
	writeFile(t, tokensFile, "tokens: [{identity: budget-a, token: budget-a-token-0123456789}]\n")
	passwordFile := filepath.Join(tmp, "password")
	writeFile(t, passwordFile, "s3cret-0123456789\n") // the trailing newline is not part of it
	redis := redistest.Start(t, "--requirepass", "s3cret-0123456789")
	args := []string{"--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--namespace", "team",
		"--auth-tokens-file", tokensFile, "--state-store-redis-address", redis.Addr, "--state-store-timeout", "2s"}
	f := &fleet{t: t, redis: redis, client: http.DefaultClient}

	good := startGatewayOut(t, nil, bin, append(args, "--state-store-redis-password-file", passwordFile)...)
	f.gateways = []*gatewayProcess{good}
	if got := f.call(0, "budget-a", "p"); got != "succeeded" {
		t.Fatalf("a call through the gateway with the password: %s", got)
	}

	t.Setenv(redisPasswordEnv, "wrong-password")
	bad := startGatewayUnready(t, nil, bin, args...)
	f.gateways = []*gatewayProcess{bad}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(bad.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ Reason, StateStore string }
		err = json.NewDecoder(resp.Body).Decode(&r)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(r.Reason, "redis redis://"+redis.Addr+"/0") &&
			strings.Contains(r.StateStore, "unavailable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with a wrong password: %d %+v", resp.StatusCode, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := f.call(0, "budget-a", "p"); got != "denied:stateStore" {
		t.Fatalf("a call through the gateway with a wrong password: %s", got)
	}
	if keys, err := redis.Keys(); err != nil || len(keys) == 0 {
		t.Fatalf("the good gateway's call left no keys: %v %v", keys, err)
	}
}

// sessionCount returns what the Redis server counts for caller's session,
// summed over the policies' keys.
func (f *fleet) sessionCount(caller, session string) int {
	f.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: f.redis.Addr})
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "toolhooks:*:s:"+caller+"\x00"+session).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		v, err := c.HGet(ctx, k, "c").Int()
		if err != nil {
			f.t.Fatalf("HGET %s c: %v", k, err)
		}
		n += v
	}
	return n
}

// A healthy Redis server falsely denies nothing: 64 clients at once over
// three gateways, 1,920 calls, all run, none denied by the stateStore rule,
// and the server counts exactly the calls that ran.
func TestAHealthyRedisDeniesNoCallOfSixtyFourClients(t *testing.T) {
	f := startFleet(t)
	outcomes, _ := f.loadBy(64, 1920, "big-a", "healthy", nil)
	if outcomes["succeeded"] != 1920 {
		t.Fatalf("outcomes %v, want all 1920 calls run", outcomes)
	}
	if n := f.sessionCount("big-a", "healthy"); n != outcomes["succeeded"] {
		t.Fatalf("Redis counted %d calls, %d ran", n, outcomes["succeeded"])
	}
}

// A Redis server that hangs (SIGSTOP) in the middle of a load: the calls
// sent to it are denied while it hangs, by the stateStore rule, and once it
// continues the reservations it runs after their deadline take nothing. The
// session gets exactly its budget in all, and Redis's count is the calls
// that ran.
func TestAHungRedisDeniesWhileItHangsAndCountsOnlyTheCallsThatRan(t *testing.T) {
	f := startFleetTimeout(t, "200ms")
	var paused sync.Once
	resumed := make(chan struct{})
	during, _ := f.load(fleetCalls, "budget-a", "h", func(done int) {
		if done >= 30 {
			paused.Do(func() {
				f.redis.Pause()
				go func() {
					defer close(resumed)
					defer f.redis.Resume()
					// Until every gateway has found the store down.
					for i := 0; i < 3; {
						resp, err := http.Get(f.base(i) + "/readyz")
						if err == nil {
							_ = resp.Body.Close()
							if resp.StatusCode != http.StatusOK {
								i++
								continue
							}
						}
						time.Sleep(10 * time.Millisecond)
					}
				}()
			})
		}
	})
	<-resumed
	for outcome := range during {
		if outcome != "succeeded" && outcome != "denied:stateStore" && outcome != "denied:maxToolCalls" {
			t.Errorf("while Redis hung: outcome %q (%v)", outcome, during)
		}
	}
	if during["denied:stateStore"] == 0 {
		t.Fatalf("no call was denied for the store while it hung: %v", during)
	}
	f.waitReady()
	allowed := during["succeeded"]
	// A reservation the server took just before it stopped, whose reply came
	// after its call was denied, is given back by its gateway: keep calling
	// until the session has had its budget, never more.
	deadline := time.Now().Add(2 * time.Minute)
	for allowed < fleetBudget && time.Now().Before(deadline) {
		after, _ := f.load(50, "budget-a", "h", nil)
		allowed += after["succeeded"]
		if after["succeeded"] == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	after, _ := f.load(300, "budget-a", "h", nil)
	allowed += after["succeeded"]
	if allowed != fleetBudget {
		t.Errorf("the session had %d calls allowed in all, want exactly %d (while Redis hung: %v)", allowed, fleetBudget, during)
	}
	if n := f.sessionCount("budget-a", "h"); n != allowed {
		t.Errorf("Redis counted %d calls, %d ran", n, allowed)
	}
}
