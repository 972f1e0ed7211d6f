package sandbox

import (
	"encoding/binary"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// decide is what the filter must answer, written as plain Go.
func decide(network string, supervisor, arch, nr uint32, args [6]uint64) uint32 {
	errno := func(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	low := func(i int) uint32 { return uint32(args[i]) }
	switch {
	case arch != auditArch[runtime.GOARCH]:
		return errno(unix.EPERM)
	case runtime.GOARCH == "amd64" && nr >= x32Bit:
		return errno(unix.EPERM)
	case slices.Contains(refused, nr):
		return errno(unix.EPERM)
	}
	if supervisor != 0 {
		pid := int32(low(0))
		switch nr {
		case unix.SYS_KILL:
			if pid == int32(supervisor) || pid == -int32(supervisor) || pid == -1 {
				return errno(unix.EPERM)
			}
		case unix.SYS_TKILL:
			return errno(unix.EPERM)
		case unix.SYS_TGKILL, unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_PIDFD_OPEN:
			if pid == int32(supervisor) {
				return errno(unix.EPERM)
			}
		case unix.SYS_SETPGID:
			if low(1) == supervisor {
				return errno(unix.EPERM)
			}
		case unix.SYS_FCNTL:
			if low(1) == unix.F_SETOWN || low(1) == unix.F_SETOWN_EX {
				return errno(unix.EPERM)
			}
		case unix.SYS_IOCTL:
			if low(1) == fioSetown || low(1) == unix.SIOCSPGRP {
				return errno(unix.EPERM)
			}
		}
	}
	switch nr {
	case unix.SYS_CLONE3:
		return errno(unix.ENOSYS)
	case unix.SYS_CLONE:
		if low(0)&cloneNewFlags != 0 {
			return errno(unix.EPERM)
		}
	case unix.SYS_MEMFD_CREATE:
		if low(1)&unix.MFD_NOEXEC_SEAL == 0 {
			return errno(unix.EPERM)
		}
	case unix.SYS_PRLIMIT64:
		if args[0] != 0 {
			return errno(unix.EPERM)
		}
	case unix.SYS_SOCKET:
		domain, typ, proto := low(0), low(1)&0xf, low(2)
		if network == NetworkAllow {
			if domain == unix.AF_NETLINK && proto != unix.NETLINK_ROUTE {
				return errno(unix.EACCES)
			}
			break
		}
		if domain != unix.AF_INET && domain != unix.AF_INET6 || typ != unix.SOCK_STREAM || proto != 0 && proto != unix.IPPROTO_TCP {
			return errno(unix.EACCES)
		}
	case unix.SYS_SOCKETPAIR:
		if network == NetworkDeny && low(1)&0xf == unix.SOCK_DGRAM {
			return errno(unix.EACCES)
		}
	}
	return unix.SECCOMP_RET_ALLOW
}

// FuzzProgramFilter runs the assembled filter in a BPF interpreter on
// random system calls and checks it answers as decide does.
func FuzzProgramFilter(f *testing.F) {
	f.Add(false, uint32(unix.SYS_SOCKET), uint64(unix.AF_UNIX), uint64(unix.SOCK_STREAM), uint64(0), uint64(0))
	f.Add(true, uint32(unix.SYS_SOCKET), uint64(unix.AF_NETLINK), uint64(unix.SOCK_RAW), uint64(unix.NETLINK_SOCK_DIAG), uint64(0))
	f.Add(false, uint32(unix.SYS_CLONE), uint64(unix.CLONE_NEWUSER|unix.CLONE_VFORK), uint64(0), uint64(0), uint64(0))
	f.Add(false, uint32(unix.SYS_PRLIMIT64), uint64(1)<<32, uint64(0), uint64(0), uint64(0))
	f.Add(false, uint32(unix.SYS_MEMFD_CREATE), uint64(0), uint64(unix.MFD_CLOEXEC), uint64(0), uint64(0))
	f.Add(false, uint32(unix.SYS_SOCKETPAIR), uint64(unix.AF_UNIX), uint64(unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), uint64(0), uint64(0))
	f.Add(false, uint32(unix.SYS_BPF), uint64(0), uint64(0), uint64(0), uint64(0))
	f.Add(false, uint32(x32Bit|unix.SYS_READ), uint64(0), uint64(0), uint64(0), uint64(0))
	f.Add(false, uint32(unix.SYS_KILL), uint64(0xffffffff)<<32|uint64(0xffffffff-4242+1), uint64(9), uint64(0), uint64(0))
	f.Add(true, uint32(unix.SYS_KILL), uint64(4242), uint64(9), uint64(0), uint64(0))
	f.Add(false, uint32(unix.SYS_FCNTL), uint64(3), uint64(unix.F_SETOWN), uint64(4242), uint64(0))
	const supervisor = 4242
	type key struct {
		network string
		guard   uint32
	}
	vms := map[key]*bpf.VM{}
	for _, k := range []key{{NetworkDeny, 0}, {NetworkAllow, 0}, {NetworkDeny, supervisor}, {NetworkAllow, supervisor}} {
		prog, err := programFilter(k.network, k.guard)
		if err != nil {
			f.Fatal(err)
		}
		raw := make([]bpf.RawInstruction, len(prog))
		for i, p := range prog {
			raw[i] = bpf.RawInstruction{Op: p.Code, Jt: p.Jt, Jf: p.Jf, K: p.K}
		}
		insns, ok := bpf.Disassemble(raw)
		if !ok {
			f.Fatal("the filter does not disassemble")
		}
		if vms[k], err = bpf.NewVM(insns); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, allow bool, nr uint32, a0, a1, a2, a3 uint64) {
		network := NetworkDeny
		if allow {
			network = NetworkAllow
		}
		args := [6]uint64{a0, a1, a2, a3}
		for _, guard := range []uint32{0, supervisor} {
			for _, arch := range []uint32{auditArch[runtime.GOARCH], unix.AUDIT_ARCH_I386} {
				// struct seccomp_data, each 32-bit word big-endian for the
				// interpreter (the kernel loads them in the machine's order).
				in := make([]byte, 64)
				binary.BigEndian.PutUint32(in[0:], nr)
				binary.BigEndian.PutUint32(in[4:], arch)
				for i, a := range args {
					binary.BigEndian.PutUint32(in[16+8*i:], uint32(a))
					binary.BigEndian.PutUint32(in[16+8*i+4:], uint32(a>>32))
				}
				got, err := vms[key{network, guard}].Run(in)
				if err != nil {
					t.Fatal(err)
				}
				if want := decide(network, guard, arch, nr, args); uint32(got) != want {
					t.Errorf("%s, supervisor %d: arch %#x nr %d args %#x: filter %#x, want %#x", network, guard, arch, nr, args, uint32(got), want)
				}
			}
		}
	})
}
