// Package sandbox confines the processes the gateway's tools start with
// Landlock: read-write beneath the directories a call may change (the
// workspace and the call's private temporary directory), read and execute
// beneath a list of system directories, /dev/null, /dev/zero and
// /dev/urandom, and nothing else; signals to processes outside the sandbox
// and abstract UNIX sockets are scoped too where the kernel supports it. By
// default they may neither bind nor connect TCP sockets (NetworkDeny; a
// kernel without Landlock's network rules then makes the sandbox unusable),
// unless the network is explicitly allowed.
//
// Only the program is confined, never the gateway: each program runs under a
// supervisor (supervisor.go) that restricts one locked OS thread
// (landlock_restrict_self without TSYNC is per thread), drops every
// privilege and sets the limits there, forks the program from it and lets
// that thread exit. The supervisor ends every process the program leaves
// behind when it exits, and reports how many it ended.
package sandbox

import (
	"errors"
	"fmt"
	"os/exec"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Modes of the sandbox.
const (
	// ModeLandlock confines every process the tools start (the default).
	ModeLandlock = "landlock"
	// ModeOff runs them unconfined; only for hosts without Landlock, and reported.
	ModeOff = "off"
)

// Network modes of the sandbox. Landlock's network rules cover TCP bind and
// connect alone; under NetworkDeny a seccomp filter refuses the other IP
// sockets (UDP, MPTCP, raw, packet) and io_uring (see seccomp.go). A TCP
// socket listening without a bind still gets an ephemeral port.
const (
	// NetworkDeny refuses confined processes every TCP bind and connect and
	// every socket but UNIX, netlink and TCP (the default).
	NetworkDeny = "deny"
	// NetworkAllow lets them use the network, and read the files that
	// name resolution needs (resolverFiles).
	NetworkAllow = "allow"
)

// NetABI is the Landlock ABI that introduced TCP bind and connect rules
// (Linux 6.7); NetworkDeny needs it.
const NetABI = 4

// MinABI is the oldest Landlock ABI the sandbox accepts: version 3 (Linux
// 6.2) is the first that also controls truncation, without which a confined
// process could still truncate any file it can reach.
const MinABI = 3

// DefaultReadExecDirs are the paths confined processes may read and
// execute beneath unless configured otherwise: enough for git, go, ls, cat,
// grep, wc and the dynamic loader; missing ones are skipped, and so is any
// the call's policy forbids. /etc/ld.so.cache only spares the loader its
// search of the default library directories (it works without it);
// /etc/localtime gives programs the local time zone; /etc/gitconfig is the
// operator's system-wide git configuration.
var DefaultReadExecDirs = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/localtime", "/etc/gitconfig",
}

// deviceFiles are the device files confined processes may use, with their rights.
var deviceFiles = map[string]uint64{
	"/dev/null":    llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev,
	"/dev/zero":    llsys.AccessFSReadFile,
	"/dev/urandom": llsys.AccessFSReadFile,
	"/dev/random":  llsys.AccessFSReadFile,
}

// resolverFiles are the files confined processes may read when the network
// is allowed, so that they can resolve host names
// and verify the certificates of TLS servers.
var resolverFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf",
	"/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates"}

// Config configures a Sandbox.
type Config struct {
	// Mode is ModeLandlock (default when empty) or ModeOff.
	Mode string
	// Network is NetworkDeny (default when empty) or NetworkAllow; it
	// matters only in ModeLandlock.
	Network string
	// ReadExecDirs are the paths confined processes may read and execute
	// beneath; nil means DefaultReadExecDirs.
	ReadExecDirs []string
	// WorkspaceExec lets confined processes execute files in the workspace;
	// by default they can execute only system files and files in the
	// call's private directory.
	WorkspaceExec bool
	// ABI reports the kernel's Landlock ABI version; nil asks the kernel.
	// Tests set it to simulate a kernel without Landlock.
	ABI func() (int, error)
	// Limits bound each program (zero values: unbounded).
	Limits Limits
	// Reaper forces ReaperSubreaper when set to it; otherwise a PID
	// namespace is used where the kernel allows one.
	Reaper string
	// Supervisor is the executable of the supervisors: one whose main
	// package imports this package (which recognises the supervisor's
	// arguments in its init). Empty: DefaultSupervisor.
	Supervisor string
}

