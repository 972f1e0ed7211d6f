package autonomy

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Validate checks cfg exactly as New does, with the same errors, but without
// touching the file system: the workspace root lives on the gateway, so here
// it only has to be an absolute path without NUL bytes. The controller and
// the CLI use it to reject a policy before any gateway sees it.
func Validate(cfg Config) error {
	needRoot := cfg.WorkspaceOnly || len(cfg.ForbiddenPathGlobs) > 0 || cfg.AllowShell
	if cfg.WorkspaceRoot != "" || needRoot {
		switch {
		case cfg.WorkspaceRoot == "":
			return fmt.Errorf("%w: workspace root is required for workspace-only, forbidden paths or shell", ErrInvalidPath)
		case strings.IndexByte(cfg.WorkspaceRoot, 0) >= 0:
			return fmt.Errorf("%w: workspace root contains a NUL byte", ErrInvalidPath)
		case !filepath.IsAbs(cfg.WorkspaceRoot):
			return fmt.Errorf("%w: workspace root %q is not an absolute path", ErrInvalidPath, cfg.WorkspaceRoot)
		}
		// Every other check is New's own; "/" exists on every machine.
		cfg.WorkspaceRoot = "/"
	}
	_, err := New(cfg)
	return err
}
