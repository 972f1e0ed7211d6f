package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// readFile: {path}. Returns the file's text; refuses directories, files over
// MaxReadBytes and content that is not UTF-8 text.
func (w *Workspace) readFile(ctx context.Context, m map[string]any) (string, error) {
	return result(w.doReadFile(ctx, m))
}

func (w *Workspace) doReadFile(ctx context.Context, m map[string]any) (string, error) {
	a, err := newArgs(ReadFile, m, "path")
	if err != nil {
		return "", err
	}
	p, _, err := w.path(a, "path", true)
	if err != nil {
		return "", err
	}
	g, err := w.begin(ctx)
	if err != nil {
		return "", err
	}
	data, err := w.readBeneath(ctx, g, ReadFile, p, w.opts.MaxReadBytes)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(data) {
		return "", userErrorf("%s: %s is not UTF-8 text", ReadFile, w.display(p))
	}
	return string(data), nil
}

// readBeneath reads the regular file p of at most max bytes.
func (w *Workspace) readBeneath(ctx context.Context, g *hooks.Guard, tool, p string, max int64) ([]byte, error) {
	f, err := w.openChecked(ctx, g, p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fsError(tool, w.display(p), err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, fsError(tool, w.display(p), err)
	}
	if st.IsDir() {
		return nil, userErrorf("%s: %s is a directory (use %s)", tool, w.display(p), ListDir)
	}
	if !st.Mode().IsRegular() {
		return nil, userErrorf("%s: %s is not a regular file", tool, w.display(p))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fsError(tool, w.display(p), err)
	}
	if int64(len(data)) > max {
		return nil, userErrorf("%s: %s is larger than the %d-byte limit", tool, w.display(p), max)
	}
	return data, nil
}

// writeFile: {path, content}. Creates or replaces the file (and missing
// parent directories), atomically by renaming a temporary file.
func (w *Workspace) writeFile(ctx context.Context, m map[string]any) (string, error) {
	return result(w.doWriteFile(ctx, m))
}

func (w *Workspace) doWriteFile(ctx context.Context, m map[string]any) (string, error) {
	a, err := newArgs(WriteFile, m, "path", "content")
	if err != nil {
		return "", err
	}
	p, _, err := w.path(a, "path", true)
	if err != nil {
		return "", err
	}
	content, _, err := a.str("content", true, true)
	if err != nil {
		return "", err
	}
	if len(content) > w.opts.MaxWriteBytes {
		return "", userErrorf("%s: content is larger than the %d-byte limit", WriteFile, w.opts.MaxWriteBytes)
	}
	g, err := w.begin(ctx)
	if err != nil {
		return "", err
	}
	if err := g.Open(ctx, p, true); err != nil {
		return "", err
	}
	if err := w.mkdirBeneath(filepath.Dir(p), 0o755); err != nil {
		return "", fsError(WriteFile, w.display(filepath.Dir(p)), err)
	}
	if err := w.writeAtomic(ctx, g, WriteFile, p, []byte(content)); err != nil {
		return "", err
	}
	return fmt.Sprintf("Wrote %d bytes to %s", len(content), w.display(p)), nil
}

// editFile: {path, old_string, new_string}. Replaces the one occurrence of
// old_string; zero or several occurrences are an error.
func (w *Workspace) editFile(ctx context.Context, m map[string]any) (string, error) {
	return result(w.doEditFile(ctx, m))
}

func (w *Workspace) doEditFile(ctx context.Context, m map[string]any) (string, error) {
	a, err := newArgs(EditFile, m, "path", "old_string", "new_string")
	if err != nil {
		return "", err
	}
	p, _, err := w.path(a, "path", true)
	if err != nil {
		return "", err
	}
	oldS, _, err := a.str("old_string", true, false)
	if err != nil {
		return "", err
	}
	newS, _, err := a.str("new_string", true, true)
	if err != nil {
		return "", err
	}
	g, err := w.begin(ctx)
	if err != nil {
		return "", err
	}
	if err := g.Open(ctx, p, true); err != nil {
		return "", err
	}
	data, err := w.readBeneath(ctx, g, EditFile, p, int64(w.opts.MaxWriteBytes))
	if err != nil {
		return "", err
	}
	text := string(data)
	switch n := strings.Count(text, oldS); n {
	case 1:
	case 0:
		return "", userErrorf("%s: old_string does not occur in %s", EditFile, w.display(p))
	default:
		return "", userErrorf("%s: old_string occurs %d times in %s; include more context so it matches exactly once", EditFile, n, w.display(p))
	}
	text = strings.Replace(text, oldS, newS, 1)
	if len(text) > w.opts.MaxWriteBytes {
		return "", userErrorf("%s: the edited file would be larger than the %d-byte limit", EditFile, w.opts.MaxWriteBytes)
	}
	if err := w.writeAtomic(ctx, g, EditFile, p, []byte(text)); err != nil {
		return "", err
	}
	return "Edited " + w.display(p), nil
}

// listDir: {path?}. Lists a directory (default the workspace root), one entry
// a line, directories with a trailing "/", symlinks with " -> target".
func (w *Workspace) listDir(ctx context.Context, m map[string]any) (string, error) {
	return result(w.doListDir(ctx, m))
}

func (w *Workspace) doListDir(ctx context.Context, m map[string]any) (string, error) {
	a, err := newArgs(ListDir, m, "path")
	if err != nil {
		return "", err
	}
	p, ok, err := w.path(a, "path", false)
	if err != nil {
		return "", err
	}
	if !ok {
		p = w.res.Real
	}
	g, err := w.begin(ctx)
	if err != nil {
		return "", err
	}
	f, err := w.openChecked(ctx, g, p, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return "", userErrorf("%s: %s is not a directory", ListDir, w.display(p))
		}
		return "", fsError(ListDir, w.display(p), err)
	}
	defer func() { _ = f.Close() }()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return "", fsError(ListDir, w.display(p), err)
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b strings.Builder
	for i, e := range ents {
		if i == w.opts.MaxListEntries {
			fmt.Fprintf(&b, "[%d more entries not shown]\n", len(ents)-i)
			break
		}
		b.WriteString(e.Name())
		switch {
		case e.IsDir():
			b.WriteByte('/')
		case e.Type()&os.ModeSymlink != 0:
			if t, err := readlinkat(f, e.Name()); err == nil {
				b.WriteString(" -> " + t)
			}
		}
		b.WriteByte('\n')
	}
	if len(ents) == 0 {
		return fmt.Sprintf("%s is empty", w.display(p)), nil
	}
	return b.String(), nil
}

