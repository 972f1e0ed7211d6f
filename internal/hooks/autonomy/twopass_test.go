package autonomy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// The two-pass ask decision, kept as the differential oracle of the single
// pass: the ask rules compiled as the deny rules of a second hook, the
// asker, which decides a call once every deny rule of the policy allowed
// it; the asker's denials are the calls that need approval. The methods of
// legacyHook are the deny pass as it was when the asker was introduced
// (only the analyses are no longer shared between the two passes: the
// analysis of a command line does not depend on who asks for it).

// twoPass is a policy decided in two passes.
type twoPass struct {
	main, asker *legacyHook // asker is nil without ask rules
	expiry      time.Duration
}

// legacyHook is the deny pass of the two-pass decision over a compiled
// Hook's deny rules (its ask fields are not read). For an asker,
// askCommands are the commands that ask.
type legacyHook struct {
	*Hook
	askCommands []string
}

// newTwoPass compiles cfg as New does and its ask rules as the asker did.
func newTwoPass(cfg Config) (*twoPass, error) {
	h, err := New(cfg)
	if err != nil {
		return nil, err
	}
	tp := &twoPass{main: &legacyHook{Hook: h}}
	ask := cfg.Ask
	if ask == nil || len(ask.Tools)+len(ask.PathGlobs)+len(ask.Commands) == 0 {
		return tp, nil
	}
	a := &Hook{res: h.res, root: h.root, real: h.real, fold: h.fold}
	err = a.compile(Config{Name: h.name, ForbiddenPathGlobs: ask.PathGlobs, AllowShell: true, AllowedShellCommands: []string{"*"},
		ShellDialects: cfg.ShellDialects, ToolDeny: ask.Tools, PathArgs: cfg.PathArgs})
	if err != nil {
		return nil, fmt.Errorf("ask: %w", err)
	}
	tp.asker = &legacyHook{Hook: a, askCommands: slices.Clone(ask.Commands)}
	tp.expiry = time.Duration(ask.ExpirySeconds) * time.Second
	return tp, nil
}

// Before is the two-pass Before.
func (tp *twoPass) Before(ctx context.Context, call *hooks.Call) hooks.Verdict {
	if !tp.main.subjects.Matches(call) {
		return hooks.Allow
	}
	v := tp.main.check(ctx, call)
	if v.Allowed && tp.asker != nil {
		if a := tp.asker.check(ctx, call); !a.Allowed {
			return tp.askVerdict(a)
		}
	}
	return v
}

func (tp *twoPass) askVerdict(d hooks.Verdict) hooks.Verdict {
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
	return hooks.AskFor(rule, reason, tp.expiry)
}

func (h *legacyHook) check(ctx context.Context, call *hooks.Call) hooks.Verdict {
	tool := call.Tool
	lower := strings.ToLower(tool)
	if v, ok := h.checkToolGlobs(tool, lower); !ok {
		return v
	}
	shellKind := shellClass(lower, call.Args)
	if h.readOnly {
		if v, ok := h.checkReadOnly(tool, lower, call); !ok {
			return v
		}
	}
	pathChecks := h.workspaceOnly || len(h.forbidden) > 0
	if call.ArgsErr != nil && (pathChecks || shellKind != notShell) {
		return hooks.Deny(RuleInvalidArguments, fmt.Sprintf(
			"The arguments of %q are not one JSON object (%v), so its paths and commands cannot be checked.", tool, call.ArgsErr))
	}
	m := pathguard.MemoFrom(ctx)
	var bases []string
	if pathChecks || shellKind != notShell {
		paths, err := pathguard.Extract(tool, call.Args, h.pathArgs[lower])
		if err != nil {
			return hooks.Deny(RuleInvalidArguments, fmt.Sprintf("The arguments of %q cannot be checked: %v.", tool, err))
		}
		for _, p := range paths {
			real, v, ok := h.checkPath(m, p, "", false)
			if !ok {
				return v
			}
			if shellKind != notShell && isCwdKey(call.Args, p) {
				bases = append(bases, real)
			}
		}
	}
	if pathChecks && strings.EqualFold(tool, "apply_patch") {
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
				if _, v, ok := h.checkPath(m, p, "", false); !ok {
					return v
				}
			}
		}
	}
	if shellKind != notShell {
		return h.checkShell(m, tool, shellKind, call, bases)
	}
	return hooks.Allow
}

