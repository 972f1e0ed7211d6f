package main

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/testenv"
)

// clusterDemo returns the command running the cluster demo, with --hold, on the test's binaries.
func clusterDemo(t *testing.T) *exec.Cmd {
	t.Helper()
	dir := binaries(t)
	cmd := exec.Command(filepath.Join(dir, "demo"), "--cluster", "--gateway", filepath.Join(dir, "gateway"),
		"--manager", filepath.Join(dir, "manager"), "--hold")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+testenv.Assets(t))
	return cmd
}

// assertAPIServerGone checks that the API server the demo printed no longer answers.
func assertAPIServerGone(t *testing.T, text string) {
	t.Helper()
	m := regexp.MustCompile(`API server up at (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no API server address in the output:\n%s", text)
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only probing whether it still listens
	if resp, err := c.Get(m[1] + "healthz"); err == nil {
		_ = resp.Body.Close()
		t.Errorf("the demo's API server %s still answers after the demo exited", m[1])
	}
}

// TestClusterDemoPushesTheSamplesAndShowsTheDenials runs the cluster demo
// with --hold: envtest's API server, the controller, a redis-server and
// gateway processes counting in it;
// the same session decides the same way through the pushed configuration,
// the denials show in kubectl describe and as Events of every policy. Then
// Ctrl-C: everything is stopped and removed. (One control plane for both,
// as starting one is the slow part.)
func TestClusterDemoPushesTheSamplesAndShowsTheDenials(t *testing.T) {
	r := startUntil(t, clusterDemo(t), "Press Ctrl-C")
	text := r.text.String()
	checkSession(t, text)
	for _, s := range []string{
		"autonomypolicy.policy.toolhooks.dev/coding-agent created",
		"All 2 selected gateways enforce generation 1",
		`Warning  ToolCallDenied`,
	} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
	// The writes the approval service decided (in checkSession) came with
	// the gateways' token; a request without it, or with another, is refused.
	m := regexp.MustCompile(`approval service at (\S+) verifies its callers by TokenReview`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the demo does not say the approval service verifies its callers:\n%s", text)
	}
	for name, header := range map[string]string{"no token": "", "a forged token": "Bearer forged"} {
		req, err := http.NewRequest(http.MethodPost, m[1], strings.NewReader(`{"method":"hook_before","id":"1","params":{"toolName":"write_file","arguments":"{}"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the approval service answered a request with %s %d, want 401", name, resp.StatusCode)
		}
	}
	events := text[strings.Index(text, "reason=ToolCallDenied"):]
	for _, s := range []string{
		"PluginHook       approval-service   gateway-coding ",
		"AutonomyPolicy   auditor            gateway-auditor ",
		"ContractPolicy   ci-bot             gateway-coding ",
		"AutonomyPolicy   coding-agent       gateway-coding ",
	} {
		if !strings.Contains(events, s) {
			t.Errorf("the ToolCallDenied Events lack %q:\n%s", s, events)
		}
	}
	// Both gateways count in the demo's redis-server, which answers them.
	m = regexp.MustCompile(`redis-server: pid \d+ on (127\.0\.0\.1:\d+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the demo does not say where redis-server listens:\n%s", text)
	}
	redisAddr := m[1]
	for _, gw := range []string{"gateway-coding", "gateway-auditor"} {
		want := "Gateway pod " + gw + " state store: redis redis://" + redisAddr + "/0: ready"
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if err := r.interrupt(); err != nil {
		t.Fatalf("demo after Ctrl-C: %v\n%s\nstderr:\n%s", err, r.text.String(), r.stderr.String())
	}
	// The controller, redis-server and both gateways are gone.
	assertCleanedUp(t, r.text.String(), 4)
	if c, err := net.DialTimeout("tcp", redisAddr, 2*time.Second); err == nil {
		_ = c.Close()
		t.Errorf("redis-server still listens on %s after the demo exited", redisAddr)
	}
	assertAPIServerGone(t, r.text.String())
	if strings.Contains(r.stderr.String(), "log.SetLogger(...) was never called") {
		t.Errorf("controller-runtime complains on stderr:\n%s", r.stderr.String())
	}
}

// TestClusterDemoWithoutRedisSaysWhatToInstall runs the cluster demo where
// no redis-server is on PATH: it fails before starting anything, saying to
// run hack/test-deps.sh.
func TestClusterDemoWithoutRedisSaysWhatToInstall(t *testing.T) {
	cmd := clusterDemo(t)
	cmd.Env = append(cmd.Env, "PATH="+t.TempDir()) // the last PATH wins
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("demo without redis-server: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "redis-server") || !strings.Contains(stderr.String(), "run hack/test-deps.sh") {
		t.Errorf("stderr %q does not say to run hack/test-deps.sh for redis-server", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("the demo started something without redis-server:\n%s", stdout.String())
	}
}
