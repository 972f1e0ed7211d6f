package sandbox_test

import (
	"bufio"
	"context"
	"errors"
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
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// processHelper runs the confined helper's operations of these tests.
func processHelper(cmd, arg string) error {
	switch cmd {
	case "privs":
		return privileges()
	case "fds":
		// No descriptor but stdin, stdout and stderr reaches the program.
		for fd := 3; fd < 256; fd++ {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
				target, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
				return fmt.Errorf("descriptor %d (%s) is open", fd, target)
			}
		}
		return nil
	case "syscall":
		return refusable(arg)
	case "unix", "abstract":
		addr := arg
		if cmd == "abstract" {
			addr = "@" + arg
		}
		c, err := net.Dial("unix", addr)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("hello\n"))
		_ = c.Close()
		return err
	case "unixgram":
		// A connected datagram pair sends to any named socket.
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		return unix.Sendto(fds[0], []byte("hello\n"), 0, &unix.SockaddrUnix{Name: arg})
	case "socketpair":
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		if _, err := unix.Write(fds[0], []byte("x")); err != nil {
			return err
		}
		b := make([]byte, 1)
		_, err = unix.Read(fds[1], b)
		return err
	case "netlink":
		proto, _ := strconv.Atoi(arg)
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, proto)
		if err == nil {
			_ = unix.Close(fd)
		}
		return err
	case "fork":
		// Start arg sleeping children and leave them running.
		n, _ := strconv.Atoi(arg)
		started := 0
		var err error
		for range n {
			var p *os.Process
			if p, err = os.StartProcess("/bin/sleep", []string{"sleep", "1000"}, &os.ProcAttr{}); err != nil {
				break
			}
			_ = p.Release()
			started++
		}
		fmt.Println("started", started)
		if started == n {
			return nil
		}
		return err
	case "memfd":
		// Copy /bin/true into a memory file and execute it.
		flags, _ := strconv.Atoi(arg)
		fd, err := unix.MemfdCreate("x", flags)
		if err != nil {
			return err
		}
		b, err := os.ReadFile("/bin/true")
		if err != nil {
			return err
		}
		if _, err := unix.Write(fd, b); err != nil {
			return err
		}
		p, err := os.StartProcess(fmt.Sprintf("/proc/self/fd/%d", fd), []string{"true"}, &os.ProcAttr{})
		if err != nil {
			return err
		}
		_, _ = p.Wait()
		return nil
	case "openat":
		// openat(O_PATH descriptor of a directory opened by name, name).
		dir, name := filepath.Split(arg)
		dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY, 0)
		if err == nil {
			_ = unix.Close(fd)
		}
		return err
	}
	return fmt.Errorf("unknown helper operation %q", cmd)
}

// privileges checks that the process holds no capability in any set and
// runs with no_new_privs.
func privileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for i, d := range data {
		if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
			return fmt.Errorf("capabilities (word %d): effective %#x permitted %#x inheritable %#x", i, d.Effective, d.Permitted, d.Inheritable)
		}
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		// The bounding set matters to uid 0 alone (no_new_privs ignores file
		// capabilities); a user other than root could not empty it.
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); unix.Geteuid() == 0 && (err != nil || in != 0) {
			return fmt.Errorf("capability %d in the bounding set (%v)", c, err)
		}
		if in, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err != nil || in != 0 {
			return fmt.Errorf("capability %d ambient (%v)", c, err)
		}
	}
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 1 {
		return fmt.Errorf("no_new_privs %d (%v)", nnp, err)
	}
	if bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0); unix.Geteuid() == 0 && (err != nil || bits&0x3 != 0x3) {
		return fmt.Errorf("uid 0 without locked SECBIT_NOROOT: %#x (%v)", bits, err)
	}
	return nil
}