func (h *legacyHook) checkPath(m *pathguard.Memo, p, base string, shellWord bool) (string, hooks.Verdict, bool) {
	if h.res == nil {
		return "", hooks.Allow, true
	}
	if base == "" {
		base = h.res.Real
	}
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
	if len(h.forbidden) > 0 {
		if g, ok := h.matchForbidden(p, base, real); ok {
			return "", hooks.Deny(RuleForbiddenPaths, fmt.Sprintf(
				"Path %q (real path %q) matches the forbidden path glob %q.", p, real, g)), false
		}
	}
	return real, hooks.Allow, true
}

func (h *legacyHook) matchForbidden(raw, base, real string) (string, bool) {
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
		var lit string
		var litState [3]uint8
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

func (h *legacyHook) checkShell(m *pathguard.Memo, tool string, kind shellKind, call *hooks.Call, bases []string) hooks.Verdict {
	if !h.allowShell {
		return hooks.Deny(RuleShellDisabled, fmt.Sprintf("Tool %q is a shell tool and allowShell is false.", tool))
	}
	if kind == codeExecTool {
		if len(h.askCommands) > 0 {
			return hooks.Deny(RuleAskCommands, fmt.Sprintf(
				"Tool %q runs code that cannot be read, so it may run a command that needs approval.", tool))
		}
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

func (h *legacyHook) checkCommand(m *pathguard.Memo, cmd string, bases []string) hooks.Verdict {
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
	if v := h.checkCommandNames(an, cmd); !v.Allowed {
		return v
	}
	if len(an.Unverifiable) > 0 && !h.allowAll {
		return hooks.Deny(RuleShellUnverifiable, fmt.Sprintf(
			"Shell command %q cannot be checked statically: %s.", short(cmd), an.Unverifiable[0]))
	}
	if h.res == nil || (!h.workspaceOnly && len(h.forbidden) == 0) {
		return hooks.Allow
	}
	for _, d := range an.Dirs {
		n := len(bases)
		for _, b := range bases[:n] {
			real, v, ok := h.checkPath(m, d, b, false)
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
			if v := h.checkWord(m, w.Value, w.Glob, w.ExtGlob, an.DotGlob, b, cmd); !v.Allowed {
				return v
			}
			if w.Recursive {
				if v := h.checkBeneath(m, w, b, cmd); !v.Allowed {
					return v
				}
			}
		}
		for _, r := range an.Redirects {
			if v := h.checkWord(m, r.Target, r.Pattern, r.ExtGlob, an.DotGlob, b, cmd); !v.Allowed {
				return v
			}
		}
	}
	return hooks.Allow
}

func (h *legacyHook) checkCommandNames(an *shellcheck.Analysis, cmd string) hooks.Verdict {
	for _, c := range an.Commands {
		for _, p := range h.askCommands {
			if MatchCommand(p, c.Text) {
				return hooks.Deny(RuleAskCommands, fmt.Sprintf("Shell command %q matches %q, which needs approval.", c.Text, p))
			}
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
	if len(an.Unverifiable) > 0 && len(h.askCommands) > 0 {
		return hooks.Deny(RuleAskCommands, fmt.Sprintf(
			"Shell command %q cannot be read statically (%s), so it may run a command that needs approval.", short(cmd), an.Unverifiable[0]))
	}
	return hooks.Allow
}

func (h *legacyHook) checkWord(m *pathguard.Memo, value, glob string, ext, dotGlob bool, base, cmd string) hooks.Verdict {
	if value == "" {
		return hooks.Allow
	}
	if _, v, ok := h.checkPath(m, value, base, true); !ok {
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
	for _, match := range append(listed, matches...) {
		if _, v, ok := h.checkPath(m, match, base, true); !ok {
			return shellVerdict(v, cmd)
		}
	}
	return hooks.Allow
}

func (h *legacyHook) checkBeneath(m *pathguard.Memo, w shellcheck.Word, base, cmd string) hooks.Verdict {
	real, v, ok := h.checkPath(m, w.Value, base, true)
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
		return hooks.Allow
	}
	var deny *hooks.Verdict
	var entry func(p string) error
	link := func(p string) (string, error) {
		if w.NoFollow {
			return "", entry(p)
		}
		target, v, ok := h.checkPath(m, p, base, true)
		if !ok {
			deny = &v
			return "", errBeneathDenied
		}
		if pathguard.IsDir(target) {
			return target, nil
		}
		return "", nil
	}
	entry = func(p string) error {
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
	}
	if w.IndexOnly {
		err = walkIndex(real, base, h.res.Real, entry)
	}
	if !w.IndexOnly || errors.Is(err, errNoIndex) {
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
