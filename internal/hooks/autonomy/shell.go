package autonomy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

type shellKind = shellcheck.ToolClass

const (
	notShell     = shellcheck.NotShell
	codeExecTool = shellcheck.CodeTool
)

// shellClass classifies a tool as the Contract hook does (see
// shellcheck.ClassifyTool).
func shellClass(tool string, args map[string]any) shellKind {
	return shellcheck.ClassifyTool(tool, args)
}

// checkShell applies the shell rules; with st, it matches the ask rules
// too (see askState).
func (h *Hook) checkShell(m *pathguard.Memo, tool string, kind shellKind, call *hooks.Call,
	bases []string, st *askState) hooks.Verdict {
	if !h.allowShell {
		return hooks.Deny(RuleShellDisabled, fmt.Sprintf("Tool %q is a shell tool and allowShell is false.", tool))
	}
	if kind == codeExecTool {
		if !h.allowAll {
			return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
				"Tool %q runs code that cannot be analysed; only an allow-list of exactly [\"*\"] permits it.", tool))
		}
		if st.open() && len(h.askCommands) > 0 {
			st.set(hooks.Deny(RuleAskCommands, fmt.Sprintf(
				"Tool %q runs code that cannot be read, so it may run a command that needs approval.", tool)))
		}
		return hooks.Allow
	}
	var cmds []string
	for k, v := range call.Args {
		switch strings.ToLower(k) {
		case "command", "cmd", "script":
			s, ok := shellcheck.CommandLine(v)
			if !ok {
				return hooks.Deny(RuleInvalidArguments, fmt.Sprintf("Argument %q of %q is neither a string nor a list of strings.", k, tool))
			}
			cmds = append(cmds, s)
		}
	}
	if len(cmds) == 0 {
		return hooks.Deny(RuleInvalidArguments, fmt.Sprintf("Tool %q has no string \"command\" argument to check.", tool))
	}
	for _, c := range cmds {
		if v := h.checkCommand(m, c, bases, st); !v.Allowed {
			return v
		}
	}
	return hooks.Allow
}

// maxBases bounds the working directories a command's words are resolved against.
const maxBases = 8

// checkCommand checks one command line against the policy: the single entry
// point for a shell command, whoever runs it. bases are the directories its
// relative words resolve against (the workspace when empty). With st it
// matches the ask rules too (see askState).
func (h *Hook) checkCommand(m *pathguard.Memo, cmd string, bases []string, st *askState) hooks.Verdict {
	if len(bases) == 0 && h.res != nil {
		bases = []string{h.res.Real}
	}
	an, err := shellcheck.AnalyzeDialects(cmd, h.dialects)
	if err != nil {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf("Shell command %q cannot be checked: %v.", short(cmd), err))
	}
	if len(an.Commands) == 0 && len(an.Redirects) == 0 && len(an.Unverifiable) == 0 {
		return hooks.Allow
	}
	if v := h.checkCommandNames(an, cmd, st); !v.Allowed {
		return v
	}
	if len(h.protectsGitConfig) > 0 {
		if v := h.checkGitConfig(an, cmd); !v.Allowed {
			return v
		}
	}
	if len(an.Unverifiable) > 0 && !h.allowAll {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
			"Shell command %q cannot be checked statically: %s.", short(cmd), an.Unverifiable[0]))
	}
	switch {
	case h.res == nil:
		return hooks.Allow
	case h.workspaceOnly || len(h.forbidden) > 0:
		return h.checkCommandPaths(m, an, cmd, bases, h.allowAll, st, false)
	}
	if len(h.protected) > 0 && writesAny(an) {
		// Only the paths the line may write are read for the deny rules.
		if v := h.checkCommandPaths(m, an, cmd, bases, h.allowAll, nil, true); !v.Allowed {
			return v
		}
	}
	if h.askingPaths(st) {
		// Only the ask rules read the paths: what would deny asks.
		st.walkOnly(true)
		v := h.checkCommandPaths(m, an, cmd, bases, true, st, false)
		st.walkOnly(false)
		if !v.Allowed {
			st.set(v)
		}
	}
	return hooks.Allow
}

