package sandbox

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Limits bound what one program a tool starts, with every process it
// starts, may use. Zero means no bound.
type Limits struct {
	// Processes bounds the processes and threads alive at once in one
	// program's tree (RLIMIT_NPROC counted in a per-program user namespace,
	// or under a per-program real uid when the gateway runs as root; see
	// Sandbox.Status for which holds). A fork beyond it fails with EAGAIN.
	Processes int
	// Memory bounds each process's private writable memory (RLIMIT_DATA: heap
	// and private mappings; an allocation beyond it fails) and its address
	// space to Memory plus AddressSlack (RLIMIT_AS, which also counts shared
	// mappings).
	Memory uint64
	// CPUTime bounds each process's CPU time (RLIMIT_CPU): beyond it the
	// process gets SIGXCPU, a second later SIGKILL, and the program's whole
	// tree is ended.
	CPUTime time.Duration
	// FileSize bounds the size of every file a process writes (RLIMIT_FSIZE):
	// a write beyond it fails and raises SIGXFSZ, which ends the program's
	// whole tree.
	FileSize uint64
}

// Default limits of the gateway's flags.
const (
	DefaultMaxProcesses = 256
	DefaultMaxMemory    = 2 << 30
	DefaultMaxCPUTime   = 5 * time.Minute
	DefaultMaxFileSize  = 1 << 30
)

// DefaultLimits are the limits of the gateway's flags' defaults.
var DefaultLimits = Limits{
	Processes: DefaultMaxProcesses, Memory: DefaultMaxMemory, CPUTime: DefaultMaxCPUTime, FileSize: DefaultMaxFileSize,
}

// AddressSlack is the address space a process may reserve beyond Memory:
// runtimes reserve far more address space than they use (a Go program
// starts with over 1 GiB), which RLIMIT_AS would otherwise count.
const AddressSlack = 4 << 30

// unbounded names a limit that is not set, in the status line.
const unbounded = "unbounded"

// String describes the limits for the status line.
func (l Limits) String() string {
	b := func(n uint64) string {
		if n == 0 {
			return unbounded
		}
		return fmt.Sprintf("%d MiB", n>>20)
	}
	p := unbounded
	if l.Processes > 0 {
		p = fmt.Sprint(l.Processes)
	}
	c := unbounded
	if l.CPUTime > 0 {
		c = l.CPUTime.String()
	}
	return fmt.Sprintf("processes %s, memory %s, CPU time %s, file size %s", p, b(l.Memory), c, b(l.FileSize))
}

// setrlimits lowers the calling process's limits, hard ones included (a
// process may raise a soft limit up to the hard one), to l; extraProcs is
// added to the process bound for the threads of the supervisor counted
// with the program's.
func (l Limits) setrlimits(extraProcs int) error {
	set := func(res int, name string, soft, hard uint64) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: soft, Max: hard}); err != nil {
			return fmt.Errorf("sandbox: limiting %s: %w", name, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_CORE, "core dumps", 0, 0); err != nil {
		return err
	}
	if l.Processes > 0 {
		n := uint64(l.Processes + extraProcs)
		if err := set(unix.RLIMIT_NPROC, "processes", n, n); err != nil {
			return err
		}
	}
	if l.Memory > 0 {
		if err := set(unix.RLIMIT_DATA, "memory", l.Memory, l.Memory); err != nil {
			return err
		}
		as := l.Memory + AddressSlack
		if err := set(unix.RLIMIT_AS, "address space", as, as); err != nil {
			return err
		}
	}
	if l.CPUTime > 0 {
		s := uint64((l.CPUTime + time.Second - 1) / time.Second)
		if err := set(unix.RLIMIT_CPU, "CPU time", s, s+1); err != nil {
			return err
		}
	}
	if l.FileSize > 0 {
		if err := set(unix.RLIMIT_FSIZE, "file size", l.FileSize, l.FileSize); err != nil {
			return err
		}
	}
	return nil
}
