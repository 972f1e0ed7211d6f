package pathguard

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// MaxMemoEntries bounds how many lookups one Memo keeps; later lookups of a
// call go to the file system every time.
const MaxMemoEntries = 256

// Memo remembers the file system lookups (Lstat, and Readlink for symlinks)
// made while resolving paths for ONE tool call's decision, so that the hooks
// deciding that call (Autonomy and ContractScope both resolve the same
// arguments) look each path component up once. It must never outlive the
// decision: a symlink can be retargeted between two calls, and a lookup
// remembered across calls would let a later call be decided on a stale
// file system. Within one decision it makes every hook see the same file
// system state. Lookup errors other than "does not exist" are not
// remembered. The zero Memo is empty and ready; it is safe for concurrent
// use.
type Memo struct {
	// real makes every lookup answer "exists, not a symlink" (see WithRealPaths).
	real bool

	mu      sync.Mutex
	entries []memoEntry
	first   [8]memoEntry // the first entries, allocated with the Memo
}

// lookupKind is what a lookup found.
type lookupKind uint8

const (
	kindOther   lookupKind = iota // exists and is not a symlink
	kindMissing                   // does not exist (ENOENT, not ENOTDIR)
	kindSymlink                   // a symlink; target holds its target
)

type memoEntry struct {
	path   string
	target string
	kind   lookupKind
}

// lookup returns what path is: an existing non-symlink, a missing name or a
// symlink with its target. Any other failure is returned as an error. m may
// be nil (no memo).
func (m *Memo) lookup(path string) (lookupKind, string, error) {
	if m != nil && m.real {
		return kindOther, "", nil
	}
	if m != nil {
		m.mu.Lock()
		for i := range m.entries {
			if e := &m.entries[i]; e.path == path {
				kind, target := e.kind, e.target
				m.mu.Unlock()
				return kind, target, nil
			}
		}
		m.mu.Unlock()
	}
	kind, target, err := lookupFS(path)
	if err != nil || m == nil {
		return kind, target, err
	}
	m.mu.Lock()
	if len(m.entries) < MaxMemoEntries {
		if m.entries == nil {
			m.entries = m.first[:0]
		}
		m.entries = append(m.entries, memoEntry{path: path, target: target, kind: kind})
	}
	m.mu.Unlock()
	return kind, target, nil
}

// lookupFS asks the file system what path is.
func lookupFS(path string) (lookupKind, string, error) {
	symlink, err := lstatSymlink(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return kindMissing, "", nil
		}
		return 0, "", err
	}
	if !symlink {
		return kindOther, "", nil
	}
	target, err := os.Readlink(path)
	if err != nil {
		return 0, "", err
	}
	return kindSymlink, target, nil
}

// Len returns how many lookups m holds.
func (m *Memo) Len() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

type memoKey struct{}

// memoContext carries a Memo; one allocation holds both.
type memoContext struct {
	context.Context
	memo Memo
}

func (c *memoContext) Value(key any) any {
	if key == (memoKey{}) {
		return &c.memo
	}
	return c.Context.Value(key)
}

// WithMemo returns a context carrying a new, empty Memo for one tool call's
// decision. The executor calls it once per before phase; hooks get the memo
// with MemoFrom.
func WithMemo(ctx context.Context) context.Context {
	return &memoContext{Context: ctx}
}

// MemoFrom returns the Memo ctx carries, or nil (resolution then looks
// every component up).
func MemoFrom(ctx context.Context) *Memo {
	m, _ := ctx.Value(memoKey{}).(*Memo)
	return m
}

type realPathsKey struct{}

// realPaths is the Memo of every context from WithRealPaths.
var realPaths = &Memo{real: true}

// WithRealPaths returns a context telling the runtime checks that every
// path they are asked about is real: absolute, clean, and without a
// symbolic link among its components (its caller walked the tree without
// following any), so that resolving it needs no lookups. Only for a
// caller that does not act on the path by name afterwards.
func WithRealPaths(ctx context.Context) context.Context {
	return context.WithValue(ctx, realPathsKey{}, realPaths)
}

// RealPathsMemo returns the Memo that resolves the paths of a context from
// WithRealPaths without lookups, or nil.
func RealPathsMemo(ctx context.Context) *Memo {
	m, _ := ctx.Value(realPathsKey{}).(*Memo)
	return m
}
