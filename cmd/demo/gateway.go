package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// stopGrace is how long a process gets to exit after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is a child process the demo started: its stdout and stderr are
// kept, and it is stopped (SIGTERM, then SIGKILL) when ctx ends or Stop is called.
type process struct {
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error
}

// startProcess starts bin with args. Each line of its stderr is also passed
// to onLine, if set, until it returns true.
func startProcess(ctx context.Context, name, bin string, args []string, onLine func(string) bool) (*process, error) {
	p := &process{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = stopGrace
	p.cmd.SysProcAttr = childAttr()
	p.cmd.Stdout = &p.stdout
	pr, pw := io.Pipe()
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		watching := onLine != nil
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.stderr.Write([]byte(line + "\n"))
			if watching && onLine(line) {
				watching = false
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = p.cmd.Wait()
		_ = pw.Close()
		close(p.done)
	}()
	return p, nil
}

// Stop sends SIGTERM, waits up to stopGrace, then kills the process.
func (p *process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited returns an error with the process's last log lines when it has exited.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log:\n%s", p.name, p.err, tail(p.stderr.String()))
	default:
		return nil
	}
}

// tailLines is how many log lines an error about a process quotes.
const tailLines = 20

// tail returns the last tailLines lines of s.
func tail(s string) string {
	n := tailLines
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// listening matches the gateway's startup log line (slog text format).
var listening = regexp.MustCompile(`msg="Gateway listening" address=(\S+)`)

// gatewayProcess is a running gateway.
type gatewayProcess struct {
	*process
	addr string
}

// startGateway runs the gateway binary with args and waits until it listens.
// When args have no --listen, it listens on a free loopback port.
func startGateway(ctx context.Context, name, bin string, args ...string) (*gatewayProcess, error) {
	if !containsFlag(args, "--listen") {
		args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	}
	addrc := make(chan string, 1)
	p, err := startProcess(ctx, name, bin, args, func(line string) bool {
		if m := listening.FindStringSubmatch(line); m != nil {
			addrc <- m[1]
			return true
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	g := &gatewayProcess{process: p}
	select {
	case g.addr = <-addrc:
		return g, nil
	case <-p.done:
		return nil, p.exited()
	case <-time.After(30 * time.Second):
		p.Stop()
		return nil, fmt.Errorf("%s did not start listening within 30s; its log:\n%s", name, tail(p.stderr.String()))
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
}

func containsFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// waitReady polls /readyz until the gateway enforces a configuration.
func (g *gatewayProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if err := g.exited(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.addr+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = strings.TrimSpace(string(b))
		} else {
			last = err.Error()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last answer: %s); its log:\n%s", g.name, timeout, last, tail(g.stderr.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stateStore returns where the gateway counts budgets and rate limits, as
// its /readyz says.
func (g *gatewayProcess) stateStore(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.addr+"/readyz", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		StateStore string `json:"stateStore"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&r); err != nil {
		return "", fmt.Errorf("%s /readyz: %w", g.name, err)
	}
	return r.StateStore, nil
}

// auditRecords returns how many calls' audit records (JSON lines on stdout
// with message "Tool call"; an allowed call's decision record, "Tool call
// started", precedes its record) the gateway wrote, waiting briefly for want
// of them.
func (g *gatewayProcess) auditRecords(want int) int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := strings.Count(g.stdout.String(), `"msg":"`+audit.Message+`",`)
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errInterrupted is returned when the demo was stopped by a signal.
var errInterrupted = errors.New("interrupted")

// printer writes the demo's report, keeping the first write error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}
