package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h): uid 0 gains no capabilities from
// execve, changing uids never adjusts capabilities, no ambient capability
// can be raised, and each of these is locked so that no descendant can
// undo it.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7

	lockedSecurebits = secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
)

// dropPrivileges leaves the calling thread (capabilities, the bounding set
// and securebits are per thread) with no capability in any set, an empty
// bounding set, locked securebits that make uid 0 an ordinary user for
// execve, and no_new_privs: a program it starts holds no capability and
// can gain none, whatever user the gateway runs as. The bounding set and
// securebits need CAP_SETPCAP; a thread without it holds no capability
// and, unless it is uid 0, gains none from execve either, which is then
// all that is needed.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: capget: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return fmt.Errorf("sandbox: dropping capability %d from the bounding set: %w", c, err)
			}
		}
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0); err != nil {
			return fmt.Errorf("sandbox: securebits: %w", err)
		}
	} else if unix.Geteuid() == 0 {
		// Without CAP_SETPCAP, uid 0 regains from execve what is left in
		// the bounding set (a container's capabilities dropped, it is empty).
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 1 {
				return fmt.Errorf("sandbox: uid 0 without CAP_SETPCAP keeps capability %d in its bounding set; "+
					"programs would regain it", c)
			}
		}
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	return nil
}
