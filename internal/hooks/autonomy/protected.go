package autonomy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// RuleProtectedPaths is the rule of a write to a protected path.
const RuleProtectedPaths = "protectedPaths"

// ProtectedEntry is one entry of the default protected set: configuration
// that makes a program the policy allows run another program, which no tool
// and no program a tool starts may write unless the policy lifts the entry.
type ProtectedEntry struct {
	// Name is what a policy's protectedPaths.lift names.
	Name string
	// Globs are doublestar patterns matched as written (a name without a
	// slash in any directory): "dir/**" covers a directory, its contents
	// and entries created in it; a pattern without "/**" covers that path
	// alone, so "**/.git" protects the .git entry (a gitdir: file planted
	// in its place, its removal or renaming) and not the repository's
	// objects, index and refs.
	Globs []string
	// Reason says in one line what writing it would let a program run.
	Reason string
}

// DefaultProtected is the default protected set, in the order the CRD
// reference lists it. It is the one place that names these paths.
var DefaultProtected = []ProtectedEntry{
	{Name: ".git", Globs: []string{"**/.git"},
		Reason: "a .git file (gitdir: elsewhere) or a new .git directory points git at another repository's configuration and hooks"},
	{Name: ".git/config", Globs: []string{"**/.git/config", "**/.git/config.worktree",
		"**/.git/worktrees/*/config.worktree", "**/.git/modules/**/config", "**/.git/modules/**/config.worktree"},
		Reason: "names programs git runs (core.fsmonitor, diff.external, filter and textconv drivers, core.sshCommand, " +
			"credential helpers, aliases) and core.hooksPath"},
	{Name: ".git/hooks", Globs: []string{"**/.git/hooks/**", "**/.git/modules/**/hooks/**"},
		Reason: "scripts git runs on commit, checkout, merge, rebase and push"},
	{Name: ".git/info", Globs: []string{"**/.git/info/**", "**/.git/modules/**/info/attributes"},
		Reason: "info/attributes assigns diff, filter and merge drivers as .gitattributes does"},
	{Name: ".git/commondir", Globs: []string{"**/.git/commondir", "**/.git/worktrees/*/commondir", "**/.git/modules/**/commondir"},
		Reason: "points git at another repository's configuration and hooks"},
	{Name: ".git/objects/info/alternates", Globs: []string{"**/.git/objects/info/alternates", "**/.git/modules/**/objects/info/alternates"},
		Reason: "makes git read objects from directories outside the repository"},
	{Name: ".gitattributes", Globs: []string{".gitattributes"},
		Reason: "assigns the diff (textconv), filter (clean, smudge) and merge drivers git runs"},
	{Name: ".gitmodules", Globs: []string{".gitmodules"},
		Reason: "submodule URLs and update commands (update = !command) git clones and runs"},
	{Name: ".gitconfig", Globs: []string{".gitconfig", "**/.config/git/**", "/etc/gitconfig"},
		Reason: "global and system git configuration (and the usual target of a repository's include.path), with the keys of .git/config"},
	{Name: ".envrc", Globs: []string{".envrc"},
		Reason: "direnv runs it as shell code whenever a shell enters the directory"},
	{Name: ".cargo/config", Globs: []string{"**/.cargo/config", "**/.cargo/config.toml"},
		Reason: "sets cargo's rustc wrapper, linker, runners and aliases"},
	{Name: ".npmrc", Globs: []string{".npmrc"},
		Reason: "sets npm's script-shell, node-options and the registry packages (and their install scripts) come from"},
	{Name: ".yarnrc", Globs: []string{".yarnrc", ".yarnrc.yml"},
		Reason: "yarn-path / yarnPath names the program yarn runs in its place"},
	{Name: ".pre-commit-config.yaml", Globs: []string{".pre-commit-config.yaml"},
		Reason: "names the commands pre-commit runs from git hooks"},
	{Name: ".husky", Globs: []string{"**/.husky/**"},
		Reason: "scripts husky installs as git hooks"},
}

