//go:build unix

package pathguard

import (
	"errors"
	"io/fs"
	"syscall"
)

// lstatSymlink reports whether path is a symlink, without following it. It
// is os.Lstat (same system call, EINTR retried, a *fs.PathError on failure)
// without allocating a FileInfo, and an error only when the lookup fails.
func lstatSymlink(path string) (bool, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(path, &st)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return false, &fs.PathError{Op: "lstat", Path: path, Err: err}
		}
		return st.Mode&syscall.S_IFMT == syscall.S_IFLNK, nil
	}
}
