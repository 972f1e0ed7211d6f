// Package autonomy implements the Autonomy hook: the seed's autonomy rules
// (mode, workspace-only paths, forbidden path globs, shell gating and shell
// allow-list) with the improvements of SPEC part B: every path-bearing
// argument is resolved symlink-safely against the workspace, read-only mode
// treats unknown tools as mutating, and shell commands are parsed rather than
// matched as text.
//
// # Decisions
//
//   - Mode: "full", "supervised" and "readonly", case-insensitive; empty means
//     full. "supervised" enforces exactly what "full" does: approval prompts are
//     the gateway's concern, not a before-hook's.
//   - Read-only: the seed's mutating list and action-dependent tools (read-only
//     only for a known read-only action; a non-string action denies), a known
//     read-only list (read_file, list_dir, glob, grep, search, web_search; not
//     web_fetch, since a GET can change remote state), and every other tool is
//     mutating unless Config.ReadOnlyTools names it. ReadOnlyTools cannot make a
//     seed-mutating tool read-only.
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
//     secret ...) is denied. /dev/null, /dev/zero, /dev/random, /dev/urandom,
//     /dev/tty, /dev/std{in,out,err} and /dev/fd/N are exempt from the
//     workspace check.
//   - Forbidden globs (doublestar) are matched, for each path, against the raw
//     value, its lexical absolute form and its real path, and also against
//     their ancestors (a forbidden directory forbids its contents). An
//     absolute pattern is used as written (and, when it lies under the
//     configured root, also re-rooted at the root's real path); a pattern
//     starting with ** is used as written; a relative pattern without a slash
//     (".env", "*.pem", "secret*") matches that name in any directory; a
//     relative pattern with a slash is anchored at the workspace root.
//   - Case: when the workspace's file system is detected as case-insensitive
//     (pathguard probes it), paths and patterns are case-folded before
//     matching. Resolution itself returns the spelling given for existing
//     names on such file systems, so folding is what closes case games.
package autonomy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

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
}

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
	shellAllow    []string
	toolAllow     []string
	toolDeny      []string
	readOnlyTools map[string]bool
	pathArgs      map[string][]string
	fold          bool
	dialects      shellcheck.Dialect
	names         []string // exact tool names the configuration names
}

type forbiddenGlob struct {
	pattern string         // as configured, for messages
	forms   []compiledForm // doublestar patterns for the path itself and for what lies under it
}

// compiledForm is one doublestar pattern with the literal text every match
// starts with and a literal every match contains, so most non-matching paths
// are rejected by strings.HasPrefix and strings.Contains before doublestar
// runs.
type compiledForm struct {
	glob    string
	prefix  string
	literal string
	litSet  byteSet // the bytes of literal
}

// byteSet is a set of byte values.
type byteSet [4]uint64

// byteSetOf returns the set of the bytes of s.
func byteSetOf(s string) byteSet {
	var b byteSet
	for i := 0; i < len(s); i++ {
		b[s[i]>>6] |= 1 << (s[i] & 63)
	}
	return b
}

// covers reports whether every byte of t is in b: a string whose bytes are
// b cannot contain a string whose bytes are t otherwise.
func (b *byteSet) covers(t *byteSet) bool {
	return t[0]&^b[0] == 0 && t[1]&^b[1] == 0 && t[2]&^b[2] == 0 && t[3]&^b[3] == 0
}

