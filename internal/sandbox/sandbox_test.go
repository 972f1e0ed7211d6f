package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// layout returns a workspace and, beside it, a secret file outside it.
func layout(t *testing.T) (ws, secret string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	secret = filepath.Join(dir, "outside.txt")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "inside.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, secret
}

func landlock(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Usable(); err != nil {
		t.Fatalf("this kernel must support Landlock for these tests: %v", err)
	}
	return s
}

// run starts argv in ws through s and returns its output and exit error.
func run(t *testing.T, s *sandbox.Sandbox, ws string, argv ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = ws, &out, &out
	p, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}})
	if err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	err = waitExit(p)
	return out.String(), err
}

func TestAConfinedProcessReachesOnlyTheWorkspaceAndSystemDirectories(t *testing.T) {
	s := landlock(t)
	ws, secret := layout(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	denied := []struct {
		name string
		argv []string
	}{
		{"cat ../x", []string{"/bin/cat", "../outside.txt"}},
		{"cat by absolute path", []string{"/bin/cat", secret}},
		{"through /proc/self/root", []string{"/bin/cat", "/proc/self/root" + secret}},
		{"a second program execve'd by the first", []string{"/bin/sh", "-c", "exec /bin/cat ../outside.txt"}},
		{"a program started by a nested shell", []string{"/bin/sh", "-c", "/bin/sh -c 'cat ../outside.txt'"}},
		{"the gateway's executable", []string{"/bin/cat", self}},
		{"the gateway's root through /proc", []string{"/bin/cat", "/proc/" + strconv.Itoa(os.Getpid()) + "/root" + secret}},
	}
	for _, tc := range denied {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, s, ws, tc.argv...)
			if err == nil || strings.Contains(out, "secret") {
				t.Errorf("%v read outside: %.200q %v", tc.argv, out, err)
			}
		})
	}
	for _, argv := range [][]string{
		{"/bin/sh", "-c", "echo forged > ../written.txt"},
		{"/bin/sh", "-c", "exec /bin/cp inside.txt ../written.txt"},
		{"/bin/sh", "-c", ": > ../outside.txt"},
		{"/usr/bin/truncate", "-s", "0", secret},
		{"/bin/mv", secret, "moved.txt"},
	} {
		if out, err := run(t, s, ws, argv...); err == nil {
			t.Errorf("%v succeeded outside the workspace: %q", argv, out)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "written.txt")); err == nil {
		t.Error("a confined process created a file outside the workspace")
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "secret\n" {
		t.Errorf("the file outside changed: %q %v", b, err)
	}

	// Inside the workspace and the system directories everything works.
	if out, err := run(t, s, ws, "/bin/sh", "-c", "cat inside.txt; echo new > new.txt; cat new.txt; ls /usr/bin | grep -c '^ls$'; echo x > /dev/null"); err != nil ||
		out != "inside\nnew\n1\n" {
		t.Errorf("allowed work: %q %v", out, err)
	}
}

