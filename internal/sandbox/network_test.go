package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// helperEnv makes the test binary, started again with it set, act as a
// confined program instead of running the tests (see helper).
const helperEnv = "TOOLHOOKS_SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	if op := os.Getenv(helperEnv); op != "" {
		os.Exit(helper(op))
	}
	os.Exit(m.Run())
}

// helper runs one operation of a confined program: "connect ADDR" (connect
// and write "hello\n") or "bind" (listen on a free loopback port), over
// plain TCP. It prints "ok" or the error, naming EACCES, and exits 0 or 1.
func helper(op string) int {
	var err error
	switch cmd, arg, _ := strings.Cut(op, " "); cmd {
	case "connect":
		var d net.Dialer
		d.SetMultipathTCP(false)
		var c net.Conn
		if c, err = d.Dial("tcp", arg); err == nil {
			_, err = c.Write([]byte("hello\n"))
			_ = c.Close()
		}
	case "bind":
		var lc net.ListenConfig
		lc.SetMultipathTCP(false) // Landlock's rules are TCP's
		var l net.Listener
		if l, err = lc.Listen(context.Background(), "tcp", "127.0.0.1:0"); err == nil {
			_ = l.Close()
		}
	case "udp":
		// Send "hello\n" to a UDP address (a DNS query is one such datagram).
		var c net.Conn
		if c, err = net.Dial("udp", arg); err == nil {
			_, err = c.Write([]byte("hello\n"))
			_ = c.Close()
		}
	case "mptcp":
		var d net.Dialer
		d.SetMultipathTCP(true)
		var c net.Conn
		if c, err = d.Dial("tcp", arg); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				if mp, _ := tc.MultipathTCP(); !mp {
					err = errors.New("the kernel fell back to plain TCP, which Landlock refuses: no MPTCP here to test")
				}
			}
			if err == nil {
				_, err = c.Write([]byte("hello\n"))
			}
			_ = c.Close()
		}
	case "socket":
		// socket(domain, type, protocol) with the numbers in arg.
		var d, ty, p int
		if _, err = fmt.Sscan(arg, &d, &ty, &p); err == nil {
			var fd int
			if fd, err = syscall.Socket(d, ty, p); err == nil {
				_ = syscall.Close(fd)
			}
		}
	case "io_uring":
		var params [120]byte
		fd, _, e := syscall.Syscall(425, 8, uintptr(unsafe.Pointer(&params[0])), 0) // io_uring_setup
		if e != 0 {
			err = e
		} else {
			_ = syscall.Close(int(fd))
		}
	default:
		err = processHelper(cmd, arg)
	}
	switch {
	case err == nil:
		fmt.Println("ok")
		return 0
	case errors.Is(err, syscall.EACCES):
		fmt.Println("EACCES:", err)
	case errors.Is(err, syscall.EPERM):
		fmt.Println("EPERM:", err)
	case errors.Is(err, syscall.ENOSYS):
		fmt.Println("ENOSYS:", err)
	default:
		fmt.Println("error:", err)
	}
	return 1
}

// helperSandbox returns a Landlock sandbox with network mode network whose
// confined processes may also execute this test binary.
func helperSandbox(t *testing.T, network string) (*sandbox.Sandbox, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rx := append([]string{filepath.Dir(self)}, sandbox.DefaultReadExecDirs...)
	s, err := sandbox.New(sandbox.Config{Network: network, ReadExecDirs: rx})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Usable(); err != nil {
		t.Fatalf("this kernel must support Landlock ABI %d for these tests: %v", sandbox.NetABI, err)
	}
	return s, self
}

// runHelper runs the test binary as a confined helper doing op.
func runHelper(t *testing.T, s *sandbox.Sandbox, self, ws, op string) (string, error) {
	t.Helper()
	var out strings.Builder
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"="+op)
	cmd.Dir, cmd.Stdout, cmd.Stderr = ws, &out, &out
	p, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}})
	if err != nil {
		t.Fatalf("start %s: %v", op, err)
	}
	err = waitExit(p)
	return out.String(), err
}

// listener is a TCP listener of the test process that records what it accepts.
type listener struct {
	l        net.Listener
	accepted chan string // the first line each accepted connection sent
}

func listen(t *testing.T, addr string) *listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln := &listener{l: l, accepted: make(chan string, 16)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(ln.accepted)
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			_ = c.Close()
			ln.accepted <- line
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return ln
}

// expect checks that a client which reported success (err nil) was
// accepted and sent want; a client that failed is reported without waiting
// for a connection it never made.
func (ln *listener) expect(t *testing.T, client string, out string, err error, want string) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %q %v", client, out, err)
		return
	}
	if got := <-ln.accepted; got != want {
		t.Errorf("%s: the listener got %q, want %q", client, got, want)
	}
}

