// Package autonomy implements the Autonomy hook: an AutonomyPolicy's rules
// (mode, workspace-only paths, forbidden path globs, shell gating and the
// shell allow-list). Every path-bearing argument is resolved symlink-safely
// against the workspace, read-only mode treats unknown tools as mutating,
// and shell commands are parsed rather than matched as text.
//
// The package is split by concern: autonomy.go holds the configuration and
// the rules' order, globs.go the forbidden-path glob compiler and matcher,
// paths.go the path checks, protected.go the protected paths (the default
// set and what writes), shell.go the shell checks, readonly.go the
// read-only tool tables, runtime.go the checks of a running tool, and
// validate.go the pure validation and Build.
//
// # Decisions
//
//   - Mode: "full", "supervised" and "readonly", case-insensitive; empty means
//     full. "supervised" enforces exactly what "full" does: approval prompts are
//     the gateway's concern, not a before-hook's.
//   - Read-only: the known mutating tools and action-dependent tools (read-only
//     only for a known read-only action; a non-string action denies), a known
//     read-only list (read_file, list_dir, glob, grep, search, web_search; not
//     web_fetch, since a GET can change remote state), and every other tool is
//     mutating unless Config.ReadOnlyTools names it. ReadOnlyTools cannot make a
//     known mutating tool read-only.
//   - Shell tools are "shell" and "bash" (argument "command", also "cmd" and
//     "script" when present). "code_exec" runs code in another language that
//     cannot be parsed: it is denied when shell is disabled and, when enabled,
//     allowed only if the allow-list is exactly ["*"].
//   - Shell allow-list patterns match a command's canonical text (see
//     shellcheck.Command.Text) with their own syntax: `*` matches any run of
//     characters including `/` and spaces, `?` one character, `\` escapes;
//     nothing else is special. So `git *` allows `git log --oneline src/x.go`
//     and `ls *` does not allow a bare `ls` (list both). Every simple command,
//     including wrappers and the commands they run (`sudo rm x` needs both
//     `sudo *` and `rm *`), must match.
//   - With an allow-list other than exactly ["*"] only statically known
//     scripts pass: variables, substitutions used as words, arithmetic,
//     assignments, eval/source, xargs, find -exec, sh -c with a dynamic string
//     and similar constructs are "shellUnverifiable". With ["*"] they are
//     allowed, and the path checks below still apply to every word that is
//     known.
//   - Every literal argument word (not only those containing `/`, or starting
//     with `.` or `~`), the values inside name=value, --opt=value, -o/path,
//     @file and file:// words, glob expansions, and every redirection target
//     are resolved against the tool's working directory (or the workspace) and
//     each cd/pushd target, and checked like file paths. Bare words are
//     included because an existing symlink in the workspace is named by a bare
//     word; a consequence is that a word equal to a forbidden name (grep
//     secret ...) is denied. /dev/null, /dev/zero, /dev/random and
//     /dev/urandom are exempt from the workspace check, and so are, in a
//     shell word, the command's own streams (/dev/tty, /dev/std{in,out,err},
//     /dev/fd/0 to 2). Any other path through a process's /proc directory
//     (/dev/fd/N, /proc/self/fd/N, /proc/<pid>/root, links to them) and, for
//     a file tool, /dev/tty name no file the check can see and are denied.
//   - Shell commands are read as the shells read them: a here-document whose
//     delimiter is quoted in any part is literal; a pattern component that
//     does not start with a dot matches no name that does unless the
//     command line may turn on dotglob; ls -R (without -L) and git read the
//     symlinks beneath their operands as links; a git diff of the work tree
//     against the index reads only the files the index holds; a plain value
//     for a build switch or locale (CGO_ENABLED=0 go build) is verifiable;
//     cd, pushd and popd need no allow-list entry (their targets are checked
//     and become the base of later words); go's -gcflags, -asmflags and
//     -ldflags lists are read as option lists (their files checked, flags
//     not known unverifiable, the linker's -extld and -extar risky).
//   - apply_patch texts are read in every header form an applier acts on
//     (see pathguard.PatchPaths); a patch whose names do not read is denied.
//   - Forbidden globs (doublestar) are matched, for each path, against the raw
//     value, its lexical absolute form and its real path, and also against
//     their ancestors (a forbidden directory forbids its contents). An
//     absolute pattern is used as written (and, when it lies under the
//     configured root, also re-rooted at the root's real path); a pattern
//     starting with ** is used as written; a relative pattern without a slash
//     (".env", "*.pem", "secret*") matches that name in any directory; a
//     relative pattern with a slash is anchored at the workspace root.
//   - Protected paths (protected.go): DefaultProtected, less the entries a
//     policy lifts, plus the globs it adds, may not be written (created,
//     renamed over, removed) by any tool or shell line, nor opened for
//     writing at run time; reading them stays allowed. A path is taken as
//     written by every tool but the read-only ones (a shell tool's cwd
//     aside), by every output redirection, and by every word of a command
//     not known to only read what it names (readerCommands without risky
//     options; git with a reading subcommand). `git config` that sets a
//     value writes the repository's (or the global) configuration without
//     naming it and is denied while that entry is protected. A written
//     path that cannot be resolved is denied. With only protected paths
//     (no workspace-only, no forbidden globs) a line that writes nothing
//     reads no paths for the deny rules.
//   - Case: when the workspace's file system is detected as case-insensitive
//     (pathguard probes it), paths and patterns are case-folded before
//     matching. Resolution itself returns the spelling given for existing
//     names on such file systems, so folding is what closes case games.
package autonomy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// Rule names reported in verdicts.
const (
	RuleToolDeny          = "toolDeny"
	RuleToolAllow         = "toolAllow"
	RuleReadOnly          = "readOnly"
	RuleWorkspaceOnly     = "workspaceOnly"
	RuleForbiddenPaths    = "forbiddenPathGlobs"
	RuleShellDisabled     = "shellDisabled"
	RuleShellAllowList    = "shellAllowList"
	RuleShellUnverifiable = "shellUnverifiable"
	RuleInvalidArguments  = "invalidArguments"
)

