package contract

import (
	"fmt"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// checkScope applies rules 3 to 6 of ContractScope to call.
func (h *ContractScope) checkScope(m *pathguard.Memo, call *hooks.Call, c *Contract) hooks.Verdict {
	class := classify(call.Tool)
	g := c.grantFor(call.Tool)
	topScoped := len(c.AllowedPaths) > 0 && class != classOther

	if class != classOther && !g.has {
		if c.capScoped() {
			return hooks.Deny(RuleScopedCapabilities, fmt.Sprintf(
				"The contract for session %q is scoped to its capabilities and grants no capability for tool %q",
				call.SessionID, call.Tool))
		}
		if topScoped && class == classShell {
			return hooks.Deny(RuleScopedCapabilities, fmt.Sprintf(
				"The contract for session %q restricts paths; tool %q needs an explicit capability",
				call.SessionID, call.Tool))
		}
	}
	capPaths := g.has && !g.unrestricted
	if !capPaths && !topScoped {
		return hooks.Allow
	}
	if call.ArgsErr != nil {
		return hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
			"The arguments of tool %q are not one JSON object, so its paths cannot be checked against the contract", call.Tool))
	}
	if h.paths == nil {
		return hooks.Deny(RuleAllowedPaths, fmt.Sprintf(
			"The contract restricts the paths of tool %q but the hook has no workspace root to resolve them against", call.Tool))
	}
	paths, err := h.callPaths(m, call)
	if err != nil {
		return hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
			"The paths of tool %q cannot be checked against the contract: %v", call.Tool, err))
	}
	if len(paths) == 0 {
		// code_exec granted without paths and only top-level prefixes: the
		// explicit grant is the operator's decision; nothing to check.
		if !capPaths && class == classShell && !strings.EqualFold(call.Tool, "shell") {
			return hooks.Allow
		}
		rule := RuleAllowedPaths
		if capPaths {
			rule = RuleScopedCapabilities
		}
		return hooks.Deny(rule, fmt.Sprintf(
			"The contract confines tool %q to allowed paths but no path could be extracted from the call", call.Tool))
	}
	for _, p := range paths {
		real, err := h.paths.ResolveFromMemo(m, p.base, p.path)
		if err != nil {
			return hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
				"Path %q of tool %q cannot be resolved: %v", p.path, call.Tool, err))
		}
		if capPaths {
			if ok, err := h.under(real, g.paths); !ok {
				return h.outside(RuleScopedCapabilities, "capability's allowed paths", call, p.path, real, g.paths, err)
			}
		}
		if topScoped {
			if ok, err := h.under(real, c.AllowedPaths); !ok {
				return h.outside(RuleAllowedPaths, "contract's allowed paths", call, p.path, real, c.AllowedPaths, err)
			}
		}
	}
	return hooks.Allow
}

func (h *ContractScope) outside(rule, what string, call *hooks.Call, raw, real string, allowed []string, err error) hooks.Verdict {
	reason := fmt.Sprintf("Path %q of tool %q resolves to %q, outside the %s %q", raw, call.Tool, real, what, allowed)
	if err != nil {
		reason = fmt.Sprintf("The %s of tool %q cannot be resolved: %v", what, call.Tool, err)
	}
	return hooks.Deny(rule, reason)
}

// under reports whether the real path lies under one of the prefixes. A
// prefix that cannot be resolved fails the check.
func (h *ContractScope) under(real string, prefixes []string) (bool, error) {
	for _, pre := range prefixes {
		rp, err := h.prefix(pre)
		if err != nil {
			return false, fmt.Errorf("allowed path %q: %w", pre, err)
		}
		if h.paths.WithinDir(real, rp) {
			return true, nil
		}
	}
	return false, nil
}

// maxCachedPrefixes bounds the resolved-prefix cache; beyond it prefixes are
// resolved on every call.
const maxCachedPrefixes = 4096

// prefix resolves an allowed-path prefix (relative to the workspace root,
// symlinks followed) the first time this hook sees it and keeps the result
// for the hook's lifetime (one configuration revision). Freezing it means
// that whoever can retarget a symlink inside a prefix afterwards (the agent,
// say) cannot move the scope: paths are still resolved on every call and
// compared with the prefix as it was. Errors are not cached.
func (h *ContractScope) prefix(pre string) (string, error) {
	if v, ok := h.prefixes.Load(pre); ok {
		return v.(string), nil
	}
	rp, err := h.paths.Resolve(pre)
	if err != nil {
		return "", err
	}
	if h.nPrefixes.Load() < maxCachedPrefixes {
		if _, loaded := h.prefixes.LoadOrStore(pre, rp); !loaded {
			h.nPrefixes.Add(1)
		} else if v, ok := h.prefixes.Load(pre); ok {
			return v.(string), nil
		}
	}
	return rp, nil
}

// callPath is one path a call names, with the directory it is relative to
// ("" for the workspace root).
type callPath struct {
	path string
	base string
}