// mark connects from the test process and sends "marker\n": every
// connection a confined process completed before is accepted before it.
func (ln *listener) mark(t *testing.T) {
	t.Helper()
	c, err := net.Dial("tcp", ln.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("marker\n")); err != nil {
		t.Fatal(err)
	}
}

func TestByDefaultAConfinedProcessCanNeitherConnectNorBindTCP(t *testing.T) {
	s, self := helperSandbox(t, "")
	if s.Network() != sandbox.NetworkDeny || !strings.Contains(s.Status(), "network denied") {
		t.Errorf("default network mode %s: %s", s.Network(), s.Status())
	}
	ws, _ := layout(t)
	ln := listen(t, "127.0.0.1:0")
	addr := ln.l.Addr().String()
	port := strconv.Itoa(ln.l.Addr().(*net.TCPAddr).Port)

	out, err := runHelper(t, s, self, ws, "connect "+addr)
	if err == nil || !strings.HasPrefix(out, "EACCES") {
		t.Errorf("connect: %q %v", out, err)
	}
	out, err = runHelper(t, s, self, ws, "bind")
	if err == nil || !strings.HasPrefix(out, "EACCES") {
		t.Errorf("bind: %q %v", out, err)
	}
	// A shell, and a program it starts, cannot connect either.
	for _, argv := range [][]string{
		{"/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo hello >&3"},
		{"/bin/bash", "-c", "bash -c 'echo hello > /dev/tcp/127.0.0.1/" + port + "'"},
	} {
		if out, err := run(t, s, ws, argv...); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("%v: %q %v", argv, out, err)
		}
	}
	// The listener accepted no connection before the test's own.
	ln.mark(t)
	if got := <-ln.accepted; got != "marker\n" {
		t.Errorf("the listener accepted a confined process's connection first: %q", got)
	}

	// Nor over IPv6, where the host has it.
	if l6, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = l6.Close()
		ln6 := listen(t, "[::1]:0")
		if out, err := runHelper(t, s, self, ws, "connect "+ln6.l.Addr().String()); err == nil || !strings.HasPrefix(out, "EACCES") {
			t.Errorf("connect over IPv6: %q %v", out, err)
		}
		ln6.mark(t)
		if got := <-ln6.accepted; got != "marker\n" {
			t.Errorf("the IPv6 listener accepted a confined process's connection first: %q", got)
		}
	}
}

func TestWithTheNetworkAllowedAConfinedProcessConnects(t *testing.T) {
	s, self := helperSandbox(t, sandbox.NetworkAllow)
	if !strings.Contains(s.Status(), "network allowed") {
		t.Errorf("status %s", s.Status())
	}
	ws, secret := layout(t)
	ln := listen(t, "127.0.0.1:0")
	port := strconv.Itoa(ln.l.Addr().(*net.TCPAddr).Port)
	out, err := runHelper(t, s, self, ws, "connect "+ln.l.Addr().String())
	ln.expect(t, "connect", out, err, "hello\n")
	out, err = run(t, s, ws, "/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+" && echo from-bash >&3")
	ln.expect(t, "bash", out, err, "from-bash\n")
	// Host names resolve.
	out, err = run(t, s, ws, "/bin/bash", "-c", "echo by-name > /dev/tcp/localhost/"+port)
	ln.expect(t, "bash by name", out, err, "by-name\n")
	if out, err := runHelper(t, s, self, ws, "bind"); err != nil || out != "ok\n" {
		t.Errorf("bind: %q %v", out, err)
	}
	// The files stay confined.
	if out, err := run(t, s, ws, "/bin/cat", secret); err == nil || strings.Contains(out, "secret") {
		t.Errorf("read outside: %q %v", out, err)
	}
}

func TestDenyingTheNetworkNeedsLandlockABI4(t *testing.T) {
	ws, _ := layout(t)
	abi3 := func() (int, error) { return 3, nil }
	s, err := sandbox.New(sandbox.Config{ABI: abi3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Usable(); !errors.Is(err, sandbox.ErrUnusable) || !strings.Contains(err.Error(), "--sandbox-network=allow") {
		t.Errorf("usable at ABI 3 with the network denied: %v", err)
	}
	if !strings.HasPrefix(s.Status(), "unavailable") || !strings.Contains(s.Status(), "--sandbox-network=allow") {
		t.Errorf("status %s", s.Status())
	}
	cmd := exec.Command("/bin/sh", "-c", "echo ran > ran.txt")
	cmd.Dir = ws
	if _, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}}); !errors.Is(err, sandbox.ErrUnusable) {
		t.Errorf("start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
		t.Error("a process ran on a kernel that cannot deny it the network")
	}
	// Allowing the network explicitly makes ABI 3 enough.
	s, err = sandbox.New(sandbox.Config{ABI: abi3, Network: sandbox.NetworkAllow})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, s, ws, "/bin/sh", "-c", "echo ran > ran.txt; cat ran.txt"); err != nil || out != "ran\n" {
		t.Errorf("ABI 3 with the network allowed: %q %v", out, err)
	}
	if _, err := sandbox.New(sandbox.Config{Network: "none"}); err == nil {
		t.Error("an unknown network mode was accepted")
	}
}

