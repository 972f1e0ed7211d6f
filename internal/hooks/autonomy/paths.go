package autonomy

import (
	"fmt"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// isCwdKey reports whether p is the value of a working-directory argument.
func isCwdKey(args map[string]any, p string) bool {
	for k, v := range args {
		if s, ok := v.(string); ok && s == p && (strings.EqualFold(k, "cwd") ||
			strings.EqualFold(k, "working_directory") || strings.EqualFold(k, "workdir")) {
			return true
		}
	}
	return false
}

// checkPath resolves p (relative to base, or the workspace when base is
// empty), with the call's lookups remembered in m, and applies
// workspaceOnly and the forbidden globs; with st it matches the ask path
// globs too (see askState). cmd is the shell command whose word p is, if
// any: a match's reason names it, as shellVerdict names it in a denial's.
// With write, the path may be written and the protected globs apply too.
func (h *Hook) checkPath(m *pathguard.Memo, p, base string, st *askState, cmd string, write bool) (string, hooks.Verdict, bool) {
	if h.res == nil {
		return "", hooks.Allow, true
	}
	if base == "" {
		base = h.res.Real
	}
	// A shell word naming the command's own streams is the shell's
	// business (its redirections are checked); any other path through a
	// process's descriptors fails to resolve (pathguard.ErrProcessPath).
	shellWord := cmd != ""
	real := p
	if !shellWord || !shellStream(p) {
		if !shellWord && p == "/dev/tty" {
			return "", hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
				"Path %q names the controlling terminal of the process that opens it, not a file.", p)), false
		}
		var err error
		real, err = h.res.ResolveFromMemo(m, base, p)
		if err != nil {
			return "", hooks.Deny(RuleInvalidArguments, fmt.Sprintf("Path %q cannot be resolved safely: %v.", p, err)), false
		}
	}
	if h.workspaceOnly && !h.res.Within(real) && !safeDevice(p, shellWord) {
		return "", hooks.Deny(RuleWorkspaceOnly, fmt.Sprintf(
			"Path %q resolves to %q, outside the workspace %q.", p, real, h.res.Real)), false
	}
	ask := h.askingPaths(st)
	protect := write && len(h.protected) > 0
	if len(h.forbidden) == 0 && !ask && !protect {
		return real, hooks.Allow, true
	}
	var pf pathForms
	h.forms(&pf, p, base, real)
	if v, stop := h.matchPathGlobs(&pf, st, cmd, func(g string) hooks.Verdict {
		return hooks.Deny(RuleForbiddenPaths, fmt.Sprintf("Path %q (real path %q) matches the forbidden path glob %q.", p, real, g))
	}); stop {
		return "", v, false
	}
	if protect {
		if g := matchGlob(h.protected, &pf); g != nil {
			return "", protectedDenial(p, real, g), false
		}
	}
	return real, hooks.Allow, true
}

// matchPathGlobs matches the forms of one path against the forbidden globs,
// then, with st, the ask path globs; denial words the match of glob g. It
// returns the denial that ends the walk (stop): a forbidden match, or an
// ask match in a walk that is the ask rules' alone (see askState). Another
// ask match is kept in st, its reason naming the shell command cmd if any.
func (h *Hook) matchPathGlobs(pf *pathForms, st *askState, cmd string, denial func(g string) hooks.Verdict) (hooks.Verdict, bool) {
	if g, ok := matchGlobs(h.forbidden, pf); ok {
		return denial(g), true
	}
	if h.askingPaths(st) {
		if g, ok := matchGlobs(h.askPaths, pf); ok {
			d := denial(g)
			if st.only {
				return d, true
			}
			if cmd != "" {
				d = shellVerdict(d, cmd)
			}
			st.set(d)
		}
	}
	return hooks.Allow, false
}

// safeDevice reports whether p is a device file used harmlessly, outside
// the workspace: /dev/null and the random and zero devices, and in a shell
// word also its own streams (shellStream).
func safeDevice(p string, shellWord bool) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom":
		return true
	}
	return shellWord && shellStream(p)
}

// shellStream reports whether p names a shell command's own terminal or
// standard streams (/dev/tty, /dev/stdin, /dev/stdout, /dev/stderr,
// /dev/fd/0 to 2): the streams the tool gives the command, not files.
// Other descriptors may be inherited from whoever runs the shell.
func shellStream(p string) bool {
	switch p {
	case "/dev/tty", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd/0", "/dev/fd/1", "/dev/fd/2":
		return true
	}
	return false
}
