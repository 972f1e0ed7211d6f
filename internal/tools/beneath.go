package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// opOpen names the operation in the path errors of the file tools.
const opOpen = "open"

// The tools reach files only through the workspace root's descriptor:
// every open is an openat2 with RESOLVE_BENEATH (no "..", absolute path or
// symlink may lead out of the workspace, checked by the kernel during the
// lookup itself, so a symlink swapped after a check cannot redirect it) and
// RESOLVE_NO_MAGICLINKS (no /proc/*/fd-style links). /dev, /proc and the
// gateway's own files are therefore unreachable; the shell's redirections
// alone may use /dev/null (and read /dev/zero and /dev/urandom).

// errOutside is the error of a path that lies outside the workspace.
var errOutside = errors.New("outside the workspace")

// rel returns abs relative to the workspace root, or errOutside.
func (w *Workspace) rel(abs string) (string, error) {
	abs = filepath.Clean(abs)
	if abs == w.res.Real {
		return ".", nil
	}
	rest, ok := strings.CutPrefix(abs, w.res.Real)
	if !ok || (w.res.Real != "/" && !strings.HasPrefix(rest, "/")) {
		return "", &os.PathError{Op: opOpen, Path: abs, Err: errOutside}
	}
	return strings.TrimPrefix(rest, "/"), nil
}

// openBeneath opens abs, which must lie in the workspace, with openat2
// relative to the root descriptor.
func (w *Workspace) openBeneath(abs string, flag int, perm os.FileMode) (*os.File, error) {
	rel, err := w.rel(abs)
	if err != nil {
		return nil, err
	}
	how := unix.OpenHow{
		Flags:   uint64(flag) | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flag&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(perm.Perm())
	}
	for {
		fd, err := unix.Openat2(int(w.root.Fd()), rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			if err == unix.EXDEV {
				err = errOutside
			}
			return nil, &os.PathError{Op: opOpen, Path: abs, Err: err}
		}
		return os.NewFile(uintptr(fd), abs), nil
	}
}

// fdPath returns the path the kernel knows an open file by.
func fdPath(f *os.File) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}

// openChecked opens abs beneath the workspace for a tool, asking g before
// the open and again with the real path of what was opened (so a symlink
// swapped in between is caught), and truncating only after both checks.
func (w *Workspace) openChecked(ctx context.Context, g *hooks.Guard, abs string, flag int, perm os.FileMode) (*os.File, error) {
	write := flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0
	if err := g.Open(ctx, abs, write); err != nil {
		return nil, err
	}
	f, err := w.openBeneath(abs, flag&^os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	real, err := fdPath(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locating %s: %w", abs, err)
	}
	if real != abs {
		if err := g.Open(ctx, real, write); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	if flag&os.O_TRUNC != 0 {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			if err := f.Truncate(0); err != nil {
				_ = f.Close()
				return nil, err
			}
		}
	}
	return f, nil
}

// mkdirBeneath creates dir (in the workspace) and its missing parents.
func (w *Workspace) mkdirBeneath(dir string, perm os.FileMode) error {
	rel, err := w.rel(dir)
	if err != nil || rel == "." {
		return err
	}
	parent := "."
	for comp := range strings.SplitSeq(rel, "/") {
		pf, err := w.openBeneath(filepath.Join(w.res.Real, parent), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(pf.Fd()), comp, uint32(perm.Perm()))
		_ = pf.Close()
		if err != nil && err != unix.EEXIST {
			return &os.PathError{Op: "mkdir", Path: filepath.Join(w.res.Real, parent, comp), Err: err}
		}
		parent = filepath.Join(parent, comp)
	}
	return nil
}
