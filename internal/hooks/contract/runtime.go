package contract

import (
	"context"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

var (
	_ hooks.RuntimeGuard    = (*ContractScope)(nil)
	_ hooks.SystemPathGuard = (*ContractScope)(nil)
)

// CheckExec re-checks, while a shell tool runs, one command it is about to
// start against the call's contract: argv (after every expansion) with the
// variables the script set is rendered as one fully quoted simple command
// and checked as the "command" of the same tool with dir as its "cwd", by
// the same scope check as the call's arguments.
func (h *ContractScope) CheckExec(_ context.Context, call *hooks.Call, dir string, env, argv []string) hooks.Verdict {
	if !h.subjects.Matches(call) {
		return hooks.Allow
	}
	c := h.contract
	cmd, err := shellcheck.Render(env, argv)
	if err != nil {
		return hooks.Deny(RuleInvalidArguments,
			"A command of tool "+call.Tool+" cannot be checked against the contract at run time: "+err.Error())
	}
	return runtime(h.checkScope(nil, synthetic(call, map[string]any{"command": cmd, "cwd": dir}), c))
}

// CheckOpen re-checks a file a tool is about to open against the call's
// contract, as a "path" argument of the same tool.
func (h *ContractScope) CheckOpen(_ context.Context, call *hooks.Call, path string, _ bool) hooks.Verdict {
	if !h.subjects.Matches(call) {
		return hooks.Allow
	}
	c := h.contract
	return runtime(h.checkScope(nil, synthetic(call, map[string]any{"path": path}), c))
}

// CheckSystemPath allows every system path programs need: a contract's
// path scopes say what the call may touch, and the system the programs it
// starts run on is not part of it.
func (h *ContractScope) CheckSystemPath(context.Context, *hooks.Call, string) hooks.Verdict {
	return hooks.Allow
}

// synthetic is call with args in place of its arguments.
func synthetic(call *hooks.Call, args map[string]any) *hooks.Call {
	c := *call
	c.Args, c.ArgsJSON, c.ArgsErr = args, "", nil
	return &c
}

func runtime(v hooks.Verdict) hooks.Verdict {
	if !v.Allowed {
		v.Reason = "At run time: " + v.Reason
	}
	return v
}