// refusable makes one system call the filter refuses and returns its error.
func refusable(name string) error {
	raw := func(nr uintptr, a ...uintptr) error {
		var args [6]uintptr
		copy(args[:], a)
		r, _, e := unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
		if e != 0 {
			return e
		}
		if nr == unix.SYS_CLONE && r == 0 {
			unix.Exit(0) // the child of a clone that should have failed
		}
		return nil
	}
	var buf [256]byte
	p := uintptr(unsafe.Pointer(&buf[0]))
	switch name {
	case "bpf":
		return raw(unix.SYS_BPF, unix.BPF_PROG_LOAD, p, 128)
	case "open_by_handle_at":
		return raw(unix.SYS_OPEN_BY_HANDLE_AT, atFDCWD, p, unix.O_RDONLY)
	case "name_to_handle_at":
		return raw(unix.SYS_NAME_TO_HANDLE_AT, atFDCWD, uintptr(unsafe.Pointer(&[]byte(".\x00")[0])), p, p+128, 0)
	case "perf_event_open":
		return raw(unix.SYS_PERF_EVENT_OPEN, p, 0, ^uintptr(0), ^uintptr(0), 0)
	case "userfaultfd":
		return raw(unix.SYS_USERFAULTFD, 0)
	case "keyctl":
		return raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(3)+1, 0) // KEY_SPEC_SESSION_KEYRING
	case "unshare":
		return raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	case "setns":
		return raw(unix.SYS_SETNS, 0, unix.CLONE_NEWNET)
	case "clone-newuser":
		return raw(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0)
	case "clone3":
		return raw(unix.SYS_CLONE3, p, 88)
	case "mount":
		return raw(unix.SYS_MOUNT, 0, uintptr(unsafe.Pointer(&[]byte("/tmp\x00")[0])), uintptr(unsafe.Pointer(&[]byte("tmpfs\x00")[0])), 0, 0)
	case "fsopen":
		return raw(unix.SYS_FSOPEN, uintptr(unsafe.Pointer(&[]byte("tmpfs\x00")[0])), 0)
	case "setresuid":
		return raw(unix.SYS_SETRESUID, 0, 0, 0)
	case "prlimit-other":
		return raw(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_CPU, 0, p)
	case "shmget":
		return raw(unix.SYS_SHMGET, 0, 4096, 0o1600) // IPC_PRIVATE, IPC_CREAT
	case "mq_open":
		return raw(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(&[]byte("q\x00")[0])), unix.O_RDWR|unix.O_CREAT, 0o600, 0)
	case "io_uring_setup":
		return raw(unix.SYS_IO_URING_SETUP, 8, p)
	case "kexec_load":
		return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0)
	case "init_module":
		return raw(unix.SYS_INIT_MODULE, p, 16, p)
	}
	return fmt.Errorf("unknown system call %q", name)
}

func TestAConfinedProgramHoldsNoPrivilegesAndNoDescriptors(t *testing.T) {
	s, self := helperSandbox(t, "")
	ws, _ := layout(t)
	for _, op := range []string{"privs", "fds"} {
		if out, err := runHelper(t, s, self, ws, op); err != nil || out != "ok\n" {
			t.Errorf("%s: %q %v", op, out, err)
		}
	}
	// A program started by the program too (execve gains nothing).
	if out, err := run(t, s, ws, "/bin/sh", "-c", "exec env "+helperEnv+"=privs "+self); err != nil || out != "ok\n" {
		t.Errorf("privs after execve: %q %v", out, err)
	}
}

