package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Every program a tool starts runs under a seccomp filter that refuses
// what Landlock does not govern:
//
//   - privileged or kernel-wide operations a program might still reach
//     (capabilities are dropped, but some need none or act on the host's
//     objects): bpf, perf_event_open, userfaultfd, the key rings, file
//     handles (open_by_handle_at opens a file by inode, past every path
//     rule), namespaces (unshare, setns, clone with a CLONE_NEW* flag;
//     clone3, whose flags a filter cannot read, fails with ENOSYS so that
//     libc falls back to clone), the mount family, modules, kexec, reboot,
//     swap, accounting and quotas;
//   - changing user ids (the process bound of a root gateway is counted
//     under the program's real uid) and setting another process's limits;
//   - channels to processes outside that no path rule covers: System V IPC
//     and POSIX message queues;
//   - executable memory files: memfd_create unless the file is sealed
//     against execution (MFD_NOEXEC_SEAL), since Landlock lets a process
//     execute an in-memory file;
//   - io_uring, whose operations bypass these checks;
//   - system calls of another ABI (x32, 32-bit), whose numbers the filter
//     does not know.
//
// A supervisor without a PID namespace of its own (a subreaper) passes its
// pid: the filter then refuses every way of signalling it or its process
// group (kill, tgkill, tkill, rt_sigqueueinfo, pidfd_open, joining its
// group, asking for SIGIO to it with fcntl or ioctl), so that a program
// cannot end its supervisor and leave orphans behind where Landlock does
// not scope signals (ABI < 6).
//
// Under NetworkDeny it also refuses every socket but plain TCP ones (whose
// bind and connect Landlock refuses): UNIX sockets (Landlock does not
// govern connecting to a socket file; socketpair still makes connected
// stream and seqpacket pairs, but no datagram pair, which could send to
// any named socket), netlink (route and socket-diagnostic dumps of the
// host), UDP (so DNS), MPTCP, raw and packet sockets. Under NetworkAllow
// only NETLINK_ROUTE is left of netlink, for libc's address lookups.

// auditArch is the running architecture's audit number.
var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// x32Bit marks the x32 system calls on amd64.
const x32Bit = 0x40000000

// refused are the system calls every program is refused (EPERM).
var refused = []uint32{
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE,
	unix.SYS_OPEN_TREE_ATTR, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOUNT_SETATTR, unix.SYS_LISTMOUNT, unix.SYS_STATMOUNT,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE, unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT,
	unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_FANOTIFY_INIT,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_SETUID, unix.SYS_SETREUID, unix.SYS_SETRESUID, unix.SYS_SETFSUID,
	unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL, unix.SYS_SHMDT,
	unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
	unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMTIMEDOP, unix.SYS_SEMCTL,
	unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE,
	unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR, unix.SYS_MEMFD_SECRET,
}

// cloneNewFlags are clone's namespace flags (CLONE_NEWNS, CLONE_NEWCGROUP,
// CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET).
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// Offsets in struct seccomp_data: nr, arch, then the six arguments (the
// low 32 bits of each at its offset, the high ones 4 bytes on, on a
// little-endian machine).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

// fioSetown is the FIOSETOWN ioctl (SIGIO to a process), as F_SETOWN.
const fioSetown = 0x8901

// programFilter assembles the seccomp program of the confined programs for
// the running architecture and network mode; supervisor, when not 0, is the
// pid the programs may not signal.
func programFilter(network string, supervisor uint32) ([]unix.SockFilter, error) {
	audit, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("sandbox: no seccomp filter for %s", runtime.GOARCH)
	}
	errno := func(e unix.Errno) bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)} }
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	arg := func(i uint32) bpf.Instruction { return bpf.LoadAbsolute{Off: offArg0 + 8*i, Size: 4} }
	argHigh := func(i uint32) bpf.Instruction { return bpf.LoadAbsolute{Off: offArg0 + 8*i + 4, Size: 4} }
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: audit, SkipTrue: 1},
		errno(unix.EPERM), // another ABI
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1}, errno(unix.EPERM))
	}
	for _, nr := range refused {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, errno(unix.EPERM))
	}
	// when appends a block run for system call nr; every block returns.
	when := func(nr uint32, block ...bpf.Instruction) {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(block))})
		prog = append(prog, block...)
	}
	when(unix.SYS_CLONE3, errno(unix.ENOSYS))
	when(unix.SYS_CLONE, // clone(flags, ...)
		arg(0),
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNewFlags, SkipFalse: 1},
		errno(unix.EPERM),
		allow)
	when(unix.SYS_MEMFD_CREATE, // memfd_create(name, flags)
		arg(1),
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.MFD_NOEXEC_SEAL, SkipTrue: 1},
		errno(unix.EPERM),
		allow)
	when(unix.SYS_PRLIMIT64, // prlimit64(pid, ...): only the caller's own (pid 0)
		arg(0),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
		errno(unix.EPERM),
		argHigh(0),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
		errno(unix.EPERM),
		allow)
	if supervisor != 0 {
		eperm := errno(unix.EPERM)
		// isPid refuses when the loaded value is one of vals.
		isPid := func(vals ...uint32) []bpf.Instruction {
			var out []bpf.Instruction
			for i, v := range vals {
				out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(vals) - i)})
			}
			return append(out, allow, eperm)
		}
		group, all := -supervisor, ^uint32(0) // -pid and -1
		when(unix.SYS_KILL, append([]bpf.Instruction{arg(0)}, isPid(supervisor, group, all)...)...)
		when(unix.SYS_TKILL, eperm)
		for _, nr := range []uint32{unix.SYS_TGKILL, unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_PIDFD_OPEN} {
			when(nr, append([]bpf.Instruction{arg(0)}, isPid(supervisor)...)...)
		}
		when(unix.SYS_SETPGID, append([]bpf.Instruction{arg(1)}, isPid(supervisor)...)...)
		when(unix.SYS_FCNTL, append([]bpf.Instruction{arg(1)}, isPid(unix.F_SETOWN, unix.F_SETOWN_EX)...)...)
		when(unix.SYS_IOCTL, append([]bpf.Instruction{arg(1)}, isPid(fioSetown, unix.SIOCSPGRP)...)...)
	}
	// socket(domain, type, protocol)
	if network == NetworkDeny {
		when(unix.SYS_SOCKET,
			arg(0),
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
			allow)
		when(unix.SYS_SOCKETPAIR, // socketpair(domain, type, protocol, sv)
			arg(1),
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOCK_DGRAM, SkipFalse: 1},
			errno(unix.EACCES),
			allow)
	} else {
		when(unix.SYS_SOCKET,
			arg(0),
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_NETLINK, SkipFalse: 4},
			arg(2),
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.NETLINK_ROUTE, SkipTrue: 1},
			errno(unix.EACCES),
			allow,
			allow)
	}
	prog = append(prog, allow)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("sandbox: assembling the seccomp filter: %w", err)
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