// Modes.
const (
	ModeFull       = "full"
	ModeSupervised = "supervised"
	ModeReadOnly   = "readonly"
)

// DefaultName is the hook name used when Config.Name is empty.
const DefaultName = "autonomy"

// Config is an AutonomyPolicy's compiled spec: what the controller pushes to
// gateways (as JSON) and what the hook is built from.
type Config struct {
	// Name is the hook name reported in denials (DefaultName when empty); it
	// is the entry's name, not part of the spec.
	Name string `json:"-"`
	// Mode is full, supervised or readonly (case-insensitive; empty = full).
	Mode string `json:"mode,omitempty"`
	// WorkspaceRoot is the absolute workspace directory; relative paths
	// resolve against it. Required by New when WorkspaceOnly,
	// ForbiddenPathGlobs or AllowShell is set. In a pushed spec it is
	// optional: Build uses the gateway's workspace, and a root that names
	// another directory makes the policy unenforceable there.
	WorkspaceRoot string `json:"workspaceRoot,omitempty"`
	// WorkspaceOnly requires every path to resolve inside the workspace.
	WorkspaceOnly bool `json:"workspaceOnly,omitempty"`
	// ForbiddenPathGlobs are doublestar patterns no path may match.
	ForbiddenPathGlobs []string `json:"forbiddenPathGlobs,omitempty"`
	// AllowShell enables the shell tools.
	AllowShell bool `json:"allowShell,omitempty"`
	// AllowedShellCommands are command patterns (see the package doc); ["*"]
	// allows every command, empty allows none.
	AllowedShellCommands []string `json:"allowedShellCommands,omitempty"`
	// ShellDialects are the shell languages every command is read in
	// ("bash", "posix"); empty means both. A command is denied when any
	// reading breaks the policy or cannot be parsed.
	ShellDialects []string `json:"shellDialects,omitempty"`
	// ToolAllow are doublestar patterns of allowed tool names; empty allows all.
	ToolAllow []string `json:"toolAllow,omitempty"`
	// ToolDeny are doublestar patterns of denied tool names (case-insensitive); deny wins.
	ToolDeny []string `json:"toolDeny,omitempty"`
	// ReadOnlyTools are extra tool names treated as read-only in readonly mode.
	ReadOnlyTools []string `json:"readOnlyTools,omitempty"`
	// PathArgs are extra path-bearing argument names per tool (they extend
	// pathguard.DefaultPathKeys).
	PathArgs map[string][]string `json:"pathArgs,omitempty"`
	// Subjects selects the calls the policy binds; empty binds every call.
	// A call it does not bind is allowed by Before, by the run-time checks
	// and by DeniesOutright alike.
	Subjects hooks.Subjects `json:"subjects,omitzero"`
	// Ask names the calls that need a person's approval once every rule
	// above allowed them.
	Ask *AskConfig `json:"ask,omitempty"`
	// ProtectedPaths changes the default protected set (DefaultProtected),
	// which applies when it is nil: writes to those paths are denied.
	ProtectedPaths *ProtectedConfig `json:"protectedPaths,omitempty"`
}