func TestTheFilterRefusesWhatLandlockDoesNotGovern(t *testing.T) {
	s, self := helperSandbox(t, "")
	ws, _ := layout(t)
	for name, want := range map[string]string{
		"bpf": "EPERM", "open_by_handle_at": "EPERM", "name_to_handle_at": "EPERM", "perf_event_open": "EPERM",
		"userfaultfd": "EPERM", "keyctl": "EPERM", "unshare": "EPERM", "setns": "EPERM", "clone-newuser": "EPERM",
		"clone3": "ENOSYS", "mount": "EPERM", "fsopen": "EPERM", "setresuid": "EPERM", "prlimit-other": "EPERM",
		"shmget": "EPERM", "mq_open": "EPERM", "io_uring_setup": "EPERM", "kexec_load": "EPERM", "init_module": "EPERM",
	} {
		if out, err := runHelper(t, s, self, ws, "syscall "+name); err == nil || !strings.HasPrefix(out, want) {
			t.Errorf("%s: %q %v, want %s", name, out, err, want)
		}
	}
	// A memory file can be made only sealed against execution, and is then
	// not executable.
	if out, err := runHelper(t, s, self, ws, "memfd 0"); err == nil || !strings.HasPrefix(out, "EPERM") {
		t.Errorf("memfd_create without MFD_NOEXEC_SEAL: %q %v", out, err)
	}
	if out, err := runHelper(t, s, self, ws, fmt.Sprint("memfd ", unix.MFD_NOEXEC_SEAL)); err == nil ||
		!strings.HasPrefix(out, "EACCES") && !strings.HasPrefix(out, "EPERM") {
		t.Errorf("executing a sealed memory file: %q %v", out, err)
	}
	// Ordinary programs still work: forks, threads, pipes, a Go program.
	if out, err := run(t, s, ws, "/bin/sh", "-c", "echo a | cat | (read x; echo $x$x) && python3 -c 'import threading, subprocess; print(subprocess.run([\"echo\", \"b\"], capture_output=True).stdout.decode().strip())'"); err != nil || out != "aa\nb\n" {
		t.Errorf("ordinary work: %q %v", out, err)
	}
}

// unixListener is a UNIX stream listener of the test process that records
// the first line of every connection it accepts.
func unixListener(t *testing.T, addr string) *listener {
	t.Helper()
	l, err := net.Listen("unix", addr)
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

func (ln *listener) markUnix(t *testing.T) {
	t.Helper()
	c, err := net.Dial("unix", ln.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("marker\n")); err != nil {
		t.Fatal(err)
	}
}

func TestByDefaultNoUnixSocketOrNetlinkReachesOutside(t *testing.T) {
	s, self := helperSandbox(t, "")
	ws, _ := layout(t)
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777)
	path := filepath.Join(dir, "agent.sock")
	ln := unixListener(t, path)
	_ = os.Chmod(path, 0o777)
	abstract := fmt.Sprintf("toolhooks-test-%d", os.Getpid())
	aln := unixListener(t, "@"+abstract)
	gram, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "gram.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gram.Close() }()
	_ = os.Chmod(filepath.Join(dir, "gram.sock"), 0o777)

	for _, op := range []string{"unix " + path, "abstract " + abstract, "unixgram " + filepath.Join(dir, "gram.sock")} {
		if out, err := runHelper(t, s, self, ws, op); err == nil || !strings.HasPrefix(out, "EACCES") {
			t.Errorf("%s: %q %v", op, out, err)
		}
	}
	for _, argv := range [][]string{
		{"/usr/bin/python3", "-c", "import socket; s = socket.socket(socket.AF_UNIX); s.connect('" + path + "'); s.send(b'py\\n')"},
		{"/bin/sh", "-c", "exec python3 -c \"import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b'py\\n', '" + filepath.Join(dir, "gram.sock") + "')\""},
	} {
		if out, err := run(t, s, ws, argv...); err == nil {
			t.Errorf("%v: %q", argv, out)
		}
	}
	ln.markUnix(t)
	if got := <-ln.accepted; got != "marker\n" {
		t.Errorf("the pathname listener accepted a confined program's connection first: %q", got)
	}
	aln.markUnix(t)
	if got := <-aln.accepted; got != "marker\n" {
		t.Errorf("the abstract listener accepted a confined program's connection first: %q", got)
	}
	_ = gram.SetReadDeadline(time.Now())
	if n, _, err := gram.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("the datagram socket received %d bytes", n)
	}
	// Netlink: neither route nor socket-diagnostic dumps of the host.
	for _, proto := range []int{unix.NETLINK_ROUTE, unix.NETLINK_SOCK_DIAG, unix.NETLINK_AUDIT} {
		if out, err := runHelper(t, s, self, ws, fmt.Sprint("netlink ", proto)); err == nil || !strings.HasPrefix(out, "EACCES") {
			t.Errorf("netlink %d: %q %v", proto, out, err)
		}
	}
	// A connected stream pair still works (pipes too, above).
	if out, err := runHelper(t, s, self, ws, "socketpair"); err != nil || out != "ok\n" {
		t.Errorf("socketpair: %q %v", out, err)
	}

	// With the network allowed, UNIX sockets connect, NETLINK_ROUTE serves
	// libc's address lookups, and socket diagnostics stay refused.
	allowed, _ := helperSandbox(t, sandbox.NetworkAllow)
	out, err := runHelper(t, allowed, self, ws, "unix "+path)
	ln.expect(t, "unix with the network allowed", out, err, "hello\n")
	if out, err := runHelper(t, allowed, self, ws, fmt.Sprint("netlink ", unix.NETLINK_ROUTE)); err != nil {
		t.Errorf("NETLINK_ROUTE with the network allowed: %q %v", out, err)
	}
	if out, err := runHelper(t, allowed, self, ws, fmt.Sprint("netlink ", unix.NETLINK_SOCK_DIAG)); err == nil || !strings.HasPrefix(out, "EACCES") {
		t.Errorf("NETLINK_SOCK_DIAG with the network allowed: %q %v", out, err)
	}
	if out, err := run(t, allowed, ws, "/usr/bin/python3", "-c",
		"import socket; print(socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)[0][4][1])"); err != nil || out != "80\n" {
		t.Errorf("getaddrinfo with AI_ADDRCONFIG: %q %v", out, err)
	}
}

