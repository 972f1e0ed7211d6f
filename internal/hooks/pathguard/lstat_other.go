//go:build !unix

package pathguard

import (
	"io/fs"
	"os"
)

// lstatSymlink reports whether path is a symlink, without following it.
func lstatSymlink(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, err
	}
	return fi.Mode()&fs.ModeSymlink != 0, nil
}