// AskConfig names the calls that need a person's approval: by tool name, by
// a path they touch, or by a shell command they run. Paths and commands are
// found exactly as the deny rules find them (resolved paths, glob
// expansions, every reading of a shell command), and a shell command that
// cannot be read statically asks whenever Commands is set.
type AskConfig struct {
	// Tools are doublestar patterns of tool names (case-insensitive).
	Tools []string `json:"tools,omitempty"`
	// PathGlobs are doublestar path patterns, anchored like ForbiddenPathGlobs.
	PathGlobs []string `json:"pathGlobs,omitempty"`
	// Commands are shell command patterns (MatchCommand syntax).
	Commands []string `json:"commands,omitempty"`
	// ExpirySeconds bounds the request for approval (0: the default).
	ExpirySeconds int64 `json:"expirySeconds,omitempty"`
}

// Rules of the verdicts that ask for approval.
const (
	RuleAskTools     = "askTools"
	RuleAskPathGlobs = "askPathGlobs"
	RuleAskCommands  = "askCommands"
	// RuleAskUnchecked asks because the ask rules could not be checked.
	RuleAskUnchecked = "askUnchecked"
)

// Hook is the Autonomy hook. It is immutable after New and safe for concurrent use.
type Hook struct {
	name          string
	readOnly      bool
	workspaceOnly bool
	allowShell    bool
	allowAll      bool
	res           *pathguard.Resolver // nil when no workspace root is configured
	root, real    string              // the workspace root and its real path ("" without one)
	forbidden     []forbiddenGlob
	// protected are the globs no path written may match (exact forms, see
	// ProtectedEntry); protectsGitConfig the git configuration entries
	// among them, which `git config` writes without naming them.
	protected         []forbiddenGlob
	protectsGitConfig []string
	allowGitPrograms  bool
	shellAllow        []string
	toolAllow         []string
	toolDeny          []string
	readOnlyTools     map[string]bool
	pathArgs          map[string][]string
	fold              bool
	dialects          shellcheck.Dialect
	names             []string              // exact tool names the configuration names
	subjects          *hooks.SubjectMatcher // nil binds every call
	// The ask rules (see askState): asks is set when there is any.
	asks        bool
	askTools    []toolPattern
	askPaths    []forbiddenGlob
	askCommands []string
	askExpiry   time.Duration
}