// Every path to a file outside the granted directories ends at the same
// refusal as the direct path.
func TestIndirectPathsEndAtTheSameRefusal(t *testing.T) {
	s, self := helperSandbox(t, "")
	ws, secret := layout(t)
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"/proc/self/cwd", []string{"/bin/cat", "/proc/self/cwd/../outside.txt"}},
		{"/proc/self/root", []string{"/bin/cat", "/proc/self/root" + secret}},
		{"/proc/self/fd of the workspace", []string{"/bin/sh", "-c", "exec 3< .; cat /proc/self/fd/3/../outside.txt"}},
		{"a hard link", []string{"/bin/ln", secret, "link.txt"}},
		{"a rename in", []string{"/bin/mv", secret, "moved.txt"}},
		{"a symlink", []string{"/bin/sh", "-c", "ln -s " + secret + " sym.txt && cat sym.txt"}},
		{"python openat on a directory descriptor", []string{"/usr/bin/python3", "-c",
			"import os; d = os.open('.', os.O_RDONLY); print(open(os.open('../outside.txt', os.O_RDONLY, dir_fd=d)).read())"}},
		{"a descriptor passed over SCM_RIGHTS", []string{"/usr/bin/python3", "-c", `
import os, socket
a, b = socket.socketpair()
if os.fork() == 0:
    try:
        fd = os.open(` + strconv.Quote(secret) + `, os.O_RDONLY)
        socket.send_fds(a, [b"x"], [fd])
    except OSError as e:
        a.send(b"refused")
    os._exit(0)
msg, fds, _, _ = socket.recv_fds(b, 16, 1)
print(os.read(fds[0], 100).decode() if fds else msg.decode())
os.wait()
`}},
	} {
		out, err := run(t, s, ws, tc.argv...)
		if strings.Contains(out, "secret") || tc.name != "a descriptor passed over SCM_RIGHTS" && err == nil {
			t.Errorf("%s: %q %v", tc.name, out, err)
		}
	}
	// openat on an O_PATH descriptor of the directory outside.
	if out, err := runHelper(t, s, self, ws, "openat "+secret); err == nil || !strings.HasPrefix(out, "EACCES") {
		t.Errorf("openat: %q %v", out, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "link.txt")); err == nil {
		t.Error("a hard link to the file outside was made")
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "secret\n" {
		t.Errorf("the file outside changed: %q %v", b, err)
	}
}