// callPaths returns every path call names:
//   - every path-bearing argument (pathguard.Extract: path, file_path, cwd,
//     working_directory, paths, ... plus Config.PathKeys);
//   - for shell, and process's command, the path words of the command
//     (shellPaths), relative to the cwd/working_directory argument;
//   - for git, every string in its other arguments that looks like a path
//     (contains "/" or starts with "." or "~", also after "=" or an
//     attached short option), relative to cwd, since git's -C and
//     --git-dir/--work-tree options can name any directory;
//   - for apply_patch, the file names in the patch text.
func (h *ContractScope) callPaths(m *pathguard.Memo, call *hooks.Call) ([]callPath, error) {
	extracted, err := pathguard.Extract(call.Tool, call.Args, h.pathKeys)
	if err != nil {
		return nil, err
	}
	out := make([]callPath, 0, len(extracted)+4)
	for _, p := range extracted {
		out = append(out, callPath{path: p, base: h.paths.Real})
	}
	base, err := h.workingDir(m, call.Args)
	if err != nil {
		return nil, err
	}
	switch {
	case shellcheck.ClassifyTool(call.Tool, call.Args) == shellcheck.ShellTool:
		for _, key := range shellcheck.CommandKeys {
			v, ok := lookupFold(call.Args, key)
			if !ok || v == nil {
				continue
			}
			s, ok := shellcheck.CommandLine(v)
			if !ok {
				return nil, fmt.Errorf("argument %q is neither a string nor a list of strings", key)
			}
			words, err := shellPaths(s, base, h.paths.Real)
			if err != nil {
				return nil, err
			}
			for _, w := range words {
				out = append(out, callPath{path: w, base: base})
			}
		}
		if v, ok := lookupFold(call.Args, "args"); ok && v != nil {
			ws, err := pathLikeStrings(v)
			if err != nil {
				return nil, fmt.Errorf("argument %q: %w", "args", err)
			}
			for _, w := range ws {
				out = append(out, callPath{path: w, base: base})
			}
		}
	case strings.EqualFold(call.Tool, "git"):
		for k, v := range call.Args {
			if isPathKey(k, h.pathKeys) {
				continue
			}
			ws, err := pathLikeStrings(v)
			if err != nil {
				return nil, fmt.Errorf("argument %q: %w", k, err)
			}
			for _, w := range ws {
				out = append(out, callPath{path: w, base: base})
			}
		}
	case strings.EqualFold(call.Tool, "apply_patch"):
		for k, v := range call.Args {
			s, ok := v.(string)
			if !ok || isPathKey(k, h.pathKeys) {
				continue
			}
			for _, f := range pathguard.PatchFiles(s) {
				out = append(out, callPath{path: f, base: base})
			}
		}
	}
	return out, nil
}

// workingDir resolves the call's cwd/working_directory argument, the base of
// the relative paths in a command; "" (the workspace root) when absent.
func (h *ContractScope) workingDir(m *pathguard.Memo, args map[string]any) (string, error) {
	for _, key := range []string{"working_directory", "cwd", "workdir"} {
		v, ok := lookupFold(args, key)
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("argument %q is not a string", key)
		}
		real, err := h.paths.ResolveMemo(m, s)
		if err != nil {
			return "", fmt.Errorf("argument %q: %w", key, err)
		}
		return real, nil
	}
	return h.paths.Real, nil
}

// lookupFold finds key in args ignoring case (tools decoding into Go structs
// match JSON names case-insensitively). When several spellings are present
// it fails closed by returning a value that is not a string.
func lookupFold(args map[string]any, key string) (any, bool) {
	if v, ok := args[key]; ok {
		return v, true
	}
	var found any
	n := 0
	for k, v := range args {
		if strings.EqualFold(k, key) {
			found = v
			n++
		}
	}
	if n > 1 {
		return ambiguous{}, true
	}
	return found, n == 1
}

// ambiguous marks an argument given under several spellings.
type ambiguous struct{}

func isPathKey(k string, extra []string) bool { return pathguard.IsPathKey(k, extra) }

// pathLikeStrings returns the path candidates (see candidates) of a string
// or of every string in an array, recursing into arrays and objects.
func pathLikeStrings(v any) ([]string, error) {
	var out []string
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		if depth > 32 {
			return fmt.Errorf("nested too deeply to check")
		}
		switch v := v.(type) {
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				return fmt.Errorf("%q contains a NUL byte", v)
			}
			out = append(out, candidates(v)...)
		case []any:
			for _, e := range v {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case []string:
			for _, e := range v {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case map[string]any:
			for _, e := range v {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case ambiguous:
			return fmt.Errorf("given under several spellings")
		}
		return nil
	}
	err := walk(v, 0)
	return out, err
}

// candidates returns the parts of one word that may name a path: the word
// itself and what follows each '=', ':' or ',' (as in --dir=/x, a:/x), and the
// value of an attached short option (-C.. or -f/x); each kept only when it
// looks like a path: it contains '/', starts with '.' or '~'.
func candidates(w string) []string {
	var out []string
	add := func(s string) {
		if strings.ContainsRune(s, '/') || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") {
			out = append(out, s)
		}
	}
	add(w)
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case '=', ':', ',':
			add(w[i+1:])
		}
	}
	if len(w) > 2 && w[0] == '-' && w[1] != '-' {
		add(w[2:])
	}
	return out
}
