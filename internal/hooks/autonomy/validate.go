package autonomy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// placeholderRoot stands in for the gateway's workspace while validating: the
// patterns anchored at the root are checked against it, as text only.
const placeholderRoot = "/workspace"

// Validate checks cfg as New does, with the same errors, without touching
// the file system: the workspace is the gateway's, so a root given here only
// has to be an absolute path without NUL bytes, and none is required. The
// controller and the CLI use it to reject a policy before any gateway sees it.
func Validate(cfg Config) error {
	h := &Hook{root: placeholderRoot, real: placeholderRoot}
	if cfg.WorkspaceRoot != "" {
		if err := checkRoot(cfg.WorkspaceRoot); err != nil {
			return err
		}
		h.root, h.real = filepath.Clean(cfg.WorkspaceRoot), filepath.Clean(cfg.WorkspaceRoot)
	}
	return h.compile(cfg)
}

// Build returns the hook of an AutonomyPolicy entry named name on a gateway:
// the policy's spec with the gateway's tool traits added to its pathArgs and
// readOnlyTools, rooted at the gateway's workspace. A spec that names a
// workspace root other than the gateway's is an error (hooks.ErrInvalidPath):
// the two would resolve relative paths differently.
func Build(name string, spec Config, env hooks.BuildEnv) (*Hook, error) {
	cfg := spec
	cfg.Name = name
	if env.Workspace != "" {
		if cfg.WorkspaceRoot != "" && !sameDir(cfg.WorkspaceRoot, env.Workspace) {
			return nil, fmt.Errorf("%w: the policy's workspace root %s is not this gateway's workspace %s",
				hooks.ErrInvalidPath, cfg.WorkspaceRoot, env.Workspace)
		}
		cfg.WorkspaceRoot = env.Workspace
	}
	if t := env.Traits; len(t.ReadOnlyTools) > 0 {
		cfg.ReadOnlyTools = append(slices.Clip(cfg.ReadOnlyTools), t.ReadOnlyTools...)
	}
	if t := env.Traits; len(t.PathArgs) > 0 {
		merged := make(map[string][]string, len(cfg.PathArgs)+len(t.PathArgs))
		for tool, keys := range cfg.PathArgs {
			merged[tool] = slices.Clone(keys)
		}
		for tool, keys := range t.PathArgs {
			merged[tool] = append(merged[tool], keys...)
		}
		cfg.PathArgs = merged
	}
	return New(cfg)
}

// sameDir reports whether a and b name the same directory: the same clean
// path, or the same file once symlinks are resolved.
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}

// outrightRules are the rules a tool's name alone decides.
var outrightRules = []string{RuleToolDeny, RuleToolAllow, RuleReadOnly, RuleShellDisabled}

// DeniesOutright returns the denial every call of call.Tool by call's
// caller gets whatever its arguments: one of the tool-name rules (toolDeny,
// toolAllow, readOnly, shellDisabled), for a call the subjects bind.
func (h *Hook) DeniesOutright(call *hooks.Call) (hooks.Verdict, bool) {
	c := *call
	c.Args, c.ArgsJSON, c.ArgsErr = map[string]any{}, "", nil
	v, err := h.Before(context.Background(), &c)
	if err != nil || v.Allowed || !slices.Contains(outrightRules, v.Rule) {
		return hooks.Verdict{}, false
	}
	return v, true
}

// ToolNames returns the exact tool names (not globs) the configuration names.
func (h *Hook) ToolNames() []string { return h.names }