// ProtectedConfig changes the default protected set for one policy.
type ProtectedConfig struct {
	// Add are extra doublestar globs protected like the default set
	// (matched as written, anchored like ForbiddenPathGlobs).
	Add []string `json:"add,omitempty"`
	// Lift names DefaultProtected entries this policy does not protect.
	Lift []string `json:"lift,omitempty"`
	// AllowGitPrograms lets git, in the programs the tools start, run the
	// programs its configuration names (see the progenv package).
	AllowGitPrograms bool `json:"allowGitPrograms,omitempty"`
}

// compileProtected compiles the default set without the lifted entries,
// then the added globs, as exact (ancestor-free) globs.
func (h *Hook) compileProtected(pc *ProtectedConfig) error {
	var lift []string
	if pc != nil {
		lift = pc.Lift
		h.allowGitPrograms = pc.AllowGitPrograms
	}
	for _, n := range lift {
		if !slices.ContainsFunc(DefaultProtected, func(e ProtectedEntry) bool { return e.Name == n }) {
			return fmt.Errorf("protectedPaths.lift names %q, which is not an entry of the default set (%s): %w",
				n, strings.Join(defaultNames(), ", "), hooks.ErrInvalidSpec)
		}
	}
	for _, e := range DefaultProtected {
		if slices.Contains(lift, e.Name) {
			continue
		}
		if e.Name == gitConfigEntry || e.Name == globalGitConfigEntry {
			h.protectsGitConfig = append(h.protectsGitConfig, e.Name)
		}
		for _, p := range e.Globs {
			g, err := h.compileGlob("protectedPaths", p, true)
			if err != nil {
				return err
			}
			g.entry = e.Name
			h.protected = append(h.protected, g)
		}
	}
	if pc == nil {
		return nil
	}
	for _, p := range pc.Add {
		g, err := h.compileGlob("protectedPaths.add", p, true)
		if err != nil {
			return err
		}
		h.protected = append(h.protected, g)
	}
	return nil
}

// The entries whose files `git config` writes.
const (
	gitConfigEntry       = ".git/config"
	globalGitConfigEntry = ".gitconfig"
)

func defaultNames() []string {
	names := make([]string, len(DefaultProtected))
	for i, e := range DefaultProtected {
		names[i] = e.Name
	}
	return names
}

// protectedDenial is the denial of writing path p (real path real), which
// matches the protected glob g.
func protectedDenial(p, real string, g *forbiddenGlob) hooks.Verdict {
	what := fmt.Sprintf("the protected path glob %q", g.pattern)
	lift := "protectedPaths.add"
	if g.entry != "" {
		what += fmt.Sprintf(" (default entry %q)", g.entry)
		lift = fmt.Sprintf("protectedPaths.lift: [%q]", g.entry)
	}
	return hooks.Deny(RuleProtectedPaths, fmt.Sprintf(
		"Path %q (real path %q) would be written and matches %s: configuration that makes programs run other programs "+
			"is read-only unless the policy lifts it (%s).",
		p, real, what, lift))
}

// readerCommands are programs that open their operands for reading only
// when they use none of their catalogued risky options (shellcheck's
// Command.Risky): a protected path they name is read, not written. Every
// other program may write what it names.
var readerCommands = set("cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag",
	"wc", "diff", "cmp", "ls", "stat", "file", "md5sum", "sha1sum", "sha256sum", "sha512sum", "b2sum",
	"cksum", "od", "hexdump", "strings", "nl", "du", "find", "realpath", "readlink", "basename",
	"dirname", "echo", "printf", "test", "[", "true", "false", "jq", "sed", "awk", "gawk", "mawk", gitName)

// gitReaders are git subcommands that read the work-tree files they name
// (add and commit write the index and objects, not the files).
var gitReaders = set("add", "stage", "commit", "status", "log", "diff", "show", "blame", "annotate", "grep", "ls-files", "ls-tree",
	"cat-file", "rev-parse", "rev-list", "describe", "shortlog", "check-attr", "check-ignore", "show-ref",
	"for-each-ref", "name-rev", "merge-base", "count-objects", "whatchanged", "diff-tree", "diff-files",
	"diff-index", "range-diff", "help", "version", "var")

