// Package contract implements the ContractPolicy hook: per-session contracts
// that cap how many tool calls a session (and a caller, over a window) may
// execute, confine the file-system and exec tools to allowed paths, and rate
// limit tools per caller.
//
// Spec is a ContractPolicy's compiled form; Validate checks it without
// touching the file system and Build turns it into the hook. State holds the
// session counters and rate-limit windows across configuration pushes, so
// counts survive a push that keeps the policy.
package contract

import (
	"fmt"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// Rules named in denials from this hook.
const (
	// RuleMaxToolCalls denies a call beyond the session's budget.
	RuleMaxToolCalls = "maxToolCalls"
	// RuleMaxToolCallsPerSender denies a call beyond its caller's budget
	// over the window.
	RuleMaxToolCallsPerSender = "maxToolCallsPerSender"
	// RuleScopedCapabilities denies a call that no capability grants or whose
	// paths lie outside its capability's allowed paths.
	RuleScopedCapabilities = "scopedCapabilities"
	// RuleAllowedPaths denies a call whose paths lie outside the contract's
	// top-level allowed path prefixes.
	RuleAllowedPaths = "allowedPaths"
	// RuleInvalidArguments denies a call whose arguments cannot be checked.
	RuleInvalidArguments = "invalidArguments"
)

// ErrInvalidContract is wrapped by every Contract validation error; it wraps
// hooks.ErrInvalidSpec. The error of an unusable allowed path also wraps
// hooks.ErrInvalidPath.
var ErrInvalidContract = fmt.Errorf("invalid contract: %w", hooks.ErrInvalidSpec)

// The bounds of a contract's counts. The ContractPolicy CRD states the same
// numbers in its kubebuilder markers, which take only literals; a test of
// internal/compile fails when the two differ.
const (
	// MaxToolCallsLimit is the largest accepted MaxToolCalls and
	// maxToolCallsPerSender calls.
	MaxToolCallsLimit = 10_000_000
	// MaxAfterCalls is the largest accepted ask afterCalls.
	MaxAfterCalls = 1<<31 - 2
)

// askOnlyBudget is the session budget of a contract whose calls only its ask
// rules count: more than any afterCalls, so it never denies.
const askOnlyBudget = MaxAfterCalls + 1

// Contract is the set of limits that governs one session.
type Contract struct {
	// MaxToolCalls is how many calls the session may execute; 0 means no limit.
	MaxToolCalls int `json:"maxToolCalls,omitempty"`
	// PerSender bounds the calls this contract allows one caller (the
	// verified identity, whatever its sessions) over a window; nil means no limit.
	PerSender *SenderLimit `json:"maxToolCallsPerSender,omitempty"`
	// ScopedCapabilities grant tools, optionally confined to paths. When any
	// capability has AllowedPaths the contract is "scoped": file-system and
	// exec tools without a capability of their own are denied.
	ScopedCapabilities []Capability `json:"scopedCapabilities,omitempty"`
	// AllowedPaths are path prefixes every file-system and exec tool call must
	// stay under. Relative prefixes resolve against the workspace root. A
	// contract with top-level AllowedPaths also needs an explicit capability
	// for shell and code_exec.
	AllowedPaths []string `json:"allowedPaths,omitempty"`
	// Ask names the calls that, once the contract allowed them, need a
	// person's approval.
	Ask *Ask `json:"ask,omitempty"`
}

// Ask names the calls of a contract that need a person's approval: those
// whose tool matches Tools, and every call of a session after its first
// AfterCalls.
type Ask struct {
	// Tools are doublestar patterns of tool names (case-insensitive).
	Tools []string `json:"tools,omitempty"`
	// AfterCalls is how many calls a session makes before each further one
	// needs approval; 0 means no such rule.
	AfterCalls int `json:"afterCalls,omitempty"`
	// ExpirySeconds bounds the request for approval (0: the default).
	ExpirySeconds int64 `json:"expirySeconds,omitempty"`
}

// Rules of the verdicts that ask for approval.
const (
	// RuleAskTools asks for approval of a call whose tool a contract's ask names.
	RuleAskTools = "askTools"
	// RuleAskAfterCalls asks for approval of a call past the session's
	// first ask.afterCalls calls.
	RuleAskAfterCalls = "askAfterCalls"
)

// SenderLimit bounds one caller's calls over a sliding window.
type SenderLimit struct {
	// Calls is how many calls one caller may make in any window; 0 means no limit.
	Calls int `json:"calls"`
	// WindowMillis is the window's length in milliseconds.
	WindowMillis int64 `json:"windowMillis"`
}

// Window returns the limit's window.
func (l *SenderLimit) Window() time.Duration { return time.Duration(l.WindowMillis) * time.Millisecond }

// perSender returns the per-caller limit and its window, (0, 0) for none.
func (c *Contract) perSender() (int, time.Duration) {
	if c.PerSender == nil {
		return 0, 0
	}
	return c.PerSender.Calls, c.PerSender.Window()
}

// Capability grants one tool, optionally confined to paths.
type Capability struct {
	// Tool is the tool name (compared case-insensitively).
	Tool string `json:"tool"`
	// AllowedPaths confine the tool's path arguments; empty means the tool is
	// granted without a path restriction from this capability.
	AllowedPaths []string `json:"allowedPaths,omitempty"`
}

// Validate reports whether c is usable; errors wrap ErrInvalidContract.
func (c *Contract) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil contract", ErrInvalidContract)
	}
	if c.MaxToolCalls < 0 || c.MaxToolCalls > MaxToolCallsLimit {
		return hooks.FieldErr("maxToolCalls", "must be ≥ 0 and ≤ %d, not %d: %w", MaxToolCallsLimit, c.MaxToolCalls, ErrInvalidContract)
	}
	calls, window := c.perSender()
	if calls < 0 || calls > MaxToolCallsLimit {
		return hooks.FieldErr("maxToolCallsPerSender.calls", "must be ≥ 0 and ≤ %d, not %d: %w", MaxToolCallsLimit, calls, ErrInvalidContract)
	}
	if calls > 0 && (window < time.Minute || window > 720*time.Hour) {
		return fmt.Errorf("%w: maxToolCallsPerSender window %s must be between 1m and 720h", ErrInvalidContract, window)
	}
	for i, cp := range c.ScopedCapabilities {
		if strings.TrimSpace(cp.Tool) == "" {
			return fmt.Errorf("%w: scopedCapabilities[%d]: tool is empty", ErrInvalidContract, i)
		}
		if err := validPaths(cp.AllowedPaths); err != nil {
			return fmt.Errorf("%w: scopedCapabilities[%d] (%s): %w", ErrInvalidContract, i, cp.Tool, err)
		}
	}
	if err := validPaths(c.AllowedPaths); err != nil {
		return fmt.Errorf("%w: allowedPaths: %w", ErrInvalidContract, err)
	}
	return c.Ask.validate()
}