// checkCommandPaths checks the paths of an analysed command line: its
// working directories, words and redirection targets, resolved against
// each base. allowAll keeps the first maxBases bases of a command that
// changes directory too often instead of denying it. writesOnly checks
// only the words and redirections that may write (for the protected paths
// of a policy whose other rules read no paths).
func (h *Hook) checkCommandPaths(m *pathguard.Memo, an *shellcheck.Analysis, cmd string, bases []string, allowAll bool,
	st *askState, writesOnly bool) hooks.Verdict {
	// Working directories: the tool's, plus every cd/pushd target.
	for _, d := range an.Dirs {
		n := len(bases)
		for _, b := range bases[:n] {
			real, v, ok := h.checkPath(m, d, b, st, "", false)
			if !ok {
				return v
			}
			bases = append(bases, real)
		}
		if len(bases) > maxBases {
			if !allowAll {
				return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
					"Shell command %q changes directory too often to check its relative paths.", short(cmd)))
			}
			bases = bases[:maxBases]
		}
	}
	for _, b := range bases {
		for _, w := range an.Words {
			// A protected path a word names is checked unless its command
			// only reads what it names.
			write := len(h.protected) > 0 && wordWrites(an, w.Command)
			if writesOnly && !write {
				continue
			}
			if v := h.checkWord(m, w.Value, w.Glob, w.ExtGlob, an.DotGlob, b, cmd, st, write); !v.Allowed {
				return v
			}
			// The trees beneath a recursive operand are not walked for
			// protected entries: what a copy writes there is what already
			// was protected (agents cannot have written it), and what is
			// removed runs nothing; writing it again is checked.
			if w.Recursive && !writesOnly {
				if v := h.checkBeneath(m, w, b, cmd, st); !v.Allowed {
					return v
				}
			}
		}
		for _, r := range an.Redirects {
			write := strings.IndexByte(r.Op, '>') >= 0
			if writesOnly && !write {
				continue
			}
			if v := h.checkWord(m, r.Target, r.Pattern, r.ExtGlob, an.DotGlob, b, cmd, st, write); !v.Allowed {
				return v
			}
		}
	}
	return hooks.Allow
}

// checkCommandNames checks every simple command of an analysed command line
// against the allow-list and, with st, the ask commands (a command line
// that cannot be read statically matches them too).
func (h *Hook) checkCommandNames(an *shellcheck.Analysis, cmd string, st *askState) hooks.Verdict {
	for _, c := range an.Commands {
		if st.open() {
			h.askCommand(c.Text, st)
		}
		if !h.commandAllowed(c.Text) && !changesDirOnly(c) {
			return hooks.Deny(RuleShellAllowList, fmt.Sprintf(
				"Shell command %q is not allowed by allowedShellCommands.", c.Text))
		}
		if len(c.Risky) > 0 && !h.riskyAllowed(c) {
			return hooks.Deny(RuleShellAllowList, fmt.Sprintf(
				"Shell command %q uses %q, which runs programs or writes files; an allowedShellCommands entry must name it explicitly.",
				c.Text, c.Risky))
		}
	}
	if len(an.Unverifiable) > 0 && st.open() && len(h.askCommands) > 0 {
		st.set(hooks.Deny(RuleAskCommands, fmt.Sprintf(
			"Shell command %q cannot be read statically (%s), so it may run a command that needs approval.", short(cmd), an.Unverifiable[0])))
	}
	return hooks.Allow
}

// changesDirOnly reports whether c is the cd, pushd or popd builtin run by
// the shell itself with static arguments: it starts no program, and the
// directory it changes to is checked as a path (shellcheck.Analysis.Dirs)
// and becomes a base of the words after it, so it needs no allow-list entry.
func changesDirOnly(c shellcheck.Command) bool {
	switch c.Name {
	case "cd", "pushd", "popd":
		return !c.Wrapped && !c.Dynamic
	}
	return false
}

// askCommand matches one command's text against the ask commands.
func (h *Hook) askCommand(text string, st *askState) {
	for _, p := range h.askCommands {
		if MatchCommand(p, text) {
			st.set(hooks.Deny(RuleAskCommands, fmt.Sprintf("Shell command %q matches %q, which needs approval.", text, p)))
			return
		}
	}
}

