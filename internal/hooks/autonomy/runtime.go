package autonomy

import (
	"context"
	"fmt"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

var (
	_ hooks.RuntimeGuard    = (*Hook)(nil)
	_ hooks.SystemPathGuard = (*Hook)(nil)
)

// CheckExec allows a call the subjects do not bind. For one they bind it
// re-checks, while a shell tool runs, one command it is about to start: the
// working directory dir with the path rules, and argv (after every
// expansion), preceded by the variables the script set, rendered as one fully
// quoted simple command and checked by the same shell check as the command
// line (allow-list, path rules, forbidden globs).
func (h *Hook) CheckExec(_ context.Context, call *hooks.Call, dir string, env, argv []string) hooks.Verdict {
	if !h.subjects.Matches(call) {
		return hooks.Allow
	}
	if !h.allowShell {
		return hooks.Deny(RuleShellDisabled, fmt.Sprintf("Tool %q started a command and allowShell is false.", call.Tool))
	}
	cmd, err := shellcheck.Render(env, argv)
	if err != nil {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf("A command of tool %q cannot be checked: %v.", call.Tool, err))
	}
	var bases []string
	if h.res != nil {
		real, v, ok := h.checkPath(nil, dir, "", nil, "", false)
		if !ok {
			return runtimeVerdict(v, cmd)
		}
		bases = []string{real}
	}
	return runtimeVerdict(h.checkCommand(nil, cmd, bases, nil), cmd)
}

// CheckOpen allows a call the subjects do not bind. For one they bind it
// re-checks a file a tool is about to open with the path rules
// (workspace-only, forbidden globs, and for writing the protected globs);
// in readonly mode nothing is opened for writing.
func (h *Hook) CheckOpen(ctx context.Context, call *hooks.Call, path string, write bool) hooks.Verdict {
	if !h.subjects.Matches(call) {
		return hooks.Allow
	}
	if write && h.readOnly {
		return hooks.Deny(RuleReadOnly, fmt.Sprintf("Tool %q tried to open %q for writing and the mode is readonly.", call.Tool, path))
	}
	if _, v, ok := h.checkPath(pathguard.RealPathsMemo(ctx), path, "", nil, "", write); !ok {
		v.Reason = "At run time: " + v.Reason
		return v
	}
	return hooks.Allow
}

// CheckSystemPath allows a call the subjects do not bind. For one they bind
// it decides whether the programs a tool starts may read a system path
// they need (the loader's files, libraries, /usr): with the forbidden globs
// only, since workspaceOnly keeps tools, not the system those programs run
// on, out.
func (h *Hook) CheckSystemPath(_ context.Context, call *hooks.Call, path string) hooks.Verdict {
	if !h.subjects.Matches(call) || len(h.forbidden) == 0 {
		return hooks.Allow
	}
	real := path
	if h.res != nil {
		r, err := h.res.ResolveFromMemo(nil, "/", path)
		if err != nil {
			return hooks.Deny(RuleInvalidArguments, fmt.Sprintf("System path %q cannot be resolved safely: %v.", path, err))
		}
		real = r
	}
	var pf pathForms
	h.forms(&pf, path, "/", real)
	if g, ok := matchGlobs(h.forbidden, &pf); ok {
		return hooks.Deny(RuleForbiddenPaths, fmt.Sprintf("System path %q (real path %q) matches the forbidden path glob %q.", path, real, g))
	}
	return hooks.Allow
}

func runtimeVerdict(v hooks.Verdict, cmd string) hooks.Verdict {
	if !v.Allowed {
		v.Reason = fmt.Sprintf("At run time, command %q: %s", short(cmd), v.Reason)
	}
	return v
}