// validate checks the ask rules (nil has none).
func (a *Ask) validate() error {
	if a == nil {
		return nil
	}
	if len(a.Tools) == 0 && a.AfterCalls == 0 {
		return fmt.Errorf("%w: ask needs a tool pattern or afterCalls", ErrInvalidContract)
	}
	if a.AfterCalls < 0 || a.AfterCalls > MaxAfterCalls {
		return hooks.FieldErr("ask.afterCalls", "must be ≥ 1 and ≤ %d, not %d: %w", MaxAfterCalls, a.AfterCalls, ErrInvalidContract)
	}
	for _, p := range a.Tools {
		if !doublestar.ValidatePattern(p) {
			return fmt.Errorf("%w: ask tool pattern %q: %w", ErrInvalidContract, p, hooks.ErrInvalidGlob)
		}
	}
	if a.ExpirySeconds < 0 || a.ExpirySeconds > int64(hooks.MaxApprovalExpiry/time.Second) {
		return fmt.Errorf("%w: ask expiry %ds must be between 0 and %s", ErrInvalidContract, a.ExpirySeconds, hooks.MaxApprovalExpiry)
	}
	return nil
}

// asks returns the verdict asking for approval of call, when the ask
// rules name its tool or nth (the call's place in its session, 0 when not
// counted, nthUnknown when it could not be) is past AfterCalls.
func (a *Ask) asks(call *hooks.Call, nth int) (hooks.Verdict, bool) {
	if a == nil {
		return hooks.Verdict{}, false
	}
	expiry := time.Duration(a.ExpirySeconds) * time.Second
	lower := strings.ToLower(call.Tool)
	for _, p := range a.Tools {
		if doublestar.MatchUnvalidated(strings.ToLower(p), lower) {
			return hooks.AskFor(RuleAskTools, fmt.Sprintf("Tool %q matches the tool pattern %q, which needs approval.", call.Tool, p),
				expiry), true
		}
	}
	switch {
	case a.AfterCalls > 0 && nth == nthUnknown:
		return hooks.AskFor(RuleAskAfterCalls, fmt.Sprintf(
			"The state store could not count this call of session %q, so it may come after the first %d, which need no approval.",
			call.SessionID, a.AfterCalls), expiry), true
	case a.AfterCalls > 0 && nth > a.AfterCalls:
		return hooks.AskFor(RuleAskAfterCalls, fmt.Sprintf(
			"This is call %d of session %q; every call after the first %d needs approval.", nth, call.SessionID, a.AfterCalls),
			expiry), true
	}
	return hooks.Verdict{}, false
}