// New returns the Autonomy hook of cfg. Errors wrap hooks.ErrInvalidGlob,
// hooks.ErrInvalidPath or hooks.ErrInvalidSpec and name the offending value.
func New(cfg Config) (*Hook, error) {
	h := &Hook{}
	if cfg.WorkspaceRoot != "" || needsRoot(cfg) {
		if err := checkRoot(cfg.WorkspaceRoot); err != nil {
			return nil, err
		}
		r, err := pathguard.NewResolver(cfg.WorkspaceRoot)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", hooks.ErrInvalidPath, err)
		}
		h.res = r
		h.root, h.real, h.fold = r.Root, r.Real, r.CaseInsensitive
	}
	if err := h.compile(cfg); err != nil {
		return nil, err
	}
	return h, nil
}

// needsRoot reports whether cfg checks paths or shell commands, which resolve
// against a workspace root.
func needsRoot(cfg Config) bool {
	return cfg.WorkspaceOnly || len(cfg.ForbiddenPathGlobs) > 0 || cfg.AllowShell ||
		(cfg.Ask != nil && (len(cfg.Ask.PathGlobs) > 0 || len(cfg.Ask.Commands) > 0))
}

// checkRoot checks a workspace root without touching the file system.
func checkRoot(root string) error {
	switch {
	case root == "":
		return fmt.Errorf("%w: workspace root is required for workspace-only, forbidden paths or shell", hooks.ErrInvalidPath)
	case strings.IndexByte(root, 0) >= 0:
		return fmt.Errorf("%w: workspace root contains a NUL byte", hooks.ErrInvalidPath)
	case !filepath.IsAbs(root):
		return fmt.Errorf("%w: workspace root %q is not an absolute path", hooks.ErrInvalidPath, root)
	}
	return nil
}

// compile fills h from cfg. It touches no file system: the workspace root,
// when there is one, is h.root (and its real path h.real) already.
func (h *Hook) compile(cfg Config) error {
	h.name, h.workspaceOnly, h.allowShell = cfg.Name, cfg.WorkspaceOnly, cfg.AllowShell
	if h.name == "" {
		h.name = DefaultName
	}
	m, err := hooks.NewSubjectMatcher(cfg.Subjects)
	if err != nil {
		return err
	}
	h.subjects = m
	switch strings.ToLower(cfg.Mode) {
	case "", ModeFull, ModeSupervised:
	case ModeReadOnly:
		h.readOnly = true
	default:
		return fmt.Errorf("mode %q (want full, supervised or readonly): %w", cfg.Mode, hooks.ErrInvalidSpec)
	}
	for _, p := range cfg.ToolAllow {
		if !doublestar.ValidatePattern(p) {
			return fmt.Errorf("toolAllow pattern %q: %w", p, hooks.ErrInvalidGlob)
		}
		h.toolAllow = append(h.toolAllow, p)
	}
	for _, p := range cfg.ToolDeny {
		if !doublestar.ValidatePattern(p) {
			return fmt.Errorf("toolDeny pattern %q: %w", p, hooks.ErrInvalidGlob)
		}
		h.toolDeny = append(h.toolDeny, strings.ToLower(p))
	}
	for _, p := range cfg.ForbiddenPathGlobs {
		g, err := h.compileForbidden(p)
		if err != nil {
			return err
		}
		h.forbidden = append(h.forbidden, g)
	}
	if err := h.compileProtected(cfg.ProtectedPaths); err != nil {
		return err
	}
	for _, p := range cfg.AllowedShellCommands {
		if err := checkCommandPattern("allowedShellCommands", p); err != nil {
			return err
		}
		h.shellAllow = append(h.shellAllow, p)
	}
	for _, d := range cfg.ShellDialects {
		one, err := shellcheck.ParseDialect(d)
		if err != nil {
			return fmt.Errorf("shell dialects: %w: %w", hooks.ErrInvalidSpec, err)
		}
		h.dialects |= one
	}
	if h.dialects == 0 {
		h.dialects = shellcheck.AllDialects
	}
	h.allowAll = len(cfg.AllowedShellCommands) == 1 && cfg.AllowedShellCommands[0] == "*"
	if len(cfg.ReadOnlyTools) > 0 {
		h.readOnlyTools = make(map[string]bool, len(cfg.ReadOnlyTools))
		for _, t := range cfg.ReadOnlyTools {
			h.readOnlyTools[strings.ToLower(t)] = true
		}
	}
	if len(cfg.PathArgs) > 0 {
		h.pathArgs = make(map[string][]string, len(cfg.PathArgs))
		for t, keys := range cfg.PathArgs {
			h.pathArgs[strings.ToLower(t)] = append([]string(nil), keys...)
		}
	}
	h.names = exactNames(cfg)
	return h.compileAsk(cfg)
}