// udpListener is a UDP socket of the test process that records datagrams.
func udpListener(t *testing.T) (net.PacketConn, chan string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	go func() {
		buf := make([]byte, 512)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { _ = pc.Close() })
	return pc, got
}

// udpMark sends "marker\n" from the test process: every datagram a confined
// process sent before it arrives before it on loopback.
func udpMark(t *testing.T, pc net.PacketConn) {
	t.Helper()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("marker\n")); err != nil {
		t.Fatal(err)
	}
}

// TestDenyingTheNetworkCoversWhatLandlockLeavesOpen: beyond TCP, a
// confined process gets no UDP (no DNS), MPTCP, raw, packet or other
// non-local sockets, and no io_uring; UNIX sockets still work.
func TestDenyingTheNetworkCoversWhatLandlockLeavesOpen(t *testing.T) {
	s, self := helperSandbox(t, sandbox.NetworkDeny)
	ws, _ := layout(t)
	pc, got := udpListener(t)
	if out, err := runHelper(t, s, self, ws, "udp "+pc.LocalAddr().String()); err == nil || !strings.HasPrefix(out, "EACCES") {
		t.Errorf("udp: %q %v", out, err)
	}
	if out, err := run(t, s, ws, "/bin/bash", "-c", "echo hello > /dev/udp/"+strings.Replace(pc.LocalAddr().String(), ":", "/", 1)); err == nil {
		t.Errorf("bash /dev/udp: %q", out)
	}
	udpMark(t, pc)
	select {
	case d := <-got:
		if d != "marker\n" {
			t.Errorf("the UDP listener received a confined process's datagram first: %q", d)
		}
	case <-time.After(time.Minute):
		t.Fatal("the test's own datagram never arrived")
	}

	ln := listen(t, "127.0.0.1:0")
	if out, err := runHelper(t, s, self, ws, "mptcp "+ln.l.Addr().String()); err == nil || !strings.HasPrefix(out, "EACCES") {
		t.Errorf("mptcp: %q %v", out, err)
	}
	ln.mark(t)
	if first := <-ln.accepted; first != "marker\n" {
		t.Errorf("the listener accepted a confined MPTCP connection first: %q", first)
	}

	for name, args := range map[string]string{
		"raw ICMP":    fmt.Sprint(syscall.AF_INET, " ", syscall.SOCK_RAW, " ", syscall.IPPROTO_ICMP),
		"ICMP ping":   fmt.Sprint(syscall.AF_INET, " ", syscall.SOCK_DGRAM, " ", syscall.IPPROTO_ICMP),
		"SCTP stream": fmt.Sprint(syscall.AF_INET, " ", syscall.SOCK_STREAM, " ", 132),
		"packet":      fmt.Sprint(syscall.AF_PACKET, " ", syscall.SOCK_RAW, " ", 0),
		"IPv6 UDP":    fmt.Sprint(syscall.AF_INET6, " ", syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, " ", 0),
	} {
		if out, err := runHelper(t, s, self, ws, "socket "+args); err == nil || !strings.HasPrefix(out, "EACCES") {
			t.Errorf("%s socket: %q %v", name, out, err)
		}
	}
	if out, err := runHelper(t, s, self, ws, "io_uring"); err == nil || !strings.HasPrefix(out, "EPERM") {
		t.Errorf("io_uring_setup: %q %v", out, err)
	}
	// A plain TCP socket (whose connect Landlock refuses) is still made.
	for _, args := range []string{
		fmt.Sprint(syscall.AF_INET, " ", syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, " ", 0),
		fmt.Sprint(syscall.AF_INET6, " ", syscall.SOCK_STREAM, " ", syscall.IPPROTO_TCP),
	} {
		if out, err := runHelper(t, s, self, ws, "socket "+args); err != nil {
			t.Errorf("socket %s: %q %v", args, out, err)
		}
	}

	// With the network allowed, UDP goes through.
	allowed, _ := helperSandbox(t, sandbox.NetworkAllow)
	out, err := runHelper(t, allowed, self, ws, "udp "+pc.LocalAddr().String())
	if err != nil {
		t.Fatalf("udp with the network allowed: %q %v", out, err)
	}
	if d := <-got; d != "hello\n" {
		t.Errorf("with the network allowed the listener got %q", d)
	}
}
