// Package tools provides the gateway's built-in tools, which operate inside a
// workspace directory: read_file, write_file, edit_file, list_dir and shell.
//
// Policies are the authority on which paths a call may touch. The tools
// resolve every path exactly as the policy hooks do (internal/hooks/pathguard:
// "~" expanded, relative paths joined to the workspace root and never the
// process directory, symlinks followed), so a tool acts on the very file the
// hooks decided on; and while they run they ask the call's hooks.Guard again
// about what they actually do (each file they open, by its real path after
// the open; each command the shell starts, after expansion). Whatever the
// policy, the tools never reach a file outside the workspace (see
// openBeneath) and every process they start is confined by the sandbox. A
// tool whose context carries no guard, or whose sandbox is unusable, refuses
// to act.
//
// A problem with the call itself, such as a missing file or a bad argument,
// is returned as a *hooks.ToolError whose text starts with "Error:": the call
// is failed (audit, metrics, MCP's isError) and the agent reads the text and
// can act on it. Any other error is a failure of the tool, which the executor
// answers with "Error: Tool execution failed.".
package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/toolnames"
)

// Names of the built-in tools.
const (
	ReadFile  = toolnames.ReadFile
	WriteFile = toolnames.WriteFile
	EditFile  = toolnames.EditFile
	ListDir   = toolnames.ListDir
	Shell     = toolnames.Shell
)

// Defaults of the tools' limits. read_file and write_file share one limit
// by default, so that what one writes the other reads back.
const (
	DefaultMaxFileBytes   = 4 << 20             // the default of both limits below
	DefaultMaxReadBytes   = DefaultMaxFileBytes // read_file refuses larger files
	DefaultMaxWriteBytes  = DefaultMaxFileBytes // write_file and edit_file refuse larger contents
	DefaultMaxOutputBytes = 64 << 10            // shell output is truncated beyond this
	DefaultMaxListEntries = 1000                // list_dir lists at most this many entries
)

// Options are the tools' limits; zero values take the defaults.
type Options struct {
	// MaxReadBytes is the largest file read_file returns.
	MaxReadBytes int64
	// MaxWriteBytes is the largest content write_file and edit_file write.
	MaxWriteBytes int
	// MaxOutputBytes caps the shell tool's combined output.
	MaxOutputBytes int
	// MaxListEntries caps how many entries list_dir returns.
	MaxListEntries int
	// Sandbox confines the processes the shell tool starts; nil means a
	// Landlock sandbox with the default directories (sandbox.New).
	Sandbox *sandbox.Sandbox
	// Path is the PATH of the commands the shell tool runs; empty means the
	// gateway's own PATH.
	Path string
}

