// Package progenv is what the environment of a program a tool starts may
// and may not hold: the git configuration that keeps git from running the
// programs a repository's configuration names, and the variables a script
// may not set because they make the programs it starts load or run other
// code, or undo that configuration. It is the one place for both lists.
//
// Git reads configuration given as GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n> and
// GIT_CONFIG_VALUE_<n> in the command-line scope, after every file, so for
// a single-valued key it wins over .git/config; an empty credential.helper
// empties the list of helpers the files named before it. With git 2.39
// (checked by the shell tool's tests):
//
//   - diff.external cannot be unset from the environment, and an empty
//     value makes `git diff` fail ("cannot run"). It is set to a fixed
//     command that prints the change as a unified diff with diff(1), so
//     a configured external diff never runs and `git diff` still shows
//     changes, in a form git apply accepts (without git's "diff --git",
//     "index" and mode lines; `git diff --no-ext-diff` gives git's own);
//     `git show` and `git log -p` use no external diff unless --ext-diff
//     is given.
//   - textconv, filter (clean, smudge, process) and merge drivers are
//     named per driver (diff.<driver>.textconv), and a driver is chosen
//     by .gitattributes or .git/info/attributes: no key turns them all off.
//     They are kept from the agent by the protected paths instead (the
//     autonomy hook's default set): the agent cannot write the
//     configuration nor the attributes, so only drivers configured before
//     it ran, by whoever owns the repository, can run.
//   - core.fsmonitor=false, core.hooksPath=/dev/null, core.pager=cat,
//     core.askPass="" and safe.bareRepository=explicit do what they say.
package progenv

import (
	"strconv"
	"strings"
)

// ExternalDiff is the diff.external command: git runs it through the shell
// with the path, the old file, hex and mode, the new file, hex and mode
// (and, for a rename or copy, the new path and git's description of it),
// and dies when it exits non-zero; diff exits 1 when the files differ. Its
// output is a unified diff (a created or deleted file against /dev/null, a
// rename or copy under git's header and description) that git apply
// accepts; mode changes are not shown.
const ExternalDiff = `d() { o="a/$1"; n="b/${8:-$1}"; [ "$2" = /dev/null ] && o=/dev/null; [ "$5" = /dev/null ] && n=/dev/null; ` +
	`[ -n "$9" ] && printf 'diff --git a/%s b/%s\n%s' "$1" "$8" "$9"; diff -u --label "$o" --label "$n" -- "$2" "$5"; [ $? -le 1 ]; }; d`

// GitSetting is one git configuration key given to every program.
type GitSetting struct {
	Key, Value string
	// Why says what it turns off.
	Why string
}

// GitSettings turn off every program git runs because its configuration
// names it: they are given to the programs the tools start unless the
// bound policies allow git's configured programs.
var GitSettings = []GitSetting{
	{"core.fsmonitor", "false", "the file system monitor program git status runs"},
	{"core.hooksPath", "/dev/null", "hooks: git looks for them in a directory that holds none"},
	{"core.pager", "cat", "the pager (GIT_PAGER and pager.<command> too, through GIT_PAGER below)"},
	{"core.askPass", "", "the program git asks for passwords; an empty value makes it ask no program"},
	{"credential.helper", "", "credential helpers: an empty value empties the list the files built"},
	{"diff.external", ExternalDiff, "the external diff program, replaced by a fixed unified diff"},
	{"safe.bareRepository", "explicit", "bare repositories (with their own config and hooks) found in the work tree, not named by --git-dir"},
	{"protocol.ext.allow", "never", "the ext:: transport, which runs a command"},
}

// GitEnv returns the environment entries that give git GitSettings, keep
// it from reading system and global configuration and attribute files
// (which the protected paths cannot cover on every machine), name cat as
// the pager and keep git from prompting on a terminal.
func GitEnv() []string {
	env := make([]string, 0, 2*len(GitSettings)+7)
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", "GIT_PAGER=cat", "PAGER=cat",
		"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT="+strconv.Itoa(len(GitSettings)))
	for i, s := range GitSettings {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+s.Key, "GIT_CONFIG_VALUE_"+n+"="+s.Value)
	}
	return env
}

// loaderVars are the dynamic loader's and C library's variables that load
// code (or write files) named by the environment; every LD_ variable is
// refused with them.
var loaderVars = map[string]bool{"GCONV_PATH": true, "LOCPATH": true, "HOSTALIASES": true, "RESOLV_HOST_CONF": true}

// gitVars are the variables that point git at other configuration,
// repositories or programs, or undo GitEnv; every GIT_CONFIG variable is
// refused with them.
var gitVars = map[string]bool{
	"GIT_EXTERNAL_DIFF": true, "GIT_PAGER": true, "GIT_DIR": true, "GIT_COMMON_DIR": true,
	"GIT_EXEC_PATH": true, "GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_SSH_VARIANT": true,
	"GIT_ASKPASS": true, "SSH_ASKPASS": true, "GIT_PROXY_COMMAND": true, "GIT_TEMPLATE_DIR": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_OBJECT_DIRECTORY": true, "GIT_ATTR_NOSYSTEM": true,
	"GIT_ATTR_SOURCE": true, "GIT_ALLOW_PROTOCOL": true, "GIT_PROTOCOL_FROM_USER": true,
}

// Refused returns why a script may not export the variable name to the
// programs it starts, or "" when it may. Git's variables are refused while
// git's configured programs are off (allowGit false); the loader's always.
func Refused(name string, allowGit bool) string {
	switch {
	case strings.HasPrefix(name, "LD_") || loaderVars[name]:
		return "makes the dynamic loader or the C library load code or files it names"
	case allowGit:
		return ""
	case strings.HasPrefix(name, "GIT_CONFIG") || gitVars[name]:
		return "points git at other configuration, repositories or programs, or undoes the git configuration the tools set"
	}
	return ""
}