// Sandbox starts confined processes. It is immutable and safe for concurrent use.
type Sandbox struct {
	mode     string
	network  string
	rx       []string
	abi      int
	limits   Limits
	unusable error // why tools may not run; nil when they may
	// reaper is ReaperPIDNamespace or ReaperSubreaper, with the clone
	// flags of the supervisor; procBound says how Limits.Processes holds.
	reaper     string
	cloneFlags uintptr
	procBound  string
	supervisor string

	workspaceExec bool
	cache         *ruleCache // the compiled path rules of recent policies
}

// New checks the kernel and returns the sandbox. It fails only on an unknown
// mode or network mode: an unavailable Landlock (or one that cannot deny the
// network when asked to) is reported by Usable, so that the gateway can
// still decide calls while refusing to run tools.
func New(cfg Config) (*Sandbox, error) {
	s := &Sandbox{mode: cfg.Mode, network: cfg.Network, rx: cfg.ReadExecDirs, limits: cfg.Limits, supervisor: cfg.Supervisor,
		workspaceExec: cfg.WorkspaceExec, cache: &ruleCache{}}
	if s.supervisor == "" {
		s.supervisor = DefaultSupervisor()
	}
	if cfg.Reaper != "" && cfg.Reaper != ReaperSubreaper {
		return nil, fmt.Errorf("sandbox: unknown reaper %q", cfg.Reaper)
	}
	if s.mode == "" {
		s.mode = ModeLandlock
	}
	if s.network == "" {
		s.network = NetworkDeny
	}
	if s.network != NetworkDeny && s.network != NetworkAllow {
		return nil, fmt.Errorf("sandbox: unknown network mode %q (want %q or %q)", s.network, NetworkDeny, NetworkAllow)
	}
	if s.rx == nil {
		s.rx = DefaultReadExecDirs
	}
	switch s.mode {
	case ModeOff:
		return s, nil
	case ModeLandlock:
	default:
		return nil, fmt.Errorf("sandbox: unknown mode %q (want %q or %q)", s.mode, ModeLandlock, ModeOff)
	}
	abi := cfg.ABI
	if abi == nil {
		abi = llsys.LandlockGetABIVersion
	}
	v, err := abi()
	switch {
	case err != nil:
		s.unusable = fmt.Errorf("landlock is not available on this kernel (%w); tools are refused unless the gateway runs with --sandbox=off",
			err)
	case v < MinABI:
		s.unusable = fmt.Errorf("landlock ABI %d is older than the required %d; tools are refused unless the gateway runs with --sandbox=off",
			v, MinABI)
	case v < NetABI && s.network == NetworkDeny:
		s.unusable = fmt.Errorf("landlock ABI %d is older than %d, the first that can deny programs the network; "+
			"tools are refused unless the gateway runs with --sandbox-network=allow", v, NetABI)
	default:
		s.abi = v
	}
	if s.unusable == nil {
		if _, err = programFilter(s.network, 0); err != nil {
			s.unusable, s.abi = err, 0
		}
	}
	if s.unusable == nil {
		s.reaping(cfg.Reaper == ReaperSubreaper)
	}
	return s, nil
}

// ErrUnusable is wrapped by Start when tools may not run.
var ErrUnusable = errors.New("sandbox unusable")

// Usable returns nil when tools may start processes: Landlock is available
// or the sandbox is off.
func (s *Sandbox) Usable() error {
	if s.unusable != nil {
		return fmt.Errorf("%w: %v", ErrUnusable, s.unusable)
	}
	return nil
}

// Mode is ModeLandlock or ModeOff.
func (s *Sandbox) Mode() string { return s.mode }

// Network is NetworkDeny or NetworkAllow.
func (s *Sandbox) Network() string { return s.network }

