// Package pathguard resolves the paths a tool call names to real absolute
// paths, relative to a workspace root and with symlinks followed segment by
// segment, and extracts every path-bearing argument from a call. It is the one
// place where the Autonomy and ContractScope hooks interpret paths, so both
// decide on the same real path.
package pathguard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// MaxSymlinkHops bounds how many symlinks one resolution may follow; more
// means a cycle (or an attack) and resolution fails.
const MaxSymlinkHops = 40

// Errors returned by Resolve, for errors.Is.
var (
	// ErrEmptyPath is returned for an empty path.
	ErrEmptyPath = errors.New("empty path")
	// ErrNUL is returned for a path containing a NUL byte.
	ErrNUL = errors.New("path contains a NUL byte")
	// ErrTooManySymlinks is returned when resolution follows more than MaxSymlinkHops links.
	ErrTooManySymlinks = errors.New("too many symlinks")
	// ErrUserHome is returned for "~user" forms, which are not supported.
	ErrUserHome = errors.New("~user home directories are not supported")
	// ErrProcessPath is returned for a path that goes through a process's
	// own directory in /proc (/proc/self, /proc/thread-self, /proc/<pid>,
	// and so /dev/stdout, /dev/fd/N and links to them): what it names
	// depends on the process that opens it (its descriptors, its root,
	// its working directory), not on the file system.
	ErrProcessPath = errors.New("path names a process's descriptors or state")
)

// Resolver resolves paths against a workspace root. It is safe for
// concurrent use and never consults the process working directory.
type Resolver struct {
	// Root is the absolute, cleaned workspace root as configured.
	Root string
	// Real is the root's own real path (symlinks resolved).
	Real string
	// CaseInsensitive is true when the root's file system was detected to
	// compare names case-insensitively; Within and glob checks then fold case.
	CaseInsensitive bool
}

// NewResolver returns a Resolver for the workspace root, which must be an
// absolute path to an existing, readable directory.
func NewResolver(root string) (*Resolver, error) {
	switch {
	case root == "":
		return nil, fmt.Errorf("workspace root %q: %w", root, ErrEmptyPath)
	case strings.IndexByte(root, 0) >= 0:
		return nil, fmt.Errorf("workspace root %q: %w", root, ErrNUL)
	case !filepath.IsAbs(root):
		return nil, fmt.Errorf("workspace root %q: must be an absolute path", root)
	}
	root = filepath.Clean(root)
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("workspace root %q: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace root %q: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace root %q: not a directory", root)
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, fmt.Errorf("workspace root %q: %w", root, err)
	}
	names, err := f.Readdirnames(64)
	_ = f.Close() // read-only directory handle: a Close error cannot lose data
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("workspace root %q: %w", root, err)
	}
	return &Resolver{Root: root, Real: real, CaseInsensitive: probeCaseInsensitive(real, names)}, nil
}

// probeCaseInsensitive reports whether the file system holding dir treats
// names case-insensitively: it looks up a case-swapped spelling of dir itself
// (or of one of its entries) and checks it names the same file. It writes
// nothing. When no name contains a letter it assumes case-sensitive.
func probeCaseInsensitive(dir string, names []string) bool {
	try := func(p string) (bool, bool) {
		swapped := swapLastCase(p)
		if swapped == p {
			return false, false
		}
		a, err1 := os.Lstat(p)
		b, err2 := os.Lstat(swapped)
		if err1 != nil {
			return false, false
		}
		return err2 == nil && os.SameFile(a, b), true
	}
	for _, n := range names {
		if ci, ok := try(filepath.Join(dir, n)); ok {
			return ci
		}
	}
	if ci, ok := try(dir); ok {
		return ci
	}
	return false
}

// swapLastCase swaps the case of the letters in the last path element of p
// that has any letters.
func swapLastCase(p string) string {
	base := filepath.Base(p)
	dir := p[:len(p)-len(base)]
	var b strings.Builder
	for _, r := range base {
		switch {
		case unicode.IsUpper(r):
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsLower(r):
			b.WriteRune(unicode.ToUpper(r))
		default:
			b.WriteRune(r)
		}
	}
	return dir + b.String()
}

// Resolve returns the real absolute path p names. "~" and "~/x" expand to
// the user's home; relative paths are joined to the workspace root (never the
// process directory). See ResolveFromMemo.
func (r *Resolver) Resolve(p string) (string, error) {
	return r.ResolveFromMemo(nil, r.Real, p)
}

// ResolveMemo is Resolve with the lookups remembered in m (see Memo).
func (r *Resolver) ResolveMemo(m *Memo, p string) (string, error) {
	return r.ResolveFromMemo(m, r.Real, p)
}