// literalPrefix returns the text before the first doublestar metacharacter
// of g, without a trailing slash (doublestar matches "a/**" against "a"):
// every name matching g starts with it, since doublestar compares literal
// characters exactly.
func literalPrefix(g string) string {
	if i := strings.IndexAny(g, `*?[{\`); i >= 0 {
		return strings.TrimSuffix(g[:i], "/")
	}
	return g
}

// requiredLiteral returns the longest run of literal characters (outside
// classes and braces, without '/') that every name matching the doublestar
// pattern g contains, or "" when there is none or g uses escapes.
func requiredLiteral(g string) string {
	if strings.IndexByte(g, '\\') >= 0 {
		return ""
	}
	// Runs are cut at ASCII bytes only, so they are whole UTF-8 sequences
	// of g (converting single bytes to strings would re-encode non-ASCII
	// bytes as other characters, and the literal would never be found).
	best := ""
	start := -1 // start of the current run, -1 when none
	depth := 0
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case c == '[' && depth == 0:
			if j := strings.IndexByte(g[i+1:], ']'); j >= 0 {
				i += j + 1
			}
		case depth == 0 && c != '*' && c != '?' && c != '/' && c != ']':
			if start < 0 {
				start = i
			}
			if i+1-start > len(best) {
				best = g[start : i+1]
			}
			continue
		}
		start = -1
	}
	return best
}

var _ hooks.Hook = (*Hook)(nil)

// New validates cfg and returns the hook; it opens the workspace root.
// Errors wrap hooks.ErrInvalidGlob, hooks.ErrInvalidPath or
// hooks.ErrInvalidSpec and name the offending value.
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
	return cfg.WorkspaceOnly || len(cfg.ForbiddenPathGlobs) > 0 || cfg.AllowShell
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
	for _, p := range cfg.AllowedShellCommands {
		if strings.HasSuffix(strings.ReplaceAll(p, `\\`, ""), `\`) {
			return fmt.Errorf("allowedShellCommands pattern %q ends with a lone backslash: %w", p, hooks.ErrInvalidGlob)
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
	return nil
}

// exactNames are the tool names (not globs) cfg names.
func exactNames(cfg Config) []string {
	var out []string
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !strings.ContainsAny(n, `*?[]{}\`) {
				out = append(out, n)
			}
		}
	}
	add(cfg.ToolAllow...)
	add(cfg.ToolDeny...)
	add(cfg.ReadOnlyTools...)
	for t := range cfg.PathArgs {
		add(t)
	}
	return out
}

// compileForbidden turns one configured pattern into the absolute patterns
// matched against paths (see the package doc).
func (h *Hook) compileForbidden(p string) (forbiddenGlob, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 || !doublestar.ValidatePattern(p) {
		return forbiddenGlob{}, fmt.Errorf("forbiddenPathGlobs pattern %q: %w", p, hooks.ErrInvalidGlob)
	}
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" {
		trimmed = "/"
	}
	var forms []string
	switch {
	case strings.HasPrefix(trimmed, "/"):
		forms = append(forms, trimmed)
		if h.root != "" && h.root != h.real {
			if rel, ok := strings.CutPrefix(trimmed, h.root+"/"); ok {
				forms = append(forms, escapeGlob(h.real)+"/"+rel)
			}
		}
	case strings.HasPrefix(trimmed, "**"):
		forms = append(forms, trimmed)
	case !strings.Contains(trimmed, "/"):
		forms = append(forms, "**/"+trimmed)
	default:
		if h.root == "" {
			return forbiddenGlob{}, fmt.Errorf("forbiddenPathGlobs pattern %q is relative but no workspace root is set: %w", p, hooks.ErrInvalidPath)
		}
		forms = append(forms, escapeGlob(h.root)+"/"+trimmed)
		if h.real != h.root {
			forms = append(forms, escapeGlob(h.real)+"/"+trimmed)
		}
	}
	var all []compiledForm
	for _, f := range forms {
		if h.fold {
			f = strings.ToLower(f)
		}
		// F and "F/**": the path itself and everything under it. Both are
		// needed: doublestar does not match "a*/**" against "a".
		base := strings.TrimSuffix(f, "/**")
		if base == "/" {
			base = ""
		}
		variants := []string{base + "/**"}
		if base != "" && base != "**" {
			variants = append(variants, base)
		}
		for _, v := range variants {
			if !doublestar.ValidatePattern(v) {
				return forbiddenGlob{}, fmt.Errorf("forbiddenPathGlobs pattern %q: %w", p, hooks.ErrInvalidGlob)
			}
			lit := requiredLiteral(v)
			all = append(all, compiledForm{glob: v, prefix: literalPrefix(v), literal: lit, litSet: byteSetOf(lit)})
		}
	}
	return forbiddenGlob{pattern: p, forms: all}, nil
}

// escapeGlob escapes doublestar metacharacters in a literal path.
func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]{}\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Name returns the hook's name.
func (h *Hook) Name() string { return h.name }

// After does nothing: the Autonomy hook only decides before a call.
func (h *Hook) After(context.Context, *hooks.Call, *hooks.Result) {}

// Before applies the rules in order; the first denial wins.
func (h *Hook) Before(ctx context.Context, call *hooks.Call) (hooks.Verdict, error) {
	tool := call.Tool
	lower := strings.ToLower(tool)
	if v, ok := h.checkToolGlobs(tool, lower); !ok {
		return v, nil
	}
	shellKind := shellClass(lower, call.Args)
	if h.readOnly {
		if v, ok := h.checkReadOnly(tool, lower, call); !ok {
			return v, nil
		}
	}
	pathChecks := h.workspaceOnly || len(h.forbidden) > 0
	if call.ArgsErr != nil && (pathChecks || shellKind != notShell) {
		return hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
			"The arguments of %q are not one JSON object (%v), so its paths and commands cannot be checked.", tool, call.ArgsErr)), nil
	}
	m := pathguard.MemoFrom(ctx)
	var bases []string
	if pathChecks || shellKind != notShell {
		paths, err := pathguard.Extract(tool, call.Args, h.pathArgs[lower])
		if err != nil {
			return hooks.Deny(RuleInvalidArguments, fmt.Sprintf("The arguments of %q cannot be checked: %v.", tool, err)), nil
		}
		for _, p := range paths {
			real, v, ok := h.checkPath(m, p, "")
			if !ok {
				return v, nil
			}
			if shellKind != notShell && isCwdKey(call.Args, p) {
				bases = append(bases, real)
			}
		}
	}
	if pathChecks && strings.EqualFold(tool, "apply_patch") {
		// The files a patch names are paths too, as the Contract hook reads them.
		for k, v := range call.Args {
			text, ok := v.(string)
			if !ok || pathguard.IsPathKey(k, h.pathArgs[lower]) {
				continue
			}
			for _, p := range pathguard.PatchFiles(text) {
				if _, v, ok := h.checkPath(m, p, ""); !ok {
					return v, nil
				}
			}
		}
	}
	if shellKind != notShell {
		return h.checkShell(m, tool, shellKind, call, bases), nil
	}
	return hooks.Allow, nil
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

type shellKind = shellcheck.ToolClass

const (
	notShell     = shellcheck.NotShell
	shellTool    = shellcheck.ShellTool
	codeExecTool = shellcheck.CodeTool
)

// shellClass classifies a tool as the Contract hook does (see
// shellcheck.ClassifyTool).
func shellClass(tool string, args map[string]any) shellKind {
	return shellcheck.ClassifyTool(tool, args)
}

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
// workspaceOnly and the forbidden globs.
func (h *Hook) checkPath(m *pathguard.Memo, p, base string) (string, hooks.Verdict, bool) {
	if h.res == nil {
		return "", hooks.Allow, true
	}
	if base == "" {
		base = h.res.Real
	}
	real, err := h.res.ResolveFromMemo(m, base, p)
	if err != nil {
		return "", hooks.Deny(RuleInvalidArguments, fmt.Sprintf("Path %q cannot be resolved safely: %v.", p, err)), false
	}
	if h.workspaceOnly && !h.res.Within(real) && !safeDevice(p) {
		return "", hooks.Deny(RuleWorkspaceOnly, fmt.Sprintf(
			"Path %q resolves to %q, outside the workspace %q.", p, real, h.res.Real)), false
	}
	if len(h.forbidden) > 0 {
		if g, ok := h.matchForbidden(p, base, real); ok {
			return "", hooks.Deny(RuleForbiddenPaths, fmt.Sprintf(
				"Path %q (real path %q) matches the forbidden path glob %q.", p, real, g)), false
		}
	}
	return real, hooks.Allow, true
}

// matchForbidden matches the raw path, its lexical absolute form and its
// real path against every forbidden glob.
func (h *Hook) matchForbidden(raw, base, real string) (string, bool) {
	abs := raw
	if strings.HasPrefix(abs, "~") {
		if home, err := homeDir(); err == nil {
			abs = home + abs[1:]
		}
	}
	if !strings.HasPrefix(abs, "/") {
		abs = base + "/" + abs
	}
	abs = pathguard.Clean(abs)
	cands := [3]string{raw, abs, real}
	if h.fold {
		for i := range cands {
			cands[i] = strings.ToLower(cands[i])
		}
	}
	n := 3
	if cands[2] == cands[1] {
		n = 2
	}
	var sets [3]byteSet
	for k := range cands[:n] {
		sets[k] = byteSetOf(cands[k])
	}
	for _, g := range h.forbidden {
		// A pattern's forms mostly share their literal: search each
		// candidate for it at most once per literal, and only when the
		// cheaper prefix test passes.
		var lit string
		var litState [3]uint8 // per candidate: 0 not searched yet, 1 found, 2 absent
		for i, f := range g.forms {
			if i == 0 || f.literal != lit {
				lit, litState = f.literal, [3]uint8{}
			}
			for k, c := range cands[:n] {
				if f.prefix != "" && !strings.HasPrefix(c, f.prefix) {
					continue
				}
				if lit != "" {
					if litState[k] == 0 {
						litState[k] = 2
						if sets[k].covers(&f.litSet) && strings.Contains(c, lit) {
							litState[k] = 1
						}
					}
					if litState[k] != 1 {
						continue
					}
				}
				if doublestar.MatchUnvalidated(f.glob, c) {
					return g.pattern, true
				}
			}
		}
	}
	return "", false
}

// safeDevice reports whether p is a device file every shell uses harmlessly.
func safeDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty",
		"/dev/stdin", "/dev/stdout", "/dev/stderr":
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/dev/fd/"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		return true
	}
	return false
}

// checkShell applies the shell rules.
func (h *Hook) checkShell(m *pathguard.Memo, tool string, kind shellKind, call *hooks.Call, bases []string) hooks.Verdict {
	if !h.allowShell {
		return hooks.Deny(RuleShellDisabled, fmt.Sprintf("Tool %q is a shell tool and allowShell is false.", tool))
	}
	if kind == codeExecTool {
		if !h.allowAll {
			return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
				"Tool %q runs code that cannot be analysed; only an allow-list of exactly [\"*\"] permits it.", tool))
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
		if v := h.checkCommand(m, c, bases); !v.Allowed {
			return v
		}
	}
	return hooks.Allow
}

// maxBases bounds the working directories a command's words are resolved against.
const maxBases = 8

// checkCommand checks one command line against the policy: the single entry
// point for a shell command, whoever runs it. bases are the directories its
// relative words resolve against (the workspace when empty).
func (h *Hook) checkCommand(m *pathguard.Memo, cmd string, bases []string) hooks.Verdict {
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
	for _, c := range an.Commands {
		if !h.commandAllowed(c.Text) {
			return hooks.Deny(RuleShellAllowList, fmt.Sprintf(
				"Shell command %q is not allowed by allowedShellCommands.", c.Text))
		}
		if len(c.Risky) > 0 && !h.riskyAllowed(c) {
			return hooks.Deny(RuleShellAllowList, fmt.Sprintf(
				"Shell command %q uses %q, which runs programs or writes files; an allowedShellCommands entry must name it explicitly.",
				c.Text, c.Risky))
		}
	}
	if len(an.Unverifiable) > 0 && !h.allowAll {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
			"Shell command %q cannot be checked statically: %s.", short(cmd), an.Unverifiable[0]))
	}
	if h.res == nil || (!h.workspaceOnly && len(h.forbidden) == 0) {
		return hooks.Allow
	}
	// Working directories: the tool's, plus every cd/pushd target.
	for _, d := range an.Dirs {
		n := len(bases)
		for _, b := range bases[:n] {
			real, v, ok := h.checkPath(m, d, b)
			if !ok {
				return v
			}
			bases = append(bases, real)
		}
		if len(bases) > maxBases {
			if !h.allowAll {
				return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
					"Shell command %q changes directory too often to check its relative paths.", short(cmd)))
			}
			bases = bases[:maxBases]
		}
	}
	for _, b := range bases {
		for _, w := range an.Words {
			if v := h.checkWord(m, w.Value, w.Glob, w.ExtGlob, b, cmd); !v.Allowed {
				return v
			}
			if w.Recursive {
				if v := h.checkBeneath(m, w, b, cmd); !v.Allowed {
					return v
				}
			}
		}
		for _, r := range an.Redirects {
			if v := h.checkWord(m, r.Target, r.Pattern, r.ExtGlob, b, cmd); !v.Allowed {
				return v
			}
		}
	}
	return hooks.Allow
}

// checkWord checks one shell word and, for a glob, everything it can
// expand to (shellcheck.Expand).
func (h *Hook) checkWord(m *pathguard.Memo, value, glob string, ext bool, base, cmd string) hooks.Verdict {
	if value == "" {
		return hooks.Allow
	}
	if _, v, ok := h.checkPath(m, value, base); !ok {
		return shellVerdict(v, cmd)
	}
	if glob == "" {
		return hooks.Allow
	}
	opt := shellcheck.GlobOptions{ExtGlob: ext, NoCase: h.fold}
	if strings.HasPrefix(glob, "~") {
		home, err := homeDir()
		if err != nil {
			return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf("Glob %q cannot be expanded: %v.", glob, err))
		}
		opt.Home = home
	}
	matches, err := shellcheck.Expand(glob, base, opt)
	if err != nil {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf("Glob %q in shell command %q cannot be checked: %v.", value, short(cmd), err))
	}
	for _, match := range matches {
		if _, v, ok := h.checkPath(m, match, base); !ok {
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
// its target. For git, .git directories are skipped and a revision (a word
// naming no file) stands for the whole repository. A tree too large to walk
// is denied.
func (h *Hook) checkBeneath(m *pathguard.Memo, w shellcheck.Word, base, cmd string) hooks.Verdict {
	real, v, ok := h.checkPath(m, w.Value, base)
	if !ok {
		return shellVerdict(v, cmd)
	}
	fi, err := os.Stat(real)
	if err != nil && w.MaybeRevision {
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
	err = pathguard.WalkTree(real, maxBeneath, w.Git, func(p string) (string, error) {
		target, v, ok := h.checkPath(m, p, base)
		if !ok {
			deny = &v
			return "", errBeneathDenied
		}
		if pathguard.IsDir(target) {
			return target, nil // -R, -L and find -L descend into it
		}
		return "", nil
	}, func(p string) error {
		if len(h.forbidden) == 0 {
			return nil
		}
		q := p
		if h.fold {
			q = strings.ToLower(q)
		}
		if g, ok := h.matchForbidden(q, base, q); ok {
			v := hooks.Deny(RuleForbiddenPaths, fmt.Sprintf(
				"%q reads or writes beneath %q, which holds %q, matching the forbidden path glob %q.", cmd, w.Value, p, g))
			deny = &v
			return errBeneathDenied
		}
		return nil
	})
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
