package shellcheck

import "strings"

// ToolClass says how a tool runs what it is given.
type ToolClass int

// Tool classes.
const (
	// NotShell tools run no command line.
	NotShell ToolClass = iota
	// ShellTool tools run a shell command line (argument command, cmd or
	// script; a list of strings is an argv, see Join).
	ShellTool
	// CodeTool tools run code in another language, which is not analysed.
	CodeTool
)

// toolClasses are the tools known to run a shell command line (the
// gateway's own shell and process tools, Claude Code's Bash, Codex's shell,
// exec_command and local_shell, Cursor's run_terminal_cmd, Gemini CLI's
// run_shell_command, Cline's execute_command) or code in an interpreter,
// by lower-case name.
var toolClasses = map[string]ToolClass{
	"shell": ShellTool, "bash": ShellTool, "process": ShellTool, "sh": ShellTool,
	"run_terminal_cmd": ShellTool, "exec_command": ShellTool, "local_shell": ShellTool,
	"container.exec": ShellTool, "run_shell_command": ShellTool, "execute_command": ShellTool,
	"terminal": ShellTool, "run_command": ShellTool,
	"code_exec": CodeTool, "execute_code": CodeTool, "run_code": CodeTool, "code_interpreter": CodeTool,
	"python": CodeTool, "run_python": CodeTool, "jupyter": CodeTool,
}

// ClassifyTool returns the class of a tool by name (case-insensitive). Both
// policy hooks use it, so they agree on which tools are shells. A process
// tool is a shell only when args has a command (its start action); its
// other actions (list, poll, kill) run nothing.
func ClassifyTool(tool string, args map[string]any) ToolClass {
	c, ok := toolClasses[tool]
	if !ok {
		if c, ok = toolClasses[strings.ToLower(tool)]; !ok {
			return NotShell
		}
	}
	if c == ShellTool && strings.EqualFold(tool, "process") && !hasCommandKey(args) {
		return NotShell
	}
	return c
}

// hasCommandKey reports whether args has one of CommandKeys (any case).
func hasCommandKey(args map[string]any) bool {
	for k := range args {
		for _, c := range CommandKeys {
			if strings.EqualFold(k, c) {
				return true
			}
		}
	}
	return false
}

// CommandKeys are the argument names a shell tool's command line is in.
var CommandKeys = []string{"command", "cmd", "script"}

// Join renders an argv as one shell command line, each word single-quoted
// when it needs quoting, so that analysing the line analyses that argv.
func Join(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteWord(a))
	}
	return b.String()
}

// quoteWord single-quotes s unless every byte is one no shell treats
// specially (no glob, brace, tilde or expansion characters).
func quoteWord(s string) string {
	plain := s != "" && s[0] != '~'
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = isAlnum(c) || strings.IndexByte("_./=:,+-@%", c) >= 0
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CommandLine returns a shell tool's command argument as one command line:
// a string as it is, a non-empty list of strings (an argv, as Codex's shell
// sends) as that argv quoted (Join); false for anything else.
func CommandLine(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []any:
		argv := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return "", false
			}
			argv[i] = s
		}
		return Join(argv), len(argv) > 0
	}
	return "", false
}
