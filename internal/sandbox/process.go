package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// How the processes of a program are kept from outliving it.
const (
	// ReaperPIDNamespace: the supervisor is the init of a PID namespace of
	// its own (created directly by a gateway with CAP_SYS_ADMIN, else in a
	// user namespace of its own).
	ReaperPIDNamespace = "pid namespace"
	// ReaperSubreaper: the supervisor is a child subreaper (where no
	// namespace may be created, e.g. under a container runtime's default
	// seccomp profile). No program can kill it: Landlock (ABI 6) scopes
	// signals, and the seccomp filter refuses signalling its pid and group.
	ReaperSubreaper = "subreaper"
)

// uidBase is where the real uids a root gateway gives its programs start
// (one per program, so that RLIMIT_NPROC counts that program's processes
// alone); no account is expected this high.
const uidBase = 0x7f000000

// uidSeq hands out those uids.
var uidSeq atomic.Uint32

// reaping decides how programs are supervised on this host: it probes
// which namespaces a supervisor may be started in.
func (s *Sandbox) reaping(noNamespace bool) {
	s.reaper, s.procBound = ReaperSubreaper, ""
	root := os.Geteuid() == 0
	for _, flags := range []uintptr{unix.CLONE_NEWPID, unix.CLONE_NEWUSER | unix.CLONE_NEWPID} {
		if flags&unix.CLONE_NEWUSER == 0 && !root || noNamespace {
			continue
		}
		attr := s.nsAttr(flags)
		cmd := exec.Command(s.supervisor)
		cmd.Args = []string{supervisorArg0, `{"probe":true}`}
		cmd.Env = []string{}
		cmd.SysProcAttr = attr
		if err := cmd.Run(); err == nil {
			s.cloneFlags = flags
			s.reaper = ReaperPIDNamespace
			break
		}
	}
	switch {
	case s.limits.Processes == 0:
	case root && s.cloneFlags&unix.CLONE_NEWUSER == 0:
		s.procBound = "per program (its own real uid)"
	case s.cloneFlags&unix.CLONE_NEWUSER != 0 && !root:
		s.procBound = "per program (its own user namespace)"
	default:
		s.procBound = "none: neither a root gateway nor a user namespace; the pod's pid limit is the bound"
	}
}

// nsAttr is the supervisor's SysProcAttr for clone flags.
func (s *Sandbox) nsAttr(flags uintptr) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: flags}
	if flags&unix.CLONE_NEWUSER != 0 {
		uid, gid := os.Geteuid(), os.Getegid()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	return attr
}

// SupervisorName is the file name of the dedicated supervisor executable
// (cmd/toolhooks-sandbox), which starts faster than the gateway's.
const SupervisorName = "toolhooks-sandbox"

// DefaultSupervisor is SupervisorName beside the running executable when
// there is one, else the running executable itself (/proc/self/exe).
func DefaultSupervisor() string {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), SupervisorName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return "/proc/self/exe"
}

// Process is a program started by Start.
type Process struct {
	cmd    *exec.Cmd
	report *os.File // nil when unconfined
}

// Wait waits for the program (cmd.Wait) and returns what its supervisor
// reported. Without the sandbox the report only mirrors the exit status.
// A report without an exit status means the supervisor itself was killed
// (the gateway's WaitDelay after a stop); its tree died with it.
func (p *Process) Wait() (Report, error) {
	err := p.cmd.Wait()
	var rep Report
	if p.report == nil {
		if p.cmd.ProcessState != nil {
			ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
			rep.Exited, rep.ExitCode, rep.Signal = ws.Exited(), ws.ExitStatus(), ws.Signal()
			if ws.Signaled() {
				rep.Exited = false
			}
		}
		return rep, err
	}
	b, rerr := io.ReadAll(io.LimitReader(p.report, 1<<16))
	_ = p.report.Close()
	if rerr != nil || len(b) == 0 {
		rep.Signal, rep.Stopped = syscall.SIGKILL, true
		if err == nil {
			err = errors.New("sandbox: the supervisor reported nothing")
		}
		return rep, err
	}
	if jerr := json.Unmarshal(b, &rep); jerr != nil {
		return rep, fmt.Errorf("sandbox: the supervisor's report: %w", jerr)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("sandbox: %s", rep.Error)
	}
	if _, ok := errors.AsType[*exec.ExitError](err); ok {
		err = nil // the program's status is the report's
	}
	return rep, err
}

// start starts cmd's program under a supervisor that confines it with the
// Landlock ruleset fd.
func (s *Sandbox) start(cmd *exec.Cmd, ruleset int) (*Process, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if len(cmd.ExtraFiles) > 0 || cmd.Process != nil {
		return nil, errors.New("sandbox: a command with extra files, or already started")
	}
	if strings.ContainsRune(cmd.Path, 0) {
		return nil, errors.New("sandbox: NUL in the program path")
	}
	sp := spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Environ(), Network: s.network, Limits: s.limits}
	attr := s.nsAttr(s.cloneFlags)
	sp.PIDNS = s.cloneFlags&unix.CLONE_NEWPID != 0
	switch {
	case s.limits.Processes == 0:
	case os.Geteuid() == 0 && s.cloneFlags&unix.CLONE_NEWUSER == 0:
		sp.UID = uidBase + uidSeq.Add(1)%(1<<20)
	case s.cloneFlags&unix.CLONE_NEWUSER != 0:
		sp.ExtraThreads = supervisorThreads
	}
	if old := cmd.SysProcAttr; old != nil {
		attr.Setpgid, attr.Pgid, attr.Setsid, attr.Noctty, attr.Setctty, attr.Ctty, attr.Foreground =
			old.Setpgid, old.Pgid, old.Setsid, old.Noctty, old.Setctty, old.Ctty, old.Foreground
	}
	attr.Pdeathsig = syscall.SIGTERM
	if sp.PIDNS {
		attr.Pdeathsig = syscall.SIGKILL // the kernel ends the namespace with it
	}
	arg, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	rfd, err := unix.FcntlInt(uintptr(ruleset), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	rf := os.NewFile(uintptr(rfd), "landlock-ruleset")
	defer func() { _ = rf.Close() }()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer func() { _ = w.Close() }()
	cmd.Path, cmd.Args, cmd.Env = s.supervisor, []string{supervisorArg0, string(arg)}, []string{"GOMAXPROCS=1"}
	cmd.ExtraFiles = []*os.File{rf, w}
	cmd.SysProcAttr = attr
	if cmd.Cancel != nil {
		// Told to stop, the supervisor kills the whole tree and reports;
		// killing it (after WaitDelay) is the last resort.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		return nil, err
	}
	return &Process{cmd: cmd, report: r}, nil
}

// supervisorThreads bounds the threads of a supervisor (GOMAXPROCS=1: the
// main thread, the system monitor, the one blocked in wait4 and spares),
// counted with the program's processes in its user namespace.
const supervisorThreads = 6