func (o Options) withDefaults() Options {
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.MaxWriteBytes <= 0 {
		o.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxListEntries <= 0 {
		o.MaxListEntries = DefaultMaxListEntries
	}
	if o.Path == "" {
		o.Path = os.Getenv("PATH")
	}
	return o
}

// Workspace is the directory the built-in tools operate in.
type Workspace struct {
	res  *pathguard.Resolver
	root *os.File // the workspace root, opened O_PATH; every file is reached beneath it
	opts Options
}

// NewWorkspace returns the tools' view of root, which must be an absolute
// path to an existing directory. It keeps a descriptor of root open for its
// lifetime.
func NewWorkspace(root string, opts Options) (*Workspace, error) {
	res, err := pathguard.NewResolver(root)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	opts = opts.withDefaults()
	if opts.Sandbox == nil {
		if opts.Sandbox, err = sandbox.New(sandbox.Config{}); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
	}
	fd, err := unix.Open(res.Real, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", &os.PathError{Op: opOpen, Path: res.Real, Err: err})
	}
	return &Workspace{res: res, root: os.NewFile(uintptr(fd), res.Real), opts: opts}, nil
}

// begin is the start of every tool: it returns the call's runtime guard and
// refuses to act without one or when the sandbox is unusable.
func (w *Workspace) begin(ctx context.Context) (*hooks.Guard, error) {
	if err := w.opts.Sandbox.Usable(); err != nil {
		return nil, err
	}
	g, err := hooks.GuardFromContext(ctx)
	if err != nil {
		return nil, err
	}
	return g, checkContext(ctx)
}

// Root is the workspace's real path.
func (w *Workspace) Root() string { return w.res.Real }

// Builtins returns the five built-in tools for root with opts.
func Builtins(root string, opts Options) ([]hooks.Tool, error) {
	w, err := NewWorkspace(root, opts)
	if err != nil {
		return nil, err
	}
	return w.Tools(), nil
}

// Tools returns the built-in tools operating in w.
func (w *Workspace) Tools() []hooks.Tool {
	return []hooks.Tool{
		hooks.ToolFunc{ToolName: ReadFile, Func: w.readFile},
		hooks.ToolFunc{ToolName: WriteFile, Func: w.writeFile},
		hooks.ToolFunc{ToolName: EditFile, Func: w.editFile},
		hooks.ToolFunc{ToolName: ListDir, Func: w.listDir},
		hooks.ToolFunc{ToolName: Shell, Func: w.shell},
	}
}

// Names are the built-in tools' names.
func Names() []string { return toolnames.All() }

// userError is a problem with the call that the agent is told about as
// "Error: ..." text (a *hooks.ToolError) rather than a failure of the tool.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func userErrorf(format string, a ...any) error { return &userError{msg: fmt.Sprintf(format, a...)} }

// result turns a tool body's outcome into what the executor receives:
// user errors become a *hooks.ToolError with "Error: ..." text, other errors
// stay errors.
func result(out string, err error) (string, error) {
	if ue, ok := errors.AsType[*userError](err); ok {
		return "", &hooks.ToolError{Text: "Error: " + ue.msg}
	}
	return out, err
}

// args checks a call's arguments against the keys a tool accepts.
type args struct {
	m    map[string]any
	tool string
}

func newArgs(tool string, m map[string]any, allowed ...string) (args, error) {
	var unknown []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return args{}, userErrorf("%s does not take the argument(s) %s (it takes %s)", tool,
			strings.Join(quoteAll(unknown), ", "), strings.Join(quoteAll(allowed), ", "))
	}
	return args{m: m, tool: tool}, nil
}

// str returns a string argument; required ones must be present and non-empty
// unless emptyOK.
func (a args) str(key string, required, emptyOK bool) (string, bool, error) {
	v, ok := a.m[key]
	if !ok || v == nil {
		if required {
			return "", false, userErrorf("%s needs the argument %q", a.tool, key)
		}
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, userErrorf("%s: argument %q must be a string", a.tool, key)
	}
	if s == "" && !emptyOK {
		return "", false, userErrorf("%s: argument %q must not be empty", a.tool, key)
	}
	return s, true, nil
}

// path resolves a path argument as the policy hooks do.
func (w *Workspace) path(a args, key string, required bool) (string, bool, error) {
	p, ok, err := a.str(key, required, false)
	if err != nil || !ok {
		return "", ok, err
	}
	real, err := w.res.Resolve(p)
	if err != nil {
		return "", false, userErrorf("%s: cannot resolve %q: %v", a.tool, p, err)
	}
	return real, true, nil
}

// fsError turns the file system errors an agent can act on into user errors.
func fsError(tool, p string, err error) error {
	var pe *os.PathError
	switch {
	case errors.Is(err, os.ErrNotExist):
		return userErrorf("%s: %s does not exist", tool, p)
	case errors.Is(err, os.ErrPermission):
		return userErrorf("%s: permission denied for %s", tool, p)
	case errors.As(err, &pe):
		return userErrorf("%s: %s: %v", tool, p, pe.Err)
	}
	return fmt.Errorf("%s %s: %w", tool, p, err)
}

// display shows a resolved path relative to the workspace when it lies in it.
func (w *Workspace) display(p string) string {
	if rel, err := filepath.Rel(w.res.Real, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return rel
	}
	return p
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// checkContext returns the context's error, so that tools stop before acting
// when the call was abandoned.
func checkContext(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("call abandoned: %w", context.Cause(ctx))
	}
	return nil
}
