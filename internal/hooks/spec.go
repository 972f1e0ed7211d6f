package hooks

import (
	"errors"
	"fmt"
	"strings"
)

// The classes of error a policy spec's validation returns. Every hook kind's
// Validate and Build wrap exactly one of them, so that the controller can turn
// an error into a status reason without knowing the kind.
var (
	// ErrInvalidGlob marks a glob pattern that does not parse.
	ErrInvalidGlob = errors.New("invalid glob")
	// ErrInvalidPath marks an unusable path.
	ErrInvalidPath = errors.New("invalid path")
	// ErrInvalidSpec marks any other invalid setting.
	ErrInvalidSpec = errors.New("invalid spec")
)

// BuildEnv is what a gateway gives every hook it builds from a policy spec.
type BuildEnv struct {
	// Workspace is the gateway's workspace root: the one directory relative
	// paths resolve against. A policy that names a workspace root of its own
	// must name this one.
	Workspace string
	// Traits describe the tools the gateway serves beyond the built-in ones.
	Traits ToolTraits
	// Validate builds to check a spec, not to use the hook: nothing may
	// touch the file system, and Runtime is empty.
	Validate bool
	// Runtime holds what kinds need of the process that builds them, each
	// kind finding its own by type (RuntimeOf): the contract state, the
	// plugin runtime.
	Runtime []any
}

// ToolTraits describe tools a gateway serves beyond the built-in ones (the
// upstream MCP tools it fronts), so that policies check them like built-ins.
// They can only widen checking (more path-bearing arguments) or name tools
// read-only, which readonly mode still refuses for the known mutating tools.
type ToolTraits struct {
	// PathArgs are extra path-bearing argument names per tool name.
	PathArgs map[string][]string
	// ReadOnlyTools are tool names known to change nothing.
	ReadOnlyTools []string
}

// OutrightDenier is a hook that can tell from a tool's name and the caller's
// context alone that it denies every call of that tool by that caller, so
// that the caller's tool listing can leave it out.
type OutrightDenier interface {
	// DeniesOutright returns the denial every call of call.Tool with the
	// session, channel, sender and caller of call gets whatever its
	// arguments, if any. Its arguments are not read.
	DeniesOutright(call *Call) (Verdict, bool)
}

// ToolNamer is a hook whose configuration names tools exactly (not by glob).
type ToolNamer interface {
	// ToolNames returns the exact tool names the hook's configuration names.
	ToolNames() []string
}

// globChars are the characters that make a tool name a glob pattern.
const globChars = `*?[]{}\`

// ExactToolNames returns, in order, the names in lists that name one tool
// exactly: not empty and not a glob pattern. ToolNamer implementations use it.
func ExactToolNames(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, n := range l {
			if n != "" && !strings.ContainsAny(n, globChars) {
				out = append(out, n)
			}
		}
	}
	return out
}

// Scoped is a hook whose policy binds only the calls its subjects select.
type Scoped interface {
	// Subjects returns the policy's subjects; nil binds every call.
	Subjects() *SubjectMatcher
}

// FieldError is a spec validation error at a field path ("maxToolCalls",
// "ask.afterCalls"), relative to the spec that holds it.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// FieldErr returns a FieldError at path with the message of format and args.
func FieldErr(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// UnderField returns err with its field path, if it has one, under parent:
// a FieldError at "maxToolCalls" under "spec" is at "spec.maxToolCalls".
// Other errors are returned as they are.
func UnderField(parent string, err error) error {
	if fe, ok := err.(*FieldError); ok {
		return &FieldError{Path: parent + "." + fe.Path, Err: fe.Err}
	}
	return err
}
