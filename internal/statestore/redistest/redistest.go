// Package redistest runs a real redis-server for tests: on a free loopback
// port, with its data in a temporary directory and every write appended to
// its log before it is acknowledged, so a restart keeps every count.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process.
type Server struct {
	// Addr is host:port.
	Addr string
	// password is the --requirepass argument, if any.
	password string
	t        testing.TB
	dir      string
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
}

// Start starts redis-server with extra configuration args ("--name",
// "value", ...) and stops it when the test ends. redis-server must be
// installed (hack/test-deps.sh installs it): a test that needs it fails
// without it.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (run hack/test-deps.sh): %v", err)
	}
	s := &Server{t: t, dir: t.TempDir(), Addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			s.password = args[i+1]
		}
	}
	s.args = append([]string{bin,
		"--bind", "127.0.0.1", "--port", s.Addr[len("127.0.0.1:"):],
		"--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--maxmemory-policy", "noeviction", "--daemonize", "no", "--loglevel", "warning",
	}, args...)
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again (after Stop) on the same address and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Dir = s.dir
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if err := ping(ctx, s.Addr); err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server exited: %s", s.Log())
		case <-ctx.Done():
			s.t.Fatalf("redis-server did not answer PING on %s: %s", s.Addr, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down (SIGTERM, which flushes its log) and waits
// for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Pause stops the server's process (SIGSTOP): connections stay open and
// nothing answers, as with a server that hangs. Resume continues it.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Log returns the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// Do sends one command and returns its reply line (RESP, first line only),
// for tests that inspect the server without a client library.
func (s *Server) Do(args ...string) (string, error) {
	c, r, err := s.dial()
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	writeCommand(c, args...)
	return r.ReadString('\n')
}

// dial connects, authenticated with the server's password if it has one.
func (s *Server) dial() (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", s.Addr, 2*time.Second)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if s.password != "" {
		writeCommand(c, "AUTH", s.password)
		if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
			_ = c.Close()
			return nil, nil, fmt.Errorf("AUTH answered %q: %v", line, err)
		}
	}
	return c, r, nil
}

func writeCommand(w io.Writer, args ...string) {
	_, _ = fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		_, _ = fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
	}
}

// Keys returns every key of database 0 (KEYS *).
func (s *Server) Keys() ([]string, error) {
	c, r, err := s.dial()
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	writeCommand(c, "KEYS", "*")
	head, err := r.ReadString('\n')
	if err != nil || len(head) < 3 || head[0] != '*' {
		return nil, fmt.Errorf("KEYS answered %q: %v", head, err)
	}
	n, err := strconv.Atoi(head[1 : len(head)-2])
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, n)
	for range n {
		size, err := r.ReadString('\n')
		if err != nil || len(size) < 3 || size[0] != '$' {
			return nil, fmt.Errorf("KEYS element %q: %v", size, err)
		}
		l, err := strconv.Atoi(size[1 : len(size)-2])
		if err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		keys = append(keys, string(b[:l]))
	}
	return keys, nil
}

func ping(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	// A server that wants a password is up all the same.
	if line != "+PONG\r\n" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
