package tools

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
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
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", fsError(ReadFile, w.display(p), err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return "", fsError(ReadFile, w.display(p), err)
	}
	if st.IsDir() {
		return "", userErrorf("%s: %s is a directory (use %s)", ReadFile, w.display(p), ListDir)
	}
	max := w.opts.MaxReadBytes
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", fsError(ReadFile, w.display(p), err)
	}
	if int64(len(data)) > max {
		return "", userErrorf("%s: %s is larger than the %d-byte limit", ReadFile, w.display(p), max)
	}
	if !utf8.Valid(data) {
		return "", userErrorf("%s: %s is not UTF-8 text", ReadFile, w.display(p))
	}
	return string(data), nil
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
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return "", userErrorf("%s: %s is a directory", WriteFile, w.display(p))
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fsError(WriteFile, w.display(filepath.Dir(p)), err)
	}
	if err := writeAtomic(p, []byte(content)); err != nil {
		return "", fsError(WriteFile, w.display(p), err)
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
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fsError(EditFile, w.display(p), err)
	}
	if st.IsDir() {
		return "", userErrorf("%s: %s is a directory", EditFile, w.display(p))
	}
	if st.Size() > int64(w.opts.MaxWriteBytes) {
		return "", userErrorf("%s: %s is larger than the %d-byte limit", EditFile, w.display(p), w.opts.MaxWriteBytes)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fsError(EditFile, w.display(p), err)
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
	if err := writeAtomic(p, []byte(text)); err != nil {
		return "", fsError(EditFile, w.display(p), err)
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
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return "", fsError(ListDir, w.display(p), err)
	}
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
			if t, err := os.Readlink(filepath.Join(p, e.Name())); err == nil {
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

// writeAtomic replaces p's content through a temporary file in its directory,
// keeping p's permissions when it exists.
func writeAtomic(p string, data []byte) (err error) {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(p); err == nil {
		mode = st.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".toolhooks-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}
