package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/sandbox"
)

func TestParseFlags(t *testing.T) {
	ws := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no workspace", nil, "--workspace is required"},
		{"a missing workspace", []string{"--workspace", filepath.Join(ws, "nope")}, "is not an existing directory"},
		{"bad labels", []string{"--workspace", ws, "--labels", "a=b,c"}, `--labels: "c" is not key=value`},
		{"stray arguments", []string{"--workspace", ws, "extra"}, "unexpected arguments: extra"},
		{"an unknown sandbox", []string{"--workspace", ws, "--sandbox", "none"}, `--sandbox "none"`},
		{"an unknown sandbox network", []string{"--workspace", ws, "--sandbox-network", "none"}, `--sandbox-network "none": want deny or allow`},
		{"a relative sandbox dir", []string{"--workspace", ws, "--sandbox-read-exec-dirs", "/usr,bin"}, `"bin" is not an absolute path`},
		{"no budget table", []string{"--workspace", ws, "--budget-max-sessions", "0"}, "must be positive"},
		{"a caller's share over the table", []string{"--workspace", ws, "--budget-max-sessions", "10",
			"--budget-max-sessions-per-caller", "11"}, "is more than --budget-max-sessions 10"},
		{"no plugin timeouts", []string{"--workspace", ws, "--plugin-max-timeouts", "0"}, "--plugin-max-timeouts 0"},
		{"no file size", []string{"--workspace", ws, "--max-file-bytes", "0"}, "--max-file-bytes 0: must be between 1 and"},
		{"a file size over the bound", []string{"--workspace", ws, "--max-file-bytes", "1099511627776"}, "must be between 1 and 268435456"},
		{"a negative per-address cap", []string{"--workspace", ws, "--max-connections-per-ip", "-1"}, "must not be negative"},
		{"no MCP sessions", []string{"--workspace", ws, "--mcp-max-sessions", "0"}, "--mcp-max-sessions and --mcp-max-sessions-per-caller must be positive"},
		{"no MCP sessions per caller", []string{"--workspace", ws, "--mcp-max-sessions-per-caller", "-1"}, "must be positive"},
		{"a caller's MCP sessions over the total", []string{"--workspace", ws, "--mcp-max-sessions", "50"},
			"--mcp-max-sessions-per-caller 100 is more than --mcp-max-sessions 50"},
		{"a Redis password file without an address", []string{"--workspace", ws, "--state-store-redis-password-file", "/p"},
			"--state-store-redis-password-file needs --state-store-redis-address"},
		{"Redis TLS without an address", []string{"--workspace", ws, "--state-store-redis-tls"}, "--state-store-redis-tls needs --state-store-redis-address"},
		{"a Redis URL for an address", []string{"--workspace", ws, "--state-store-redis-address", "redis://r:6379"}, `want host:port`},
		{"a Redis address without a port", []string{"--workspace", ws, "--state-store-redis-address", "redis"}, `want host:port`},
		{"a negative Redis database", []string{"--workspace", ws, "--state-store-redis-address", "r:6379", "--state-store-redis-db", "-1"},
			"--state-store-redis-db -1: must not be negative"},
		{"no state store timeout", []string{"--workspace", ws, "--state-store-redis-address", "r:6379", "--state-store-timeout", "0s"},
			"--state-store-timeout 0s: must be positive"},
		{"an empty key prefix", []string{"--workspace", ws, "--state-store-redis-address", "r:6379", "--state-store-key-prefix", ""},
			"--state-store-key-prefix must not be empty"},
		{"a Redis CA without TLS", []string{"--workspace", ws, "--state-store-redis-address", "r:6379", "--state-store-redis-ca-file", "/ca"},
			"need --state-store-redis-tls"},
		{"a negative MCP idle timeout", []string{"--workspace", ws, "--mcp-session-idle-timeout", "-1s"}, "must not be negative (0: never)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	f, err := parseFlags([]string{"--workspace", ws, "--labels", "app=gw, track=canary", "--tool-timeout", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.maxFileBytes != 4<<20 {
		t.Errorf("--max-file-bytes defaults to %d", f.maxFileBytes)
	}
	if f.mcp.idleTimeout != 5*time.Minute || f.mcp.maxSessions != mcpgate.DefaultMaxSessions || f.mcp.maxSessionsPerCaller != 100 {
		t.Errorf("MCP session flags %+v", f.mcp)
	}
	if f.listen != ":8080" || f.namespace != "default" || f.labels["track"] != "canary" || f.labels["app"] != "gw" || f.toolTimeout >= 0 ||
		f.sandbox.Mode != "landlock" || f.sandbox.Network != "deny" || len(f.sandbox.ReadExecDirs) == 0 || f.sandbox.ReadExecDirs[0] != "/usr" {
		t.Errorf("flags %+v", f)
	}
	f, err = parseFlags([]string{"--workspace", ws, "--mcp-max-sessions", "7", "--mcp-max-sessions-per-caller", "7",
		"--mcp-session-idle-timeout", "0"}, io.Discard)
	if err != nil || f.mcp.maxSessions != 7 || f.mcp.maxSessionsPerCaller != 7 || f.mcp.idleTimeout != 0 {
		t.Errorf("MCP session flags %+v %v", f.mcp, err)
	}
	f, err = parseFlags([]string{"--workspace", ws, "--sandbox=off", "--sandbox-read-exec-dirs", "/usr, /opt/tools",
		"--sandbox-network=allow"}, io.Discard)
	if err != nil || f.sandbox.Mode != "off" || f.sandbox.Network != "allow" ||
		strings.Join(f.sandbox.ReadExecDirs, ",") != "/usr,/opt/tools" {
		t.Errorf("sandbox flags %+v %v", f.sandbox, err)
	}
	f, err = parseFlags([]string{"--workspace", ws}, io.Discard)
	if err != nil || f.sandbox.Limits != sandbox.DefaultLimits {
		t.Errorf("default sandbox limits %+v %v", f.sandbox.Limits, err)
	}
	f, err = parseFlags([]string{"--workspace", ws, "--sandbox-max-processes=0", "--sandbox-max-memory=512Mi",
		"--sandbox-max-cpu-time=1m", "--sandbox-max-file-size=0"}, io.Discard)
	if err != nil || f.sandbox.Limits != (sandbox.Limits{Memory: 512 << 20, CPUTime: time.Minute}) {
		t.Errorf("sandbox limits %+v %v", f.sandbox.Limits, err)
	}
	for _, bad := range []string{"--sandbox-max-memory=lots", "--sandbox-max-file-size=-1", "--sandbox-max-processes=-1"} {
		if _, err := parseFlags([]string{"--workspace", ws, bad}, io.Discard); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestGOGCFlag(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		env  string
		args []string
		want int
	}{
		{"", nil, defaultGOGC},
		{"150", nil, 0}, // the runtime applied GOGC itself
		{"150", []string{"--gogc", "200"}, 200},
		{"", []string{"--gogc", "100"}, 100},
	} {
		t.Setenv("GOGC", tc.env)
		f, err := parseFlags(append([]string{"--workspace", ws}, tc.args...), io.Discard)
		if err != nil || f.gogc != tc.want {
			t.Errorf("GOGC=%q %v: gogc %d, %v; want %d", tc.env, tc.args, f.gogc, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--workspace", ws, "--gogc", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("--gogc 0: err = %v, want a clear error", err)
	}
}

// TestTheGatewayBinaryEnforcesPolicyFiles builds cmd/gateway, runs it in
// standalone mode on loopback and makes a denied and an allowed call.
func TestTheGatewayBinaryEnforcesPolicyFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws := filepath.Join(tmp, "workspace")
	policies := filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "id.pem"), []byte("key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(policies, "agent.yaml"), []byte(`apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: agent, namespace: team}
spec:
  workspace: {root: `+ws+`, only: true}
  forbiddenPathGlobs: ["**/*.pem"]
`), 0o644); err != nil {
		t.Fatal(err)
	}

	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens: [{identity: agent, token: agent-token-0123456789}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, "--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies, "--namespace", "team",
		"--auth-tokens-file", tokens)
	base := g.base

	call := func(args string) map[string]any {
		t.Helper()
		body := `{"sessionId":"s1","senderId":"agent","tool":"read_file","arguments":` + args + `}`
		req, err := http.NewRequest(http.MethodPost, base+"/v1/tool-calls", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer agent-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	denied := call(`{"path":"id.pem"}`)
	if denied["status"] != "denied" || denied["result"] != "Tool execution denied by hook: AutonomyPolicy/team/agent" {
		t.Errorf("denied call: %v", denied)
	}
	if d, _ := denied["denial"].(map[string]any); d == nil || fmt.Sprint(d["policy"]) != "map[kind:AutonomyPolicy name:agent namespace:team]" {
		t.Errorf("denial: %v", denied["denial"])
	}
	allowed := call(`{"path":"notes.txt"}`)
	if allowed["status"] != "succeeded" || allowed["result"] != "hello\n" {
		t.Errorf("allowed call: %v", allowed)
	}
	// By default the processes tools start get no TCP, and /readyz says so.
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct{ Sandbox string }
	err = json.NewDecoder(resp.Body).Decode(&ready)
	_ = resp.Body.Close()
	if err != nil || !strings.Contains(ready.Sandbox, "network denied") {
		t.Errorf("/readyz sandbox %q %v", ready.Sandbox, err)
	}

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(); err != nil {
		t.Errorf("the gateway exited with %v after SIGTERM", err)
	}
	// One JSON audit record per call on stdout (and the allowed call's decision record).
	var n int
	for line := range strings.SplitSeq(strings.TrimSpace(g.stdout.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stdout line %q is not JSON: %v", line, err)
		}
		if rec["msg"] == "Tool call" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("got %d audit records on stdout, want 2:\n%s", n, g.stdout.String())
	}
}

// gatewayProcess is a running gateway binary.
type gatewayProcess struct {
	cmd     *exec.Cmd
	base    string
	tlsAddr string // the HTTPS listener's address, with --tls-cert-file
	stdout  *bytes.Buffer
	wait    func() error
}

// startGateway starts the binary, learns its address from its log and waits
// until it is ready; the process is killed at the end of the test.
func startGateway(t *testing.T, bin string, args ...string) *gatewayProcess {
	t.Helper()
	return startGatewayOut(t, nil, bin, args...)
}

// startGatewayUnready starts the binary with its stdout on out (nil: a
// buffer) and learns its address from its log, without waiting until it is
// ready.
func startGatewayUnready(t *testing.T, out *os.File, bin string, args ...string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if out != nil {
		cmd.Stdout = out
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var exitErr error
	gotExit := false
	wait := func() error {
		if !gotExit {
			exitErr, gotExit = <-exited, true
		}
		return exitErr
	}
	t.Cleanup(func() {
		if !gotExit {
			_ = cmd.Process.Kill()
			_ = wait()
		}
	})

	// The gateway logs its addresses (the HTTPS one first); read the log
	// until it logs the plain one, then keep draining it.
	addrRe := regexp.MustCompile(`msg="Gateway listening" address=(\S+) tls=(true|false)`)
	lines := bufio.NewScanner(stderr)
	var logs strings.Builder
	addr, tlsAddr := "", ""
	for addr == "" && lines.Scan() {
		logs.WriteString(lines.Text() + "\n")
		if m := addrRe.FindStringSubmatch(lines.Text()); m != nil && m[2] == "true" {
			tlsAddr = m[1]
		} else if m != nil {
			addr = m[1]
		}
	}
	go func() {
		for lines.Scan() {
		}
		exited <- cmd.Wait()
	}()
	if addr == "" {
		t.Fatalf("the gateway did not log its address:\n%s", logs.String())
	}
	return &gatewayProcess{cmd: cmd, base: "http://" + addr, tlsAddr: tlsAddr, stdout: &stdout, wait: wait}
}

// startGatewayOut is startGateway with the process's stdout on out (nil: a buffer).
func startGatewayOut(t *testing.T, out *os.File, bin string, args ...string) *gatewayProcess {
	t.Helper()
	g := startGatewayUnready(t, out, bin, args...)
	base := g.base
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}

	return g
}

// buildGateway builds this command into a temporary directory and returns
// the directory and the binary.
func buildGateway(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir, bin
}
