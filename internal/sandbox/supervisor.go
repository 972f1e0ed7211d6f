package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Every program a tool starts runs under a supervisor: this binary started
// again (from /proc/self/exe) with supervisorArg0 as its argv[0], which the
// package's init recognises before the program's main runs. The supervisor
// starts unconfined; on one locked thread it drops every privilege, sets
// the limits, restricts itself with the Landlock ruleset it inherits (fd
// rulesetFD) and the seccomp filter, and starts the program from that
// thread, which then exits. The rest of the supervisor stays outside the
// program's Landlock domain, so that the program can neither signal nor
// trace it (Landlock ABI 6 scopes signals), and is not dumpable.
//
// When the program exits, or exceeds a limit, or the supervisor is told to
// stop (SIGTERM), every process the program left behind is killed, the
// supervisor writes its report to fd reportFD and exits with the program's
// status. No process escapes: in a PID namespace of its own the supervisor
// is its init, and every process in it is killed when it kills them or
// dies; without one it is a child subreaper, to which every orphan of the
// tree is reparented, and it kills its children until none is left.

const (
	supervisorArg0 = "toolhooks-sandbox-supervisor"
	rulesetFD      = 3
	reportFD       = 4
)

// spec is what the gateway tells a supervisor.
type spec struct {
	Path    string   `json:"path"`
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	Network string   `json:"network"`
	Limits  Limits   `json:"limits"`
	// PIDNS: the supervisor is the init of a PID namespace of its own.
	PIDNS bool `json:"pidns,omitempty"`
	// UID, when not zero, is the real uid the program runs with (the
	// effective one stays the gateway's), so that RLIMIT_NPROC counts its
	// processes alone; only a root gateway sets it.
	UID uint32 `json:"uid,omitempty"`
	// ExtraThreads is added to the process bound for the supervisor's own
	// threads, counted with the program's in a user namespace.
	ExtraThreads int `json:"extraThreads,omitempty"`
	// Probe: exit 0 at once (the gateway probing which namespaces it may create).
	Probe bool `json:"probe,omitempty"`
}

// Report is what a supervisor tells of its program.
type Report struct {
	// Exited is set when the program exited, with its ExitCode; otherwise it
	// was killed by Signal.
	Exited   bool           `json:"exited"`
	ExitCode int            `json:"exitCode"`
	Signal   syscall.Signal `json:"signal,omitempty"`
	// Ended counts the processes the program left running that were killed.
	Ended int `json:"ended"`
	// Exceeded names the limit a process of the program exceeded ("CPU time",
	// "file size"), which ended the whole tree.
	Exceeded string `json:"exceeded,omitempty"`
	// Stopped: the gateway stopped the program (timeout or cancellation).
	Stopped bool `json:"stopped,omitempty"`
	// Error: the program could not be started.
	Error string `json:"error,omitempty"`
}

func init() {
	if len(os.Args) == 2 && os.Args[0] == supervisorArg0 {
		os.Exit(supervise(os.Args[1]))
	}
}