// readlinkat reads the symlink name in the directory dir.
func readlinkat(dir *os.File, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// writeAtomic replaces p's content through a temporary file in its
// directory, keeping p's permissions when it exists. The directory is opened
// beneath the workspace and checked by its real path; the temporary file is
// created and renamed relative to that descriptor, so neither step follows a
// symlink that appears after the check.
func (w *Workspace) writeAtomic(ctx context.Context, g *hooks.Guard, tool, p string, data []byte) (err error) {
	dirPath, base := filepath.Dir(p), filepath.Base(p)
	dir, err := w.openChecked(ctx, g, dirPath, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fsError(tool, w.display(dirPath), err)
	}
	defer func() { _ = dir.Close() }()
	realDir, err := fdPath(dir)
	if err != nil {
		return fmt.Errorf("%s: locating %s: %w", tool, dirPath, err)
	}
	if err := g.Open(ctx, filepath.Join(realDir, base), true); err != nil {
		return err
	}
	dfd := int(dir.Fd())
	mode := uint32(0o644)
	var st unix.Stat_t
	switch err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return userErrorf("%s: %s is a directory", tool, w.display(p))
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		mode = st.Mode & 0o7777
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + base + ".toolhooks-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fsError(tool, w.display(p), &os.PathError{Op: "create", Path: tmp, Err: err})
	}
	f := os.NewFile(uintptr(fd), tmp)
	defer func() {
		if err != nil {
			_ = unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return fsError(tool, w.display(p), err)
	}
	if err = f.Chmod(os.FileMode(mode)); err != nil {
		_ = f.Close()
		return fsError(tool, w.display(p), err)
	}
	if err = f.Close(); err != nil {
		return fsError(tool, w.display(p), err)
	}
	if err = unix.Renameat(dfd, tmp, dfd, base); err != nil {
		return fsError(tool, w.display(p), &os.PathError{Op: "rename", Path: p, Err: err})
	}
	return nil
}