// checkWord checks one shell word and, for a glob, everything it can
// expand to (shellcheck.Expand); dotGlob says the command line may make
// patterns match names that start with a dot (shellcheck.Analysis.DotGlob);
// with write, as paths that may be written.
func (h *Hook) checkWord(m *pathguard.Memo, value, glob string, ext, dotGlob bool, base, cmd string, st *askState,
	write bool) hooks.Verdict {
	if value == "" {
		return hooks.Allow
	}
	if _, v, ok := h.checkPath(m, value, base, st, cmd, write); !ok {
		return shellVerdict(v, cmd)
	}
	if glob == "" {
		return hooks.Allow
	}
	opt := shellcheck.GlobOptions{ExtGlob: ext, NoCase: h.fold, HideDots: !dotGlob, DotGlob: dotGlob}
	if strings.HasPrefix(glob, "~") {
		home, err := homeDir()
		if err != nil {
			return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf("Glob %q cannot be expanded: %v.", glob, err))
		}
		opt.Home = home
	}
	var listed []string
	opt.Listed = func(dir string) { listed = append(listed, dir) }
	matches, err := shellcheck.Expand(glob, base, opt)
	if err != nil {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf("Glob %q in shell command %q cannot be checked: %v.", value, short(cmd), err))
	}
	// The shell reads the names of every directory the pattern searches:
	// those directories are touched as much as the names it finds.
	for i, match := range append(listed, matches...) {
		if _, v, ok := h.checkPath(m, match, base, st, cmd, write && i >= len(listed)); !ok {
			return shellVerdict(v, cmd)
		}
	}
	return hooks.Allow
}

func shellVerdict(v hooks.Verdict, cmd string) hooks.Verdict {
	v.Reason = fmt.Sprintf("In shell command %q: %s", short(cmd), v.Reason)
	return v
}