// gitGlobalValueOpts are git's global options whose value is the next argument.
var gitGlobalValueOpts = set("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
	"--config-env", "--attr-source", "--exec-path")

// wordWrites reports whether the command a shell word belongs to may write
// the file it names: every command of that name in the line must be a
// reader (readerCommands without risky options; git with a reading
// subcommand) for it not to. Only asked for a word that names a protected
// path.
func wordWrites(an *shellcheck.Analysis, name string) bool {
	base := path.Base(name)
	if !readerCommands[base] {
		return true
	}
	for i := range an.Commands {
		c := &an.Commands[i]
		if c.Name != name {
			continue
		}
		if len(c.Risky) > 0 || c.Dynamic {
			return true
		}
		if base == gitName && !gitReaders[gitSubcommand(c.Args)] {
			return true
		}
	}
	return false
}

// writesAny reports whether an analysed line may write a path it names:
// a redirection to a file or a word of a command that may write.
func writesAny(an *shellcheck.Analysis) bool {
	for i := range an.Redirects {
		if strings.IndexByte(an.Redirects[i].Op, '>') >= 0 {
			return true
		}
	}
	for i := range an.Words {
		if wordWrites(an, an.Words[i].Command) {
			return true
		}
	}
	return false
}

// gitSubcommand returns git's subcommand in args (after its global
// options), or "".
func gitSubcommand(args []string) string {
	sub, _ := gitSplit(args)
	return sub
}

// gitSplit returns git's subcommand and the arguments after it.
func gitSplit(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case gitGlobalValueOpts[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a, args[i+1:]
		}
	}
	return "", nil
}

// gitConfigWrite returns the default entry whose file a `git config`
// command line writes ("" when it only reads, or writes a file it names
// with --file, which is checked as a word).
func gitConfigWrite(args []string) string {
	sub, rest := gitSplit(args)
	if sub != "config" {
		return ""
	}
	entry, read, operands := gitConfigEntry, false, 0
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "-f" || a == "--blob" || strings.HasPrefix(a, "--file") || strings.HasPrefix(a, "--blob="):
			return ""
		case a == "--global":
			entry = globalGitConfigEntry
		case a == "--system":
			entry = globalGitConfigEntry // /etc/gitconfig, in the same entry
		case strings.HasPrefix(a, "--get") || a == "-l" || a == "--list":
			read = true
		case a == "--add" || strings.HasPrefix(a, "--unset") || strings.HasPrefix(a, "--replace-all") ||
			strings.HasPrefix(a, "--rename-section") || strings.HasPrefix(a, "--remove-section") ||
			a == "-e" || a == "--edit":
			return entry
		case a == "--type" || a == "--default" || a == "--comment":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			operands++
			if operands == 1 {
				switch a {
				case "set", "unset", "rename-section", "remove-section", "edit":
					return entry
				case "get", "list":
					read = true
				}
			}
		}
	}
	if read || operands < 2 {
		return ""
	}
	return entry
}

// checkGitConfig denies a `git config` that writes a protected git
// configuration file: it names no path, so the path rules cannot see it.
func (h *Hook) checkGitConfig(an *shellcheck.Analysis, cmd string) hooks.Verdict {
	for i := range an.Commands {
		c := &an.Commands[i]
		if path.Base(c.Name) != gitName {
			continue
		}
		if e := gitConfigWrite(c.Args); e != "" && slices.Contains(h.protectsGitConfig, e) {
			return shellVerdict(hooks.Deny(RuleProtectedPaths, fmt.Sprintf(
				"%q writes git configuration (default protected entry %q), which names programs git runs; "+
					"the policy's protectedPaths.lift: [%q] lifts it.",
				c.Text, e, e)), cmd)
		}
	}
	return hooks.Allow
}

// AllowsGitPrograms reports whether the policy binds call and lets git run
// the programs its configuration names (protectedPaths.allowGitPrograms).
func (h *Hook) AllowsGitPrograms(call *hooks.Call) (binds, allows bool) {
	if !h.subjects.Matches(call) {
		return false, false
	}
	return true, h.allowGitPrograms
}
