package pathguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrIndexUnread is returned by IndexPaths for a repository whose index
// it does not read: none found, a .git file (a linked work tree or a
// submodule), an index split in two or sparse, an object format other
// than SHA-1, a submodule entry, or an index that does not parse. Callers
// fall back to reading the work tree.
var ErrIndexUnread = errors.New("git index not read")

// maxIndexEntries bounds the entries IndexPaths reads.
const maxIndexEntries = 1 << 20

// IndexPaths returns the repository a git command run in dir works on (the
// nearest directory at or above dir holding a .git directory) and the
// paths its index holds, relative to it: the files git diff compares with
// the work tree. A repository without an index file has none.
func IndexPaths(dir string) (repo string, paths []string, err error) {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(filepath.Join(d, ".git"))
		if err == nil {
			if !fi.IsDir() || !isGitDir(filepath.Join(d, ".git")) {
				// git would look further up, or follow a gitdir file.
				return "", nil, fmt.Errorf("%w: %s/.git is not a repository directory", ErrIndexUnread, d)
			}
			repo = d
			break
		}
		if filepath.Dir(d) == d {
			return "", nil, fmt.Errorf("%w: no repository at or above %s", ErrIndexUnread, dir)
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(repo, ".git", "config")); err == nil &&
		bytes.Contains(bytes.ToLower(cfg), []byte("objectformat")) {
		return "", nil, fmt.Errorf("%w: the repository names its object format", ErrIndexUnread)
	}
	data, err := os.ReadFile(filepath.Join(repo, ".git", "index"))
	if errors.Is(err, fs.ErrNotExist) {
		return repo, nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrIndexUnread, err)
	}
	paths, err = parseIndex(data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrIndexUnread, err)
	}
	return repo, paths, nil
}

// parseIndex returns the paths of a git index file (versions 2 to 4,
// SHA-1 object names).
func parseIndex(b []byte) ([]string, error) {
	const hashLen = 20
	if len(b) < 12+hashLen || string(b[:4]) != "DIRC" {
		return nil, errors.New("not an index file")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("index version %d", version)
	}
	n := binary.BigEndian.Uint32(b[8:12])
	if n > maxIndexEntries {
		return nil, fmt.Errorf("%d entries", n)
	}
	end := len(b) - hashLen
	off := 12
	paths := make([]string, 0, n)
	prev := ""
	for range n {
		start := off
		const fixed = 40 + hashLen + 2 // stat data, object name, flags
		if off+fixed > end {
			return nil, errors.New("truncated entry")
		}
		mode := binary.BigEndian.Uint32(b[off+24 : off+28])
		flags := binary.BigEndian.Uint16(b[off+40+hashLen : off+fixed])
		off += fixed
		if flags&0x4000 != 0 {
			if version < 3 {
				return nil, errors.New("extended flags in a version 2 index")
			}
			off += 2
			if off > end {
				return nil, errors.New("truncated entry")
			}
		}
		switch mode & 0o170000 {
		case 0o100000, 0o120000:
		default:
			// A submodule (its files are another repository's) or a
			// sparse directory.
			return nil, fmt.Errorf("entry of mode %o", mode)
		}
		var name string
		if version == 4 {
			strip, k := indexVarint(b[off:end])
			if k == 0 || strip > uint64(len(prev)) {
				return nil, errors.New("bad prefix length")
			}
			off += k
			i := bytes.IndexByte(b[off:end], 0)
			if i < 0 {
				return nil, errors.New("unterminated name")
			}
			name = prev[:len(prev)-int(strip)] + string(b[off:off+i])
			off += i + 1
		} else {
			i := bytes.IndexByte(b[off:end], 0)
			if i < 0 {
				return nil, errors.New("unterminated name")
			}
			name = string(b[off : off+i])
			// Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
			off = start + ((off - start + i + 8) &^ 7)
			if off > end {
				return nil, errors.New("truncated padding")
			}
		}
		if name == "" {
			return nil, errors.New("empty name")
		}
		paths = append(paths, name)
		prev = name
	}
	// Extensions: a split index keeps entries in another file, a sparse
	// one directories instead of their files.
	for off+8 <= end {
		sig := string(b[off : off+4])
		size := binary.BigEndian.Uint32(b[off+4 : off+8])
		if sig == "link" || sig == "sdir" {
			return nil, fmt.Errorf("index extension %q", sig)
		}
		if uint64(off)+8+uint64(size) > uint64(end) {
			return nil, errors.New("truncated extension")
		}
		off += 8 + int(size)
	}
	return paths, nil
}

// indexVarint reads git's offset varint; k is 0 when b holds none.
func indexVarint(b []byte) (v uint64, k int) {
	for k < len(b) && k < 10 {
		c := b[k]
		k++
		if k > 1 {
			v++
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, k
		}
	}
	return 0, 0
}

// isGitDir reports whether dir looks like a repository to git: a HEAD, an
// objects and a refs directory.
func isGitDir(dir string) bool {
	for _, n := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}