// token makes a command line the test can find among the host's processes.
func token() string {
	return fmt.Sprintf("1000%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
}

// running lists the host's processes whose command line holds tok.
// sleepers lists the running sleep programs whose argument is tok (not the
// shell or supervisor whose command lines name it too).
func sleepers(tok string) []string {
	var out []string
	for _, p := range running(tok) {
		if _, cmd, _ := strings.Cut(p, ": "); strings.HasPrefix(cmd, "sleep ") {
			out = append(out, p)
		}
	}
	return out
}

func running(tok string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), tok) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// reapers are the sandboxes of both supervision modes.
func reapers(t *testing.T, limits sandbox.Limits) map[string]*sandbox.Sandbox {
	t.Helper()
	out := map[string]*sandbox.Sandbox{}
	for _, r := range []string{"", sandbox.ReaperSubreaper} {
		s, err := sandbox.New(sandbox.Config{Reaper: r, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Usable(); err != nil {
			t.Fatal(err)
		}
		out[s.Reaper()] = s
	}
	if _, ok := out[sandbox.ReaperPIDNamespace]; !ok {
		t.Fatalf("no PID namespace on this host: %v", out)
	}
	return out
}

// start starts argv confined in ws and returns the process.
func start(t *testing.T, s *sandbox.Sandbox, ws string, ctx context.Context, argv ...string) (*sandbox.Process, *strings.Builder) {
	t.Helper()
	var out strings.Builder
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = ws, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	p, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}})
	if err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	return p, &out
}

func TestEveryProcessEndsWithTheProgram(t *testing.T) {
	for mode, s := range reapers(t, sandbox.Limits{}) {
		t.Run(mode, func(t *testing.T) {
			ws, _ := layout(t)
			tok := token()
			sentinel := filepath.Join(ws, "sentinel")
			// A background child, a double fork into a new session and a
			// disowned job, each of which would write the sentinel later.
			script := fmt.Sprintf(`
sleep %[1]s &
setsid sh -c 'sleep %[1]s; echo late > %[2]s' &
(sh -c 'sleep %[1]s; echo late > %[2]s' &) 
nohup sh -c 'sleep %[1]s; echo late > %[2]s' >/dev/null 2>&1 &
disown
echo started`, tok, sentinel)
			p, out := start(t, s, ws, context.Background(), "/bin/bash", "-c", script)
			rep, err := p.Wait()
			if err != nil || !rep.Exited || rep.ExitCode != 0 || out.String() != "started\n" {
				t.Fatalf("%+v %v %q", rep, err, out.String())
			}
			if left := running(tok); len(left) > 0 {
				t.Errorf("still running after the program: %v", left)
			}
			// Four sleeps and the three shells waiting on them.
			if rep.Ended < 4 {
				t.Errorf("ended %d processes, want at least 4", rep.Ended)
			}
			if _, err := os.Stat(sentinel); err == nil {
				t.Error("a process left behind wrote the sentinel")
			}
		})
	}
}