// checkCommandPattern rejects a shell command pattern (MatchCommand syntax)
// that ends with a lone backslash.
func checkCommandPattern(field, p string) error {
	if strings.HasSuffix(strings.ReplaceAll(p, `\\`, ""), `\`) {
		return fmt.Errorf("%s pattern %q ends with a lone backslash: %w", field, p, hooks.ErrInvalidGlob)
	}
	return nil
}

// compileAsk compiles cfg.Ask: tool patterns as toolDeny's, path globs as
// forbiddenPathGlobs', matched by the deny pass on the paths and commands
// it finds (see askState).
func (h *Hook) compileAsk(cfg Config) error {
	ask := cfg.Ask
	if ask == nil || len(ask.Tools)+len(ask.PathGlobs)+len(ask.Commands) == 0 {
		return nil
	}
	if ask.ExpirySeconds < 0 || ask.ExpirySeconds > int64(hooks.MaxApprovalExpiry/time.Second) {
		return fmt.Errorf("ask expiry %ds must be between 0 and %s: %w", ask.ExpirySeconds, hooks.MaxApprovalExpiry, hooks.ErrInvalidSpec)
	}
	for _, p := range ask.Commands {
		if err := checkCommandPattern("ask commands", p); err != nil {
			return err
		}
	}
	for _, p := range ask.Tools {
		if !doublestar.ValidatePattern(p) {
			return fmt.Errorf("ask: toolDeny pattern %q: %w", p, hooks.ErrInvalidGlob)
		}
		lower := strings.ToLower(p)
		h.askTools = append(h.askTools, toolPattern{glob: lower, prefix: literalPrefix(lower)})
	}
	for _, p := range ask.PathGlobs {
		g, err := h.compileForbidden(p)
		if err != nil {
			return fmt.Errorf("ask: %w", err)
		}
		h.askPaths = append(h.askPaths, g)
	}
	h.askCommands = slices.Clone(ask.Commands)
	h.asks, h.askExpiry = true, time.Duration(ask.ExpirySeconds)*time.Second
	return nil
}

// exactNames are the tool names (not globs) cfg names.
func exactNames(cfg Config) []string {
	pathArgTools := make([]string, 0, len(cfg.PathArgs))
	for t := range cfg.PathArgs {
		pathArgTools = append(pathArgTools, t)
	}
	return hooks.ExactToolNames(cfg.ToolAllow, cfg.ToolDeny, cfg.ReadOnlyTools, pathArgTools)
}

// compileForbidden turns one configured pattern into the absolute patterns

// Name returns the hook's name.
func (h *Hook) Name() string { return h.name }

// Subjects returns the policy's subjects (nil binds every call).
func (h *Hook) Subjects() *hooks.SubjectMatcher { return h.subjects }

// After does nothing: the Autonomy hook only decides before a call.
func (h *Hook) After(context.Context, *hooks.Call, *hooks.Result) {}

// Before allows a call the subjects do not bind, and applies the rules in
// order to one they bind; the first denial wins. A call every rule allows
// is asked about when an ask rule names it.
func (h *Hook) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !h.subjects.Matches(call) {
		return hooks.Allow, nil
	}
	if !h.asks {
		return h.check(ctx, call, nil), nil
	}
	var st askState
	v := h.check(ctx, call, &st)
	if v.Allowed && st.found {
		return h.askVerdict(st.match), nil
	}
	return v, nil
}

// askState is what the ask rules found in one call, while the deny rules
// walk it: the ask rules see every path and command the deny rules see, in
// the same order, at no cost beyond matching them. The first match is kept
// as the denial the ask rules would give if they were deny rules (toolDeny,
// forbiddenPathGlobs, askCommands, or the denial of a path or command that
// cannot be checked), which askVerdict turns into the verdict that asks;
// it asks only when no deny rule denies the call.
//
// Where the deny rules read no paths (neither workspaceOnly nor forbidden
// globs) the paths are read for the ask rules alone, with only set: a path
// that cannot be resolved or a glob that cannot be expanded then asks
// (askUnchecked) instead of denying, and the first match ends that walk.
type askState struct {
	found bool
	only  bool          // the paths walked are read for the ask rules alone
	match hooks.Verdict // the first match, as a denial
}

// open reports whether st still looks for a match: a nil st is a policy
// without ask rules.
func (st *askState) open() bool { return st != nil && !st.found }

// set keeps d as the match unless there is one already.
func (st *askState) set(d hooks.Verdict) {
	if !st.found {
		st.found, st.match = true, d
	}
}

// askingPaths reports whether the ask path globs still look for a match.
func (h *Hook) askingPaths(st *askState) bool { return st.open() && len(h.askPaths) > 0 }

// toolPattern is a lower-case tool name pattern with the literal text every
// name it matches starts with (see literalPrefix).
type toolPattern struct {
	glob, prefix string
}

// askTool matches the lower-case tool name against the ask tool patterns.
func (h *Hook) askTool(tool, lower string, st *askState) {
	for _, p := range h.askTools {
		if strings.HasPrefix(lower, p.prefix) && doublestar.MatchUnvalidated(p.glob, lower) {
			st.set(hooks.Deny(RuleToolDeny, fmt.Sprintf("Tool %q matches the denied tool pattern %q.", tool, p.glob)))
			return
		}
	}
}

// askVerdict turns the denial an ask rule matched with (see askState)
// into the verdict that asks.
func (h *Hook) askVerdict(d hooks.Verdict) hooks.Verdict {
	rule := RuleAskUnchecked
	switch d.Rule {
	case RuleToolDeny:
		rule = RuleAskTools
	case RuleForbiddenPaths:
		rule = RuleAskPathGlobs
	case RuleAskCommands:
		rule = RuleAskCommands
	}
	reason := strings.NewReplacer("forbidden path glob", "path glob that needs approval",
		"denied tool pattern", "tool pattern that needs approval").Replace(d.Reason)
	return hooks.AskFor(rule, reason, h.askExpiry)
}

// check applies the rules in order; the first denial wins. With st, the
// ask rules are matched along the way (see askState).
func (h *Hook) check(ctx context.Context, call *hooks.Call, st *askState) hooks.Verdict {
	tool := call.Tool
	lower := strings.ToLower(tool)
	if v, ok := h.checkToolGlobs(tool, lower); !ok {
		return v
	}
	if st.open() {
		h.askTool(tool, lower, st)
	}
	shellKind := shellClass(lower, call.Args)
	if h.readOnly {
		if v, ok := h.checkReadOnly(tool, lower, call); !ok {
			return v
		}
	}
	// writes: the call's paths may be written (protected paths are checked
	// for it): any tool but a read-only one, and not a shell tool's cwd.
	writes := h.res != nil && len(h.protected) > 0 && shellKind == notShell && !readOnlyTools[lower] && !h.readOnlyTools[lower]
	pathChecks := h.workspaceOnly || len(h.forbidden) > 0 || writes
	// denyReads: the deny rules read the call's paths (and their failures
	// deny); else only the ask rules may read them.
	denyReads := pathChecks || shellKind != notShell
	if call.ArgsErr != nil && (denyReads || h.askingPaths(st)) {
		v := hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
			"The arguments of %q are not one JSON object (%v), so its paths and commands cannot be checked.", tool, call.ArgsErr))
		if denyReads {
			return v
		}
		st.set(v)
	}
	m := pathguard.MemoFrom(ctx)
	var bases []string
	if denyReads || h.askingPaths(st) {
		var v hooks.Verdict
		var ok bool
		if bases, v, ok = h.checkCallPaths(m, call, lower, shellKind, denyReads, writes, st); !ok {
			return v
		}
	}
	if (pathChecks || h.askingPaths(st)) && strings.EqualFold(tool, "apply_patch") {
		// The files a patch names are paths too, as the Contract hook reads them.
		if v := h.checkPatch(m, call, lower, !pathChecks, st); !v.Allowed {
			if pathChecks {
				return v
			}
			st.set(v)
		}
	}
	if shellKind != notShell {
		return h.checkShell(m, tool, shellKind, call, bases, st)
	}
	return hooks.Allow
}

// checkCallPaths checks the paths in the call's arguments and returns
// those that are a shell tool's cwd, resolved. With denyReads a failure
// denies the call (ok false); else it only feeds the ask rules.
func (h *Hook) checkCallPaths(m *pathguard.Memo, call *hooks.Call, lower string, kind shellKind, denyReads, writes bool,
	st *askState) (bases []string, v hooks.Verdict, ok bool) {
	paths, err := pathguard.Extract(call.Tool, call.Args, h.pathArgs[lower])
	if err != nil {
		v := hooks.Deny(RuleInvalidArguments, fmt.Sprintf("The arguments of %q cannot be checked: %v.", call.Tool, err))
		if denyReads {
			return nil, v, false
		}
		st.set(v)
		paths = nil
	}
	st.walkOnly(!denyReads)
	for _, p := range paths {
		real, v, ok := h.checkPath(m, p, "", st, "", writes)
		if !ok {
			if denyReads {
				return nil, v, false
			}
			st.set(v)
			break
		}
		if kind != notShell && isCwdKey(call.Args, p) {
			bases = append(bases, real)
		}
	}
	st.walkOnly(false)
	return bases, hooks.Allow, true
}

// checkPatch checks the files an apply_patch call's patch texts name; with
// askOnly, for the ask rules alone.
func (h *Hook) checkPatch(m *pathguard.Memo, call *hooks.Call, lower string, askOnly bool, st *askState) hooks.Verdict {
	st.walkOnly(askOnly)
	defer st.walkOnly(false)
	for k, v := range call.Args {
		text, ok := v.(string)
		if !ok || pathguard.IsPathKey(k, h.pathArgs[lower]) {
			continue
		}
		files, err := pathguard.PatchPaths(text)
		if err != nil {
			return hooks.Deny(RuleInvalidArguments, fmt.Sprintf("The patch in argument %q of %q cannot be checked: %v.", k, call.Tool, err))
		}
		for _, p := range files {
			if _, v, ok := h.checkPath(m, p, "", st, "", true); !ok {
				return v
			}
		}
	}
	return hooks.Allow
}

// walkOnly marks the paths walked next as read for the ask rules alone
// (see askState), or no longer.
func (st *askState) walkOnly(only bool) {
	if st != nil {
		st.only = only
	}
}

func (h *Hook) checkToolGlobs(tool, lower string) (hooks.Verdict, bool) {
	for _, p := range h.toolDeny {
		if doublestar.MatchUnvalidated(p, lower) {
			return hooks.Deny(RuleToolDeny, fmt.Sprintf("Tool %q matches the denied tool pattern %q.", tool, p)), false
		}
	}
	if len(h.toolAllow) == 0 {
		return hooks.Allow, true
	}
	for _, p := range h.toolAllow {
		if doublestar.MatchUnvalidated(p, tool) {
			return hooks.Allow, true
		}
	}
	return hooks.Deny(RuleToolAllow, fmt.Sprintf("Tool %q matches none of the allowed tool patterns.", tool)), false
}
