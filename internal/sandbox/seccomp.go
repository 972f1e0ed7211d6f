package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Landlock's network rules cover TCP bind and connect alone. Under
// NetworkDeny a seccomp filter closes what they leave open: sockets of any
// family but UNIX and netlink, and IPv4 and IPv6 sockets other than plain
// TCP streams (UDP, so DNS; raw and packet sockets; MPTCP, which reaches
// TCP servers). io_uring, whose operations make sockets without the socket
// system call, and system calls of another ABI (x32, 32-bit), whose numbers
// the filter does not know, are refused too.

// seccompArch is the running architecture's audit number and the numbers
// of the system calls the filter looks at.
type seccompArch struct {
	audit                        uint32
	socket, ioUringSetup, x32Min uint32
}

// archs are the architectures the filter knows.
var archs = map[string]seccompArch{
	"amd64": {audit: unix.AUDIT_ARCH_X86_64, socket: unix.SYS_SOCKET, ioUringSetup: unix.SYS_IO_URING_SETUP, x32Min: 0x40000000},
	"arm64": {audit: unix.AUDIT_ARCH_AARCH64, socket: 198, ioUringSetup: 425},
}

// Offsets in struct seccomp_data: nr, arch, then the six arguments (the
// low 32 bits of each on a little-endian machine).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

// networkFilter assembles the seccomp program of NetworkDeny for the
// running architecture.
func networkFilter() ([]unix.SockFilter, error) {
	a, ok := archs[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("sandbox: no network filter for %s; run with --sandbox-network=allow", runtime.GOARCH)
	}
	errno := func(e unix.Errno) bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)} }
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	arg := func(i uint32) bpf.Instruction { return bpf.LoadAbsolute{Off: offArg0 + 8*i, Size: 4} }
	prog := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: offArch, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
		/* 2 */ errno(unix.EPERM), // another ABI
		/* 3 */ bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if a.x32Min != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: a.x32Min, SkipFalse: 1},
			errno(unix.EPERM))
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.ioUringSetup, SkipFalse: 1},
		errno(unix.EPERM),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.socket, SkipTrue: 1},
		allow,
		// socket(domain, type, protocol)
		arg(0),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipFalse: 1},
		allow,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_NETLINK, SkipFalse: 1},
		allow,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6, SkipTrue: 1},
		errno(unix.EACCES),
		arg(1),
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf}, // the type without SOCK_NONBLOCK and SOCK_CLOEXEC
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOCK_STREAM, SkipTrue: 1},
		errno(unix.EACCES),
		arg(2),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.IPPROTO_TCP, SkipTrue: 1},
		errno(unix.EACCES),
		allow,
	)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("sandbox: assembling the network filter: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// installFilter applies filter to the calling thread (and what it starts).
// The thread must have no_new_privs set.
func installFilter(filter []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("sandbox: seccomp: %w", e)
	}
	return nil
}