// ResolveFromMemo is Resolve with relative paths joined to base (an absolute
// directory, normally itself a result of Resolve) instead of the workspace,
// and the lookups remembered in m, which must belong to the current call's
// decision (see Memo); nil means none.
//
// Components are walked left to right: ".." moves to the parent of the real
// path reached so far, every other component is joined and Lstat'ed, and a
// symlink's target is spliced in before going on (at most MaxSymlinkHops
// links). A component that does not exist, and everything after it, is kept
// lexically; a ".." that climbs back into existing directories resumes
// symlink resolution. Any other lookup error (permission denied, not a
// directory, name too long) fails, so callers deny.
func (r *Resolver) ResolveFromMemo(m *Memo, base, p string) (string, error) {
	if p == "" {
		return "", ErrEmptyPath
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%q: %w", p, ErrNUL)
	}
	if p[0] == '~' {
		rest := p[1:]
		if rest != "" && rest[0] != '/' {
			return "", fmt.Errorf("%q: %w", p, ErrUserHome)
		}
		home, err := os.UserHomeDir()
		if err != nil || !filepath.IsAbs(home) {
			return "", fmt.Errorf("%q: cannot expand ~: home directory unknown", p)
		}
		p = home + rest
	}
	if !filepath.IsAbs(p) {
		if base == "" || !filepath.IsAbs(base) {
			return "", fmt.Errorf("%q: relative path without an absolute base", p)
		}
		p = base + string(filepath.Separator) + p
	}
	// The workspace root's own components were resolved once, by NewResolver:
	// a path under the root's real path is walked from there, not from "/".
	if r.Real != "" && r.Real != "/" && len(p) > len(r.Real) && p[len(r.Real)] == '/' && p[:len(r.Real)] == r.Real {
		return walkFrom(m, r.Real, p[len(r.Real)+1:], p)
	}
	return walkFrom(m, "/", p, p)
}

// walkFrom resolves rest component by component, starting at start (a real
// path of an existing directory, or "/"); orig is the path named in errors.
func walkFrom(m *Memo, start, rest, orig string) (string, error) {
	cur := start
	missing := 0 // how many trailing components of cur do not exist
	hops := 0
	for rest != "" {
		var c string
		c, rest = nextComponent(rest)
		switch c {
		case "", ".":
			continue
		case "..":
			if missing > 0 {
				missing--
			}
			cur = filepath.Dir(cur)
			continue
		}
		if cur == "/proc" && missing == 0 && isProcessDir(c) {
			return "", fmt.Errorf("resolving %q at %q: %w", orig, "/proc/"+c, ErrProcessPath)
		}
		next := join(orig, cur, c)
		if missing > 0 {
			cur, missing = next, missing+1
			continue
		}
		kind, target, err := m.lookup(next)
		if err != nil {
			return "", fmt.Errorf("resolving %q at %q: %w", orig, next, err)
		}
		switch kind {
		case kindMissing:
			cur, missing = next, 1
			continue
		case kindOther:
			cur = next
			continue
		}
		hops++
		if hops > MaxSymlinkHops {
			return "", fmt.Errorf("resolving %q: %w (more than %d)", orig, ErrTooManySymlinks, MaxSymlinkHops)
		}
		if target == "" {
			return "", fmt.Errorf("resolving %q: symlink %q has an empty target", orig, next)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		if rest == "" {
			rest = target
		} else {
			rest = target + "/" + rest
		}
	}
	return cur, nil
}

// isProcessDir reports whether the /proc entry c is a process's directory:
// self, thread-self or a process id.
func isProcessDir(c string) bool {
	if c == "self" || c == "thread-self" {
		return true
	}
	return c != "" && strings.Trim(c, "0123456789") == ""
}

// join returns cur + "/" + c ("/" + c when cur is "/"). When orig starts
// with exactly that text, as it does while a walk goes down the path as
// written, it returns that prefix of orig rather than a new string.
func join(orig, cur, c string) string {
	if cur == "/" {
		if n := 1 + len(c); len(orig) >= n && orig[0] == '/' && orig[1:n] == c {
			return orig[:n]
		}
		return "/" + c
	}
	if n := len(cur) + 1 + len(c); len(orig) >= n && orig[len(cur)] == '/' && orig[:len(cur)] == cur && orig[len(cur)+1:n] == c {
		return orig[:n]
	}
	return cur + "/" + c
}

// nextComponent splits off the first slash-separated component of p.
func nextComponent(p string) (string, string) {
	first, rest, _ := strings.Cut(p, "/")
	return first, rest
}

// Within reports whether path equals dir or lies under it, comparing whole
// components (so /work/ab is not within /work/a). Both are cleaned first; it
// does no file system access, so pass real paths (from Resolve). It compares
// bytes exactly; use Resolver.Within on case-insensitive file systems.
func Within(path, dir string) bool {
	return within(Clean(path), Clean(dir))
}

// Clean is filepath.Clean, returning an absolute path that is already clean
// (as Resolve's results and the workspace root are) after one cheap scan.
func Clean(p string) string {
	if isCleanAbs(p) {
		return p
	}
	return filepath.Clean(p)
}

// isCleanAbs reports whether p is an absolute path equal to its
// filepath.Clean: "/" or a path starting with "/" that has no empty, "." or
// ".." component and no trailing slash.
func isCleanAbs(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	if p[len(p)-1] != '/' && !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return true // no empty component, and none starting with a dot
	}
	start := 1 // start of the current component
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch p[start:i] {
		case "", ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}

func within(path, dir string) bool {
	if path == dir {
		return true
	}
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return len(path) > len(dir) && path[len(dir)] == '/' && path[:len(dir)] == dir
}

// Within reports whether the real path lies in the workspace (its real root),
// folding case when the workspace's file system is case-insensitive.
func (r *Resolver) Within(path string) bool {
	return r.WithinDir(path, r.Real)
}

// WithinDir is Within for any dir, folding case when the workspace's file
// system is case-insensitive (a conservative choice: folding can only widen
// what counts as forbidden, and widens "inside" only to names the file
// system itself treats as equal).
func (r *Resolver) WithinDir(path, dir string) bool {
	path, dir = Clean(path), Clean(dir)
	if r.CaseInsensitive {
		path, dir = strings.ToLower(path), strings.ToLower(dir)
	}
	return within(path, dir)
}
