// Package contract implements the ContractScope hook: per-session contracts
// that cap how many tool calls a session may execute and confine the
// file-system and exec tools to allowed paths (SPEC A2 "ContractScope", with
// the exact budgets of B9 and the path handling of B5).
//
// A Resolver decides which Contract, if any, governs a call; Subjects and
// StaticResolver provide the session/channel/sender glob binding that a
// ContractPolicy compiles to. Budgets holds the per-session counters and can
// outlive one hook instance, so counts survive a configuration push.
package contract

import (
	"errors"
	"fmt"
	"strings"
	"time"

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
	// RuleInvalidContract denies a call governed by a contract that is not valid.
	RuleInvalidContract = "invalidContract"
)

// ErrInvalidContract is wrapped by every Contract validation error.
var ErrInvalidContract = errors.New("invalid contract")

// ErrInvalidPath is wrapped (with ErrInvalidContract) by the error of an unusable allowed path.
var ErrInvalidPath = errors.New("invalid path")

// MaxToolCallsLimit is the largest accepted Contract.MaxToolCalls.
const MaxToolCallsLimit = 1<<31 - 1

// Contract is the set of limits that governs one session.
type Contract struct {
	// MaxToolCalls is how many calls the session may execute; 0 means no limit.
	MaxToolCalls int
	// PerSenderCalls bounds the calls this contract allows one caller (the
	// verified identity, whatever its sessions) in any PerSenderWindow; 0
	// means no limit.
	PerSenderCalls  int
	PerSenderWindow time.Duration
	// ScopedCapabilities grant tools, optionally confined to paths. When any
	// capability has AllowedPaths the contract is "scoped": file-system and
	// exec tools without a capability of their own are denied.
	ScopedCapabilities []Capability
	// AllowedPaths are path prefixes every file-system and exec tool call must
	// stay under. Relative prefixes resolve against the workspace root. A
	// contract with top-level AllowedPaths also needs an explicit capability
	// for shell and code_exec.
	AllowedPaths []string
}

// Capability grants one tool, optionally confined to paths.
type Capability struct {
	// Tool is the tool name (compared case-insensitively).
	Tool string
	// AllowedPaths confine the tool's path arguments; empty means the tool is
	// granted without a path restriction from this capability.
	AllowedPaths []string
}

// Validate reports whether c is usable; errors wrap ErrInvalidContract.
func (c *Contract) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil contract", ErrInvalidContract)
	}
	if c.MaxToolCalls < 0 || c.MaxToolCalls > MaxToolCallsLimit {
		return fmt.Errorf("%w: maxToolCalls %d must be between 0 and %d", ErrInvalidContract, c.MaxToolCalls, MaxToolCallsLimit)
	}
	if c.PerSenderCalls < 0 || c.PerSenderCalls > MaxToolCallsLimit {
		return fmt.Errorf("%w: maxToolCallsPerSender calls %d must be between 0 and %d", ErrInvalidContract, c.PerSenderCalls, MaxToolCallsLimit)
	}
	if c.PerSenderCalls > 0 && (c.PerSenderWindow < time.Minute || c.PerSenderWindow > 720*time.Hour) {
		return fmt.Errorf("%w: maxToolCallsPerSender window %s must be between 1m and 720h", ErrInvalidContract, c.PerSenderWindow)
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
	return nil
}

func validPaths(ps []string) error {
	for i, p := range ps {
		if p == "" {
			return fmt.Errorf("allowedPaths[%d] is empty: %w", i, ErrInvalidPath)
		}
		if strings.IndexByte(p, 0) >= 0 {
			return fmt.Errorf("allowedPaths[%d] contains a NUL byte: %w", i, ErrInvalidPath)
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

// fileSystemTools are the file-system tools (SPEC A2 with the real names);
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
