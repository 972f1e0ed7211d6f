//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// env holds what hack/e2e.sh hands the suite: a cluster, a helm binary and
// the release it installed.
type env struct {
	kubeconfig string
	helm       string
	kubectl    string
	namespace  string
	release    string
	chart      string
	// agentImage is the image of test/e2e/agent, which calls a gateway
	// from inside a pod.
	agentImage string
	// values are the `helm install` flags (the images, the state store)
	// that `helm upgrade` repeats.
	values []string
	// redisAddress is the host:port of the redis-server hack/e2e.sh runs for
	// the gateways' shared state store; redisSecret the Secret it created
	// with its password (not the chart's: it stays after an uninstall).
	redisAddress string
	redisSecret  string
}

var e env

// TestMain reads the suite's settings. A missing one fails the run with what
// to set; `make e2e` sets them all.
func TestMain(m *testing.M) {
	e = env{
		kubeconfig: os.Getenv("KUBECONFIG"),
		helm:       os.Getenv("TOOLHOOKS_E2E_HELM"),
		kubectl:    os.Getenv("TOOLHOOKS_E2E_KUBECTL"),
		namespace:  os.Getenv("TOOLHOOKS_E2E_NAMESPACE"),
		release:    os.Getenv("TOOLHOOKS_E2E_RELEASE"),
		chart:      os.Getenv("TOOLHOOKS_E2E_CHART"),
		agentImage: os.Getenv("TOOLHOOKS_E2E_AGENT_IMAGE"),

		redisAddress: os.Getenv("TOOLHOOKS_E2E_REDIS_ADDRESS"),
		redisSecret:  os.Getenv("TOOLHOOKS_E2E_REDIS_SECRET"),
	}
	if v := os.Getenv("TOOLHOOKS_E2E_VALUES"); v != "" {
		e.values = strings.Fields(v)
	}
	var missing []string
	for _, kv := range [][2]string{
		{"KUBECONFIG", e.kubeconfig}, {"TOOLHOOKS_E2E_HELM", e.helm}, {"TOOLHOOKS_E2E_KUBECTL", e.kubectl},
		{"TOOLHOOKS_E2E_NAMESPACE", e.namespace}, {"TOOLHOOKS_E2E_RELEASE", e.release}, {"TOOLHOOKS_E2E_CHART", e.chart},
		{"TOOLHOOKS_E2E_AGENT_IMAGE", e.agentImage},
		{"TOOLHOOKS_E2E_REDIS_ADDRESS", e.redisAddress}, {"TOOLHOOKS_E2E_REDIS_SECRET", e.redisSecret},
	} {
		if kv[1] == "" {
			missing = append(missing, kv[0])
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: %s not set; run the suite with `make e2e` (hack/e2e.sh), which starts a local cluster and installs the chart\n",
			strings.Join(missing, ", "))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// run runs a command with the suite's kubeconfig and returns its stdout.
func run(stdin string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func kubectl(args ...string) (string, error) { return run("", e.kubectl, args...) }

func helm(args ...string) (string, error) { return run("", e.helm, args...) }

// getJSON decodes `kubectl get ARGS -o json` into out.
func getJSON(out any, args ...string) error {
	s, err := kubectl(append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), out)
}

// poll calls cond every second until it holds or timeout passes, logging
// what it waits for every 10 s; on timeout the test fails with cond's last
// explanation.
func poll(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	next := start.Add(10 * time.Second)
	var last string
	for {
		ok, why := cond()
		if ok {
			t.Logf("%s: after %s", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		last = why
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %s; last: %s", what, timeout, last)
		}
		if time.Now().After(next) {
			t.Logf("%s: waiting (%s): %s", what, time.Since(start).Round(time.Second), last)
			next = next.Add(10 * time.Second)
		}
		time.Sleep(time.Second)
	}
}

// podReady tells whether the pod is Running with Ready=True.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// gatewayLabel marks gateway pods (the controller pushes to pods with it).
const gatewayLabel = "toolhooks.dev/gateway"

func gatewayPods() ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := getJSON(&pods, "get", "pods", "-n", e.namespace, "-l", gatewayLabel); err != nil {
		return nil, err
	}
	live := pods.Items[:0]
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, nil
}

// podStarted reports whether every container of p runs and has started
// (ready or not).
func podStarted(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Started == nil || !*c.Started || c.State.Running == nil {
			return false
		}
	}
	return true
}

// callResult is the gateway's answer to POST /v1/tool-calls.
type callResult struct {
	Status string `json:"status"`
	Result string `json:"result"`
	Denial *struct {
		Hook   string `json:"hook"`
		Policy *struct {
			Kind, Namespace, Name string
		} `json:"policy"`
		Rule   string `json:"rule"`
		Reason string `json:"reason"`
	} `json:"denial"`
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// callerToken returns a token of the e2e namespace's default ServiceAccount
// bound to the gateway's callers' audience: the calls' verified identity.
var callerToken = sync.OnceValues(func() (string, error) {
	out, err := kubectl("create", "token", "default", "-n", e.namespace, "--audience", "toolhooks.dev/gateway", "--duration", "1h")
	return strings.TrimSpace(out), err
})

// call sends one tool call of session "e2e" to the gateway at addr
// (host:port) as the e2e namespace's default ServiceAccount.
func call(addr, tool, args string) (callResult, error) {
	return callInSession(addr, "e2e", tool, args)
}

// callInSession is call in the given session.
func callInSession(addr, session, tool, args string) (callResult, error) {
	return callWith(httpClient, addr, session, tool, args)
}

// callWith is callInSession through client.
func callWith(client *http.Client, addr, session, tool, args string) (callResult, error) {
	token, err := callerToken()
	if err != nil {
		return callResult{}, fmt.Errorf("creating a caller token: %w", err)
	}
	body := fmt.Sprintf(`{"sessionId":%q,"channelId":"e2e","tool":%q,"arguments":%s}`, session, tool, args)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tool-calls", strings.NewReader(body))
	if err != nil {
		return callResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return callResult{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return callResult{}, err
	}
	var r callResult
	if err := json.Unmarshal(b, &r); err != nil {
		return callResult{}, fmt.Errorf("HTTP %d, undecodable body %q: %w", resp.StatusCode, b, err)
	}
	return r, nil
}

// readyzBody is a gateway's answer to GET /readyz.
type readyzBody struct {
	Ready      bool   `json:"ready"`
	Revision   string `json:"revision"`
	Reason     string `json:"reason"`
	StateStore string `json:"stateStore"`
}

// readyz returns a gateway's /readyz answer; Ready holds only with HTTP 200.
func readyz(addr string) (readyzBody, error) {
	resp, err := httpClient.Get("http://" + addr + "/readyz")
	if err != nil {
		return readyzBody{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var r readyzBody
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return readyzBody{}, err
	}
	r.Ready = r.Ready && resp.StatusCode == http.StatusOK
	return r, nil
}

// readyRevision returns the configuration revision a gateway reports on
// /readyz, and whether it is ready.
func readyRevision(addr string) (string, bool, error) {
	r, err := readyz(addr)
	return r.Revision, r.Ready, err
}

// metric returns the sum of the samples of the metric family name on a
// gateway's /metrics (Prometheus text format), and whether there were any.
func metric(addr, name string) (float64, bool, error) {
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	var sum float64
	found := false
	for l := range strings.Lines(string(b)) {
		f := strings.Fields(l)
		if len(f) < 2 || (f[0] != name && !strings.HasPrefix(f[0], name+"{")) {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q: %w", name, l, err)
		}
		sum, found = sum+v, true
	}
	return sum, found, nil
}