func TestAStoppedProgramEndsWithItsWholeTree(t *testing.T) {
	for mode, s := range reapers(t, sandbox.Limits{}) {
		t.Run(mode, func(t *testing.T) {
			ws, _ := layout(t)
			tok := token()
			ctx, cancel := context.WithCancel(context.Background())
			p, _ := start(t, s, ws, ctx, "/bin/bash", "-c", "setsid sleep "+tok+" & sleep "+tok+" & wait")
			for len(sleepers(tok)) < 2 {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			rep, _ := p.Wait()
			if !rep.Stopped || rep.Exited {
				t.Errorf("report %+v", rep)
			}
			if left := running(tok); len(left) > 0 {
				t.Errorf("still running after the stop: %v", left)
			}
			if rep.Ended < 2 {
				t.Errorf("ended %d processes, want 2", rep.Ended)
			}
		})
	}
}

func TestLimitsBoundEachProgram(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime needs more memory and threads than these limits leave its supervisor")
	}
	limits := sandbox.Limits{Processes: 24, Memory: 256 << 20, CPUTime: time.Second, FileSize: 1 << 20}
	for mode, s := range reapers(t, limits) {
		t.Run(mode, func(t *testing.T) {
			if !strings.Contains(s.Status(), "processes 24") {
				t.Errorf("status %s", s.Status())
			}
			_, self := helperSandbox(t, "")
			ws, _ := layout(t)
			rx := append([]string{filepath.Dir(self)}, sandbox.DefaultReadExecDirs...)
			hs, err := sandbox.New(sandbox.Config{Reaper: map[string]string{sandbox.ReaperSubreaper: sandbox.ReaperSubreaper}[mode], Limits: limits, ReadExecDirs: rx})
			if err != nil {
				t.Fatal(err)
			}

			// Processes: forks beyond the bound fail; the rest are ended.
			// dash counts the sleeps it started in a file (echo is a
			// builtin) and exits when a fork fails.
			cmd := exec.Command("/bin/dash", "-c", `i=0; while [ $i -lt 40 ]; do sleep 1000 & i=$((i+1)); echo $i > started; done`)
			var fout strings.Builder
			cmd.Dir, cmd.Stdout, cmd.Stderr = ws, &fout, &fout
			p, err := hs.Start(cmd, sandbox.Confinement{Writable: []string{ws}})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := p.Wait()
			b, _ := os.ReadFile(filepath.Join(ws, "started"))
			started, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || rep.ExitCode == 0 || started == 0 || started >= 24 || rep.Ended != started {
				t.Errorf("forks: %q, %d started, %+v %v", fout.String(), started, rep, err)
			}

			// CPU time: the tree ends with a clear status.
			p, out := start(t, s, ws, context.Background(), "/bin/sh", "-c", "sleep 1000 & while :; do :; done")
			rep, err = p.Wait()
			if err != nil || rep.Exceeded != "CPU time" || rep.Ended < 1 {
				t.Errorf("cpu: %+v %v %q", rep, err, out.String())
			}
			// File size.
			p, out = start(t, s, ws, context.Background(), "/bin/sh", "-c", "head -c 3000000 /dev/zero > big")
			rep, err = p.Wait()
			if st, serr := os.Stat(filepath.Join(ws, "big")); err != nil || rep.Exceeded != "file size" || serr != nil || st.Size() > 1<<20 {
				t.Errorf("file size: %+v %v %q %v", rep, err, out.String(), st)
			}
			// Memory: the allocation fails.
			p, out = start(t, s, ws, context.Background(), "/usr/bin/python3", "-c", "b = bytearray(512 << 20)")
			rep, err = p.Wait()
			if err != nil || rep.ExitCode == 0 || !strings.Contains(out.String(), "MemoryError") {
				t.Errorf("memory: %+v %v %q", rep, err, out.String())
			}
		})
	}
}

// TestAsAnUnprivilegedUser runs this package's tests again as nobody: no
// guarantee may depend on the gateway running as root.
func TestAsAnUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sandbox-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	_ = dst.Close()
	cmd := exec.Command(bin, "-test.run", "^Test", "-test.skip", "^TestAsAnUnprivilegedUser$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "TMPDIR=/tmp"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
}

var _ = errors.New

// atFDCWD is AT_FDCWD as a system call argument.
var atFDCWD = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

// Without Landlock's signal scoping (ABI < 6) and without a PID namespace,
// the filter keeps a program from killing its supervisor, which would leave
// its orphans running.
func TestWithoutSignalScopingAProgramCannotKillItsSupervisor(t *testing.T) {
	s, err := sandbox.New(sandbox.Config{Reaper: sandbox.ReaperSubreaper, ABI: func() (int, error) { return 5, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Usable(); err != nil {
		t.Fatal(err)
	}
	ws, _ := layout(t)
	tok := token()
	script := `sup=$PPID
kill -KILL $sup 2>/dev/null; echo "kill $?"
kill -KILL -- -$sup 2>/dev/null; echo "group $?"
/usr/bin/python3 -c 'import os, sys; os.kill(int(sys.argv[1]), 9)' $sup 2>/dev/null; echo "python $?"
sleep ` + tok + ` &
echo left`
	p, out := start(t, s, ws, context.Background(), "/bin/bash", "-c", script)
	rep, err := p.Wait()
	if err != nil || !rep.Exited || rep.Ended != 1 || out.String() != "kill 1\ngroup 1\npython 1\nleft\n" {
		t.Errorf("%+v %v %q", rep, err, out.String())
	}
	if left := running(tok); len(left) > 0 {
		t.Errorf("still running after the program: %v", left)
	}
}