// ABI is the kernel's Landlock ABI version in use (0 when off or unavailable).
func (s *Sandbox) ABI() int { return s.abi }

// Status describes the sandbox in one line, for /readyz and the log.
func (s *Sandbox) Status() string {
	switch {
	case s.mode == ModeOff:
		return "off: processes started by tools are not confined"
	case s.unusable != nil:
		return "unavailable: " + s.unusable.Error()
	}
	net := "network denied (no TCP bind or connect, no UNIX, netlink or other IP sockets)"
	if s.network == NetworkAllow {
		net = "network allowed"
	}
	reaper := s.reaper
	procs := ""
	if s.procBound != "" {
		procs = ", process bound " + s.procBound
	}
	return fmt.Sprintf("landlock ABI %d, %s, no capabilities, processes ended with each program by its supervisor (%s); limits: %s%s",
		s.abi, net, reaper, s.limits, procs)
}

// Reaper is how programs are kept from outliving their call:
// ReaperPIDNamespace or ReaperSubreaper ("" when off or unusable).
func (s *Sandbox) Reaper() string { return s.reaper }

// Start starts cmd confined to what c permits (and read and execute access
// beneath the configured system directories the policy does not forbid),
// without TCP unless the network is allowed, without privileges, within the
// limits and under a supervisor that ends what it leaves running; or
// unconfined when the sandbox is off. Wait for it with the Process, not
// cmd.Wait. cmd's Path, Args, Env, ExtraFiles and SysProcAttr become the
// supervisor's (its Setpgid and Setsid settings are kept); a Cancel function
// set by exec.CommandContext is replaced by one that has the supervisor end
// the whole tree.
func (s *Sandbox) Start(cmd *exec.Cmd, c Confinement) (*Process, error) {
	if err := s.Usable(); err != nil {
		return nil, err
	}
	if s.mode == ModeOff {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return &Process{cmd: cmd}, nil
	}
	fd, err := s.ruleset(c)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	return s.start(cmd, fd)
}

// handled returns the file-system rights, network rights and scopes the
// ruleset controls: every one the kernel's ABI knows of, and the network's
// only when it is denied. No rule grants a network right, so a handled one
// is refused on every port.
func (s *Sandbox) handled() (fs, net, scoped uint64) {
	fs = 1<<13 - 1 // ABI 1: execute .. make symlink
	if s.abi >= 2 {
		fs |= llsys.AccessFSRefer
	}
	if s.abi >= 3 {
		fs |= llsys.AccessFSTruncate
	}
	if s.abi >= NetABI && s.network == NetworkDeny {
		net = llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP
	}
	if s.abi >= 5 {
		fs |= llsys.AccessFSIoctlDev
	}
	if s.abi >= 6 {
		scoped = llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal
	}
	return fs, net, scoped
}

const (
	fileRights = llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSReadFile |
		llsys.AccessFSTruncate | llsys.AccessFSIoctlDev
	readExec = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir
)

// ruleset builds the ruleset of one start.
func (s *Sandbox) ruleset(c Confinement) (int, error) {
	fs, net, scoped := s.handled()
	fd, err := llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: fs, HandledAccessNet: net, Scoped: scoped}, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox: landlock_create_ruleset: %w", err)
	}
	for _, p := range c.Writable {
		if err := addRule(fd, p, fs, fs, true); err != nil {
			_ = unix.Close(fd)
			return -1, err
		}
	}
	if err := s.pathRules(fd, c, fs); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// addRule allows rights (limited to handled, and to file rights for a
// file) beneath p; a missing p is skipped unless required.
func addRule(ruleset int, p string, rights, handled uint64, required bool) error {
	pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if !required && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("sandbox: %s: %w", p, err)
	}
	defer func() { _ = unix.Close(pfd) }()
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("sandbox: %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	rights &= handled
	if err := llsys.LandlockAddPathBeneathRule(ruleset, &llsys.PathBeneathAttr{AllowedAccess: rights, ParentFd: pfd}, 0); err != nil {
		return fmt.Errorf("sandbox: landlock_add_rule %s: %w", p, err)
	}
	return nil
}