func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// riskyAllowed reports whether an allow-list entry that matches c names
// every catalogued risky option or subcommand c uses: as one of its
// space-separated fields (alone, or followed by '=' or '*'), or by being
// an exact command without wildcards. ["*"] admits everything.
func (h *Hook) riskyAllowed(c shellcheck.Command) bool {
	if h.allowAll {
		return true
	}
	for _, p := range h.shellAllow {
		if !MatchCommand(p, c.Text) {
			continue
		}
		if !strings.ContainsAny(p, "*?") {
			return true
		}
		ok := true
		for _, r := range c.Risky {
			if !namesField(p, r) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// namesField reports whether the pattern p has a field that is r, or r
// followed by '=' or '*'.
func namesField(p, r string) bool {
	for f := range strings.FieldsSeq(p) {
		if f == r || strings.HasPrefix(f, r+"=") || f == r+"*" {
			return true
		}
	}
	return false
}

// maxBeneath bounds the entries checkBeneath walks.
const maxBeneath = 20000

// checkBeneath checks everything beneath the directory w names (a
// recursive reader's operand), following symlinked directories: each entry
// must pass the forbidden globs and, for symlinks, the workspace check on
// its target. For git, .git directories are skipped and a
// revision (a word naming no file) stands for the whole repository. A tree
// too large to walk is denied.
func (h *Hook) checkBeneath(m *pathguard.Memo, w shellcheck.Word, base, cmd string, st *askState) hooks.Verdict {
	real, v, ok := h.checkPath(m, w.Value, base, st, cmd, false)
	if !ok {
		return shellVerdict(v, cmd)
	}
	fi, err := os.Stat(real)
	if w.WholeRepo || (err != nil && w.MaybeRevision) {
		from := base
		if from == "" {
			from = h.res.Real
		}
		real = pathguard.RepoRoot(from, h.res.Real)
		fi, err = os.Stat(real)
	}
	if err != nil || !fi.IsDir() {
		return hooks.Allow // a file (checked) or nothing to descend into
	}
	var deny *hooks.Verdict
	var entry func(p string) error
	link := func(p string) (string, error) {
		if w.NoFollow {
			return "", entry(p) // read as a link: its own name is what is touched
		}
		target, v, ok := h.checkPath(m, p, base, st, cmd, false)
		if !ok {
			deny = &v
			return "", errBeneathDenied
		}
		if pathguard.IsDir(target) {
			return target, nil // -R, -L and find -L descend into it
		}
		return "", nil
	}
	entry = func(p string) error {
		ask := h.askingPaths(st)
		if len(h.forbidden) == 0 && !ask {
			return nil
		}
		q := p
		if h.fold {
			q = strings.ToLower(q)
		}
		var pf pathForms
		h.forms(&pf, q, base, q)
		if v, stop := h.matchPathGlobs(&pf, st, cmd, func(g string) hooks.Verdict {
			return hooks.Deny(RuleForbiddenPaths, fmt.Sprintf(
				"%q reads or writes beneath %q, which holds %q, matching the forbidden path glob %q.", cmd, w.Value, p, g))
		}); stop {
			deny = &v
			return errBeneathDenied
		}
		return nil
	}
	if w.IndexOnly {
		err = walkIndex(real, base, h.res.Real, entry)
		if errors.Is(err, errNoIndex) {
			err = pathguard.WalkTree(real, maxBeneath, w.Git, link, entry)
		}
	} else {
		err = pathguard.WalkTree(real, maxBeneath, w.Git, link, entry)
	}
	switch {
	case errors.Is(err, pathguard.ErrTooManyEntries):
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
			"Shell command %q reads or writes recursively beneath %q, which holds more than %d entries to check.", short(cmd), w.Value, maxBeneath))
	case deny != nil:
		return shellVerdict(*deny, cmd)
	}
	return hooks.Allow
}

// errBeneathDenied ends a checkBeneath walk at its first denial.
var errBeneathDenied = errors.New("denied")

// commandAllowed reports whether one command's text matches the allow-list.
func (h *Hook) commandAllowed(text string) bool {
	if h.allowAll {
		return true
	}
	for _, p := range h.shellAllow {
		if MatchCommand(p, text) {
			return true
		}
	}
	return false
}

// MatchCommand reports whether a shell allow-list pattern matches a command
// text: `*` matches any run of characters (including `/` and spaces), `?`
// any one character, `\` makes the next character literal; everything else
// matches itself. Characters are runes (an invalid UTF-8 byte counts as one
// U+FFFD, as in a []rune conversion); the strings are walked in place by
// byte offsets, without converting them.
func MatchCommand(pattern, text string) bool {
	pi, ti := 0, 0
	starP, starT := -1, 0
	for ti < len(text) {
		if pi < len(pattern) {
			tr, tw := utf8.DecodeRuneInString(text[ti:])
			switch c := pattern[pi]; {
			case c == '*':
				starP, starT = pi, ti
				pi++
				continue
			case c == '?':
				pi++
				ti += tw
				continue
			case c == '\\' && pi+1 < len(pattern):
				if pr, pw := utf8.DecodeRuneInString(pattern[pi+1:]); pr == tr {
					pi += 1 + pw
					ti += tw
					continue
				}
			default:
				if pr, pw := utf8.DecodeRuneInString(pattern[pi:]); pr == tr {
					pi += pw
					ti += tw
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, w := utf8.DecodeRuneInString(text[starT:])
		starT += w
		pi, ti = starP+1, starT
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}

// errNoIndex says walkIndex read no index: the caller walks the tree.
var errNoIndex = pathguard.ErrIndexUnread

// walkIndex calls entry with each path the index of the repository a git
// command run in base works on holds beneath dir, as an absolute path:
// what a git diff of the work tree against the index prints. It returns
// errNoIndex when the index cannot be read (pathguard.IndexPaths) or dir
// is not in the repository.
func walkIndex(dir, base, root string, entry func(p string) error) error {
	if base == "" {
		base = root
	}
	repo, paths, err := pathguard.IndexPaths(base)
	if err != nil {
		return err
	}
	if !pathguard.Within(dir, repo) {
		return fmt.Errorf("%w: %s is outside the repository %s", errNoIndex, dir, repo)
	}
	for _, p := range paths {
		abs := repo + "/" + p
		if !pathguard.Within(abs, dir) {
			continue
		}
		if err := entry(abs); err != nil {
			return err
		}
	}
	return nil
}