func TestTheGatewayStaysUnconfined(t *testing.T) {
	s := landlock(t)
	ws, secret := layout(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			cmd := exec.Command("/bin/true")
			cmd.Dir = ws
			p, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}})
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = p.Wait()
		})
	}
	wg.Wait()
	// Every thread of this process can still read and write outside.
	for range 50 {
		if _, err := os.ReadFile(secret); err != nil {
			t.Fatalf("the gateway lost access: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(ws), "by-gateway"), nil, 0o644); err != nil {
		t.Fatalf("the gateway lost write access: %v", err)
	}
}

func TestWithoutLandlockToolsAreRefusedUnlessTheSandboxIsOff(t *testing.T) {
	ws, secret := layout(t)
	for _, abi := range []func() (int, error){
		func() (int, error) { return 0, syscall.ENOSYS },
		func() (int, error) { return 2, nil },
	} {
		s, err := sandbox.New(sandbox.Config{ABI: abi})
		if err != nil {
			t.Fatal(err)
		}
		if s.Usable() == nil || !strings.HasPrefix(s.Status(), "unavailable") {
			t.Errorf("usable without Landlock: %s", s.Status())
		}
		cmd := exec.Command("/bin/sh", "-c", "echo ran > ran.txt")
		cmd.Dir = ws
		if _, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}}); !errors.Is(err, sandbox.ErrUnusable) {
			t.Errorf("start without Landlock: %v", err)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
			t.Error("a process ran without Landlock")
		}
	}
	off, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeOff, ABI: func() (int, error) { return 0, syscall.ENOSYS }})
	if err != nil {
		t.Fatal(err)
	}
	if off.Usable() != nil || !strings.HasPrefix(off.Status(), "off") {
		t.Errorf("off: %s", off.Status())
	}
	if out, err := run(t, off, ws, "/bin/cat", secret); err != nil || out != "secret\n" {
		t.Errorf("an unconfined process: %q %v", out, err)
	}
	if _, err := sandbox.New(sandbox.Config{Mode: "strict"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// A confined process cannot signal the gateway nor any process outside its
// Landlock domain (ABI 6 scopes signals), while it can signal its own children.
func TestAConfinedProcessCannotSignalTheGateway(t *testing.T) {
	s := landlock(t)
	if s.ABI() < 6 {
		t.Skipf("Landlock ABI %d does not scope signals", s.ABI())
	}
	ws, _ := layout(t)
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	self := strconv.Itoa(os.Getpid())
	for _, argv := range [][]string{
		{"/bin/bash", "-c", "kill -USR1 " + self},
		{"/usr/bin/kill", "-USR1", self},
		{"/bin/bash", "-c", "kill -0 " + self},
	} {
		// In a PID namespace of its own the gateway is not even visible.
		if out, err := run(t, s, ws, argv...); err == nil ||
			!strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "No such process") {
			t.Errorf("%v: %q %v", argv, out, err)
		}
	}
	// Signals are dequeued lowest number first: a SIGUSR1 the children had
	// sent would arrive before this SIGUSR2.
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	if got := <-sig; got != syscall.SIGUSR2 {
		t.Errorf("the test process received %v from a confined process", got)
	}

	// An unconfined process the gateway started is out of reach too: it
	// dies of the SIGKILL sent below, not of a SIGTERM a confined process sent.
	victim := exec.Command("/bin/sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(victim.Process.Pid)
	if out, err := run(t, s, ws, "/bin/bash", "-c", "kill -TERM "+pid); err == nil {
		t.Errorf("kill -TERM %s: %q", pid, out)
	}
	_ = victim.Process.Kill()
	err := victim.Wait()
	if st, ok := victim.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Errorf("the unconfined process ended with %v", err)
	}

	// Within its own domain a confined process still signals its children.
	if out, err := run(t, s, ws, "/bin/bash", "-c", "sleep 60 & kill -TERM $!; wait $!; echo $?"); err != nil || out != "143\n" {
		t.Errorf("signalling its own child: %q %v", out, err)
	}
}

func BenchmarkStartConfined(b *testing.B) { benchStart(b, sandbox.Config{}) }

func BenchmarkStartUnconfined(b *testing.B) { benchStart(b, sandbox.Config{Mode: sandbox.ModeOff}) }

// BenchmarkStartConfinedSmallSupervisor starts the supervisor the image
// ships (cmd/toolhooks-sandbox) rather than this test binary.
func BenchmarkStartConfinedSmallSupervisor(b *testing.B) {
	benchStart(b, sandbox.Config{Supervisor: BuildSupervisor(b)})
}

// BenchmarkStartConfinedSubreaper supervises without a PID namespace.
func BenchmarkStartConfinedSubreaper(b *testing.B) {
	benchStart(b, sandbox.Config{Supervisor: BuildSupervisor(b), Reaper: sandbox.ReaperSubreaper})
}

// BuildSupervisor builds cmd/toolhooks-sandbox and returns its path.
func BuildSupervisor(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), sandbox.SupervisorName)
	if out, err := exec.Command("go", "build", "-ldflags=-s", "-o", p, "github.com/toolhooks/toolhooks/cmd/toolhooks-sandbox").CombinedOutput(); err != nil {
		tb.Fatalf("building the supervisor: %v\n%s", err, out)
	}
	return p
}

func benchStart(b *testing.B, cfg sandbox.Config) {
	s, err := sandbox.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	defer reportCPU(b)()
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Dir = ws
		p, err := s.Start(cmd, sandbox.Confinement{Writable: []string{ws}})
		if err != nil {
			b.Fatal(err)
		}
		if rep, err := p.Wait(); err != nil || rep.ExitCode != 0 {
			b.Fatal(rep, err)
		}
	}
}

// reportCPU reports the CPU time this process (not its children) spent per
// operation, which a loaded machine disturbs far less than wall time.
func reportCPU(b *testing.B) func() {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	return func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		ns := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
		b.ReportMetric(float64(ns(end)-ns(start))/float64(b.N), "cpu-ns/op")
	}
}

// waitExit waits for p, with an error when the program did not exit with
// status 0.
func waitExit(p *sandbox.Process) error {
	rep, err := p.Wait()
	switch {
	case err != nil:
		return err
	case !rep.Exited:
		return fmt.Errorf("killed by %v", rep.Signal)
	case rep.ExitCode != 0:
		return fmt.Errorf("exit status %d", rep.ExitCode)
	}
	return nil
}
