package autonomy

import (
	"fmt"
	"os"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// gitName names the git program and the tool that runs it.
const gitName = "git"

// mutatingTools are the known mutation-capable tools (lower case).
var mutatingTools = map[string]bool{
	"write_file": true, "edit_file": true, "apply_patch": true, "shell": true,
	"code_exec": true, gitName: true, "database": true, "home_assistant_write": true,
	"mqtt_publish": true, "notion_write": true, "inbox_zero": true, "email": true,
	"calendar": true, "delegate_agent": true,
}

// readOnlyTools are tools known to change nothing (lower case).
var readOnlyTools = map[string]bool{
	"read_file": true, "list_dir": true, "glob": true, "grep": true,
	"search": true, "web_search": true,
}

// actionTool describes a tool whose "action" argument decides whether it mutates.
type actionTool struct {
	def      string          // action when the argument is absent
	readOnly map[string]bool // actions known to change nothing
}

// actionTools are the known action-dependent tools. Only the listed actions
// are read-only; every other action (including unknown ones) mutates.
var actionTools = map[string]actionTool{
	"process":      {def: "start", readOnly: set("list", "poll", "log", "logs", "status", "output", "read")},
	"automation":   {def: "list", readOnly: set("list", "get", "status", "history")},
	"external_cli": {def: "list_connectors", readOnly: set("list_connectors")},
	"todo":         {def: "", readOnly: set("list")},
}

func set(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}

// checkReadOnly applies readonly mode.
func (h *Hook) checkReadOnly(tool, lower string, call *hooks.Call) (hooks.Verdict, bool) {
	if mutatingTools[lower] {
		return hooks.Deny(RuleReadOnly, fmt.Sprintf("Tool %q can change state and the mode is readonly.", tool)), false
	}
	if at, ok := actionTools[lower]; ok {
		if call.ArgsErr != nil {
			return hooks.Deny(RuleReadOnly, fmt.Sprintf(
				"The arguments of %q are not one JSON object, so its action cannot be known in readonly mode.", tool)), false
		}
		action := at.def
		var raw any
		for k, v := range call.Args {
			if strings.EqualFold(k, "action") {
				if raw != nil {
					return hooks.Deny(RuleReadOnly, fmt.Sprintf("Tool %q has more than one action argument.", tool)), false
				}
				raw = v
			}
		}
		if raw != nil {
			s, ok := raw.(string)
			if !ok {
				return hooks.Deny(RuleReadOnly, fmt.Sprintf("The action of %q is not a string, so it cannot be checked in readonly mode.", tool)), false
			}
			action = s
		}
		if !at.readOnly[action] {
			return hooks.Deny(RuleReadOnly, fmt.Sprintf("Tool %q with action %q can change state and the mode is readonly.", tool, action)), false
		}
		return hooks.Allow, true
	}
	if readOnlyTools[lower] || h.readOnlyTools[lower] {
		return hooks.Allow, true
	}
	return hooks.Deny(RuleReadOnly, fmt.Sprintf(
		"Tool %q is not known to be read-only (list it in readOnlyTools) and the mode is readonly.", tool)), false
}

// homeDir is os.UserHomeDir, a variable for tests.
var homeDir = os.UserHomeDir
