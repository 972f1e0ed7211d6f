package pathguard

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrTooManyEntries is returned by WalkTree for a tree of more entries than
// its bound.
var ErrTooManyEntries = errors.New("too many entries")

// WalkTree visits the entries beneath the directory top as a recursive
// reader that follows links (grep -R, find -L) reaches them: at most max
// entries, and the trees of the directories its symlinks name, each once.
// For a symlink, link returns the real directory to descend into ("" for
// none) or an error that ends the walk; entry sees every other entry and may
// end the walk with an error. With skipGit, directories named .git are not
// entered. Unreadable entries are skipped: the reader does not read them
// either.
func WalkTree(top string, max int, skipGit bool, link func(p string) (string, error), entry func(p string) error) error {
	seen := map[string]bool{}
	n := 0
	var walk func(dir string) error
	walk = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		var linked []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return nil //nolint:nilerr // unreadable entries are not read by the command either
			}
			if n++; n > max {
				return ErrTooManyEntries
			}
			switch {
			case skipGit && d.IsDir() && d.Name() == ".git":
				return fs.SkipDir
			case d.Type()&fs.ModeSymlink != 0:
				real, err := link(p)
				if real != "" {
					linked = append(linked, real)
				}
				return err
			}
			return entry(p)
		})
		if err != nil {
			return err
		}
		for _, l := range linked {
			if err := walk(l); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(top)
}

// IsDir reports whether p names a directory, following symlinks.
func IsDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// RepoRoot is the git repository a command run in base reads: the nearest
// directory at or above base with a .git entry, not above root (the
// workspace); else root, or base when base is outside root.
func RepoRoot(base, root string) string {
	for d := base; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == root || filepath.Dir(d) == d {
			break
		}
	}
	if base == root || strings.HasPrefix(base, strings.TrimSuffix(root, "/")+"/") {
		return root
	}
	return base
}