// counted is the session budget a reservation takes: MaxToolCalls, or, when
// only the ask rules count the session's calls, a budget no session reaches.
func (c *Contract) counted() int {
	if c.MaxToolCalls == 0 && c.Ask != nil && c.Ask.AfterCalls > 0 {
		return askOnlyBudget
	}
	return c.MaxToolCalls
}

func validPaths(ps []string) error {
	for i, p := range ps {
		if p == "" {
			return fmt.Errorf("allowedPaths[%d] is empty: %w", i, hooks.ErrInvalidPath)
		}
		if strings.IndexByte(p, 0) >= 0 {
			return fmt.Errorf("allowedPaths[%d] contains a NUL byte: %w", i, hooks.ErrInvalidPath)
		}
	}
	return nil
}

// capScoped reports whether any capability confines its tool to paths.
func (c *Contract) capScoped() bool {
	for i := range c.ScopedCapabilities {
		if len(c.ScopedCapabilities[i].AllowedPaths) > 0 {
			return true
		}
	}
	return false
}

// grant is what a contract's capabilities say about one tool.
type grant struct {
	has          bool     // some capability names the tool
	unrestricted bool     // some capability for the tool has no AllowedPaths
	paths        []string // union of the tool's capabilities' AllowedPaths
	only         []string // the AllowedPaths of the single capability, when there is one (no allocation)
}

// grantFor collects the capabilities for tool. Several capabilities for the
// same tool add up: their paths are unioned and one without paths makes the
// tool unrestricted.
func (c *Contract) grantFor(tool string) grant {
	var g grant
	n := 0
	for i := range c.ScopedCapabilities {
		cp := &c.ScopedCapabilities[i]
		if !strings.EqualFold(cp.Tool, tool) {
			continue
		}
		g.has = true
		if len(cp.AllowedPaths) == 0 {
			g.unrestricted = true
			continue
		}
		n++
		if n == 1 {
			g.only = cp.AllowedPaths
		} else {
			if g.paths == nil {
				g.paths = append(g.paths, g.only...)
			}
			g.paths = append(g.paths, cp.AllowedPaths...)
		}
	}
	if g.paths == nil {
		g.paths = g.only
	}
	return g
}

// toolClass says how the contract treats a tool.
type toolClass int

const (
	classOther toolClass = iota // not path-scoped unless a capability names it
	classFS                     // file-system tools
	classExec                   // git, process
	classShell                  // shell, code_exec: need an explicit grant under a scoped contract
)

// fileSystemTools are the file-system tools;
// the exec tools are shell, code_exec, git and process.
var fileSystemTools = [...]string{"read_file", "write_file", "edit_file", "apply_patch", "list_dir"}

// classify returns the class of tool, comparing names case-insensitively so
// that a differently spelled registration cannot dodge the classification.
func classify(tool string) toolClass {
	switch {
	case strings.EqualFold(tool, "git"), strings.EqualFold(tool, "process"):
		return classExec
	case shellcheck.ClassifyTool(tool, nil) != shellcheck.NotShell:
		// The same shell and code tools as the Autonomy hook's.
		return classShell
	}
	for _, t := range fileSystemTools {
		if strings.EqualFold(tool, t) {
			return classFS
		}
	}
	return classOther
}