// supervise runs the supervisor and returns its exit status.
func supervise(arg string) int {
	out := os.NewFile(reportFD, "report")
	var sp spec
	if err := json.Unmarshal([]byte(arg), &sp); err != nil {
		return writeReport(out, Report{Error: "supervisor: " + err.Error()})
	}
	if sp.Probe {
		return 0
	}
	if sp.PIDNS && os.Getpid() != 1 {
		// Never kill(-1) outside a namespace of its own.
		return writeReport(out, Report{Error: "supervisor: not the init of a PID namespace"})
	}
	// The program gets stdin, stdout and stderr alone: whatever else the
	// gateway inherited without close-on-exec stays here.
	if err := unix.CloseRange(rulesetFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := rulesetFD; fd < 1024; fd++ {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return writeReport(out, Report{Error: "supervisor: " + err.Error()})
	}
	if !sp.PIDNS {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return writeReport(out, Report{Error: "supervisor: " + err.Error()})
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	guard := uint32(0)
	if !sp.PIDNS {
		guard = uint32(os.Getpid())
	}
	filter, err := programFilter(sp.Network, guard)
	if err != nil {
		return writeReport(out, Report{Error: err.Error()})
	}
	type started struct {
		pid, pidfd int
		err        error
	}
	startc := make(chan started, 1)
	go func() {
		// Never unlocked: the thread, now confined, exits with this goroutine.
		runtime.LockOSThread()
		pid, pidfd, err := startConfined(&sp, filter)
		startc <- started{pid, pidfd, err}
	}()
	st := <-startc
	if st.err != nil {
		return writeReport(out, Report{Error: st.err.Error()})
	}
	go func() {
		<-stop
		// A pidfd, not the pid: the program may already be reaped and its pid reused.
		_ = unix.PidfdSendSignal(st.pidfd, unix.SIGKILL, nil, 0)
		stopped.Store(true)
	}()
	rep := reap(st.pid, sp.PIDNS)
	rep.Stopped = stopped.Load()
	writeReport(out, rep)
	if rep.Exited {
		return rep.ExitCode
	}
	return 128 + int(rep.Signal)
}

// stopped records that the gateway stopped the program.
var stopped atomic.Bool

// startConfined confines the calling, locked thread and starts the program
// from it; it returns the program's pid and a pidfd of it.
func startConfined(sp *spec, filter []unix.SockFilter) (pid, pidfd int, err error) {
	if sp.UID != 0 {
		// This thread alone (the raw system call; the libc-style wrapper
		// would change every thread); needs CAP_SETUID, dropped next.
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(sp.UID), ^uintptr(0), ^uintptr(0)); e != 0 {
			return 0, 0, fmt.Errorf("sandbox: setting the program's real uid: %w", e)
		}
	}
	if err := dropPrivileges(); err != nil {
		return 0, 0, err
	}
	if err := sp.Limits.setrlimits(sp.ExtraThreads); err != nil {
		return 0, 0, err
	}
	if err := llsys.LandlockRestrictSelf(rulesetFD, 0); err != nil {
		return 0, 0, fmt.Errorf("sandbox: landlock_restrict_self: %w", err)
	}
	if err := installFilter(filter); err != nil {
		return 0, 0, err
	}
	pidfd = -1
	pid, err = syscall.ForkExec(sp.Path, sp.Args, &syscall.ProcAttr{
		Env:   sp.Env,
		Files: []uintptr{0, 1, 2},
		// A process group of its own: the supervisor's is not the program's to signal.
		Sys: &syscall.SysProcAttr{PidFD: &pidfd, Setpgid: !sp.PIDNS},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", sp.Path, err)
	}
	return pid, pidfd, nil
}

// reap waits for the program, ending the tree when a process of it exceeds
// a limit, then kills what is left and returns the report.
func reap(pid int, pidns bool) Report {
	var rep Report
	done := false
	for !done {
		var ws unix.WaitStatus
		var ru unix.Rusage
		wpid, err := unix.Wait4(-1, &ws, 0, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: the program is gone
			break
		}
		if ex := exceeded(ws); ex != "" && rep.Exceeded == "" {
			rep.Exceeded = ex
			done = true
		}
		if wpid == pid {
			rep.Exited, rep.ExitCode, rep.Signal = ws.Exited(), ws.ExitStatus(), ws.Signal()
			done = true
			if ex := exceededStatus(ws); ex != "" && rep.Exceeded == "" {
				rep.Exceeded = ex
			}
		}
	}
	rep.Ended = killAll(pid, pidns, &rep)
	return rep
}

// exceeded names the limit a process that ended with ws exceeded.
func exceeded(ws unix.WaitStatus) string {
	if !ws.Signaled() {
		return ""
	}
	switch ws.Signal() {
	case unix.SIGXCPU:
		return "CPU time"
	case unix.SIGXFSZ:
		return "file size"
	}
	return ""
}

// exceededStatus names the limit a shell program's status reports a
// process it waited for exceeded: shells exit with 128 plus the signal
// that killed their last command.
func exceededStatus(ws unix.WaitStatus) string {
	if !ws.Exited() || ws.ExitStatus() <= 128 {
		return ""
	}
	return exceeded(unix.WaitStatus(ws.ExitStatus() - 128))
}

// killAll kills and reaps every process left in the tree (the program
// too, when a limit ended it early) and returns how many there were,
// the program not counted. Only this goroutine reaps, so a child's pid
// cannot be reused between reading and killing it.
func killAll(pid int, pidns bool, rep *Report) int {
	n := 0
	for {
		if pidns {
			// Every process of the namespace but its init.
			_ = unix.Kill(-1, unix.SIGKILL)
		} else {
			// Reading /proc costs the gateway's wait for the supervisor a
			// walk of its dentries: only when children are left.
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.ECHILD {
				return n
			}
			if err == nil && wpid > 0 {
				if wpid != pid {
					n++
				}
				continue
			}
			for _, c := range children() {
				_ = unix.Kill(c, unix.SIGKILL)
			}
		}
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n
		}
		if wpid == pid {
			if !rep.Exited && rep.Signal == 0 {
				rep.Exited, rep.ExitCode, rep.Signal = ws.Exited(), ws.ExitStatus(), ws.Signal()
			}
			continue
		}
		n++
	}
}

// children lists the supervisor's children (each thread's).
func children() []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for f := range bytes.FieldsSeq(b) {
			if p, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// writeReport writes rep to out and returns the supervisor's exit status
// for a failure to start.
func writeReport(out *os.File, rep Report) int {
	b, err := json.Marshal(rep)
	if err == nil {
		_, err = out.Write(b)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolhooks sandbox supervisor:", errors.Join(err, errors.New(rep.Error)))
	}
	return 126
}
