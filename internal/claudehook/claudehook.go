// Package claudehook adapts Claude Code's command hooks to the toolhooks
// gateway: it reads one hook event (PreToolUse or PostToolUse) from stdin,
// maps Claude Code's tool to a toolhooks call, asks the gateway's
// POST /v1/decisions (PreToolUse) or has its result policies scan the tool's
// response with POST /v1/results (PostToolUse), and answers in Claude
// Code's hook protocol.
//
// # Protocol
//
// Claude Code runs the hook with the event as one JSON object on stdin
// (session_id, transcript_path, cwd, hook_event_name, tool_name, tool_input,
// tool_use_id, ...; PostToolUse adds tool_response). The answer is the exit
// code: 0 lets the call go on to Claude Code's own permission rules (the
// adapter never answers "allow", so it can only tighten them), 2 blocks the
// call and Claude Code hands stderr to the model as the reason. Every other
// exit code is a non-blocking error for Claude Code, so the adapter never
// uses one: every failure is either a denial (exit 2) or, only with
// OnError "allow", a loud pass (exit 0).
//
// # Tool mapping
//
//	Bash                      shell {command, cwd}
//	Read                      read_file {path}
//	Write                     write_file {path, content}
//	Edit                      edit_file {path, old_string, new_string}
//	MultiEdit                 edit_file {path, edits}
//	NotebookEdit              edit_file {path, new_string}
//	Glob                      glob {pattern, path, paths} (path: the input's, else cwd;
//	                          paths: the pattern's literal leading directory)
//	Grep                      grep {pattern, path, glob} (path: the input's, else cwd)
//	LS                        list_dir {path}
//	WebFetch                  web_fetch {url}
//	WebSearch                 web_search {query}
//	mcp__<server>__<tool>     <server>_<tool>, arguments unchanged (the gateway's upstream naming)
//	anything else             the Claude Code name unchanged, arguments unchanged
//
// The read-only names (read_file, list_dir, glob, grep, web_search) are those
// the autonomy hook's readonly mode knows; every tool not in the table keeps
// its own name and is therefore mutating for readonly mode and subject to the
// policies' tool allow/deny globs by that name (a policy can list such names
// in tools.readOnly). Arguments Claude Code adds that the gateway's tools do
// not take (description, timeout, offset, limit, replace_all, ...) are
// dropped; every path-bearing one is kept under a key the autonomy hook
// checks (path, cwd).
package claudehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/toolnames"
)

// Hook event names.
const (
	EventPreToolUse  = "PreToolUse"
	EventPostToolUse = "PostToolUse"
)

// MaxInputBytes bounds the hook event read from stdin.
const MaxInputBytes = 16 << 20

// ErrBadInput wraps every reason a hook event cannot be used.
var ErrBadInput = errors.New("invalid hook input")

// Input is a Claude Code hook event. Fields this adapter does not use are
// ignored, so that new ones Claude Code adds do not break it.
type Input struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	ToolResponse   json.RawMessage `json:"tool_response"`
}

// inputOptions admit Input's JSON names spelled exactly, and other keys
// Claude Code may add.
var inputOptions = strictjson.Options{Keys: []string{"session_id", "transcript_path", "cwd", "permission_mode",
	"hook_event_name", "tool_name", "tool_input", "tool_use_id", "tool_response"}, AllowUnknown: true}

// ReadInput reads and checks one hook event: a single JSON object of at
// most MaxInputBytes that keeps strictjson's rules (the parser the gateway
// reads the arguments with), with hook_event_name, session_id and
// tool_name set and tool_input an object (absent or null counts as {}).
func ReadInput(r io.Reader) (*Input, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading stdin: %w", ErrBadInput, err)
	}
	if len(b) > MaxInputBytes {
		return nil, fmt.Errorf("%w: stdin is larger than %d bytes", ErrBadInput, MaxInputBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: stdin is empty; Claude Code sends the hook event as one JSON object", ErrBadInput)
	}
	in, err := parseInput(b)
	switch {
	case errors.Is(err, strictjson.ErrTrailingData):
		return nil, fmt.Errorf("%w: unexpected data after the JSON object on stdin", ErrBadInput)
	case err != nil:
		return nil, fmt.Errorf("%w: stdin is not a hook event JSON object: %w", ErrBadInput, err)
	}
	var missing []string
	if in.HookEventName == "" {
		missing = append(missing, "hook_event_name")
	}
	if in.SessionID == "" {
		missing = append(missing, "session_id")
	}
	if in.ToolName == "" {
		missing = append(missing, "tool_name")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s", ErrBadInput, strings.Join(missing, ", "))
	}
	return in, nil
}

// parseInput reads b, one hook event.
func parseInput(b []byte) (*Input, error) {
	in := new(Input)
	err := strictjson.Decode(b, func(d *strictjson.Decoder) error {
		return d.Object(&inputOptions, func(key string) (err error) {
			var raw []byte
			switch key {
			case "session_id":
				in.SessionID, err = d.String()
			case "transcript_path":
				in.TranscriptPath, err = d.String()
			case "cwd":
				in.Cwd, err = d.String()
			case "permission_mode":
				in.PermissionMode, err = d.String()
			case "hook_event_name":
				in.HookEventName, err = d.String()
			case "tool_name":
				in.ToolName, err = d.String()
			case "tool_use_id":
				in.ToolUseID, err = d.String()
			case "tool_input":
				raw, err = d.Raw()
				in.ToolInput = bytes.Clone(raw)
			case "tool_response":
				raw, err = d.Raw()
				in.ToolResponse = bytes.Clone(raw)
			default:
				err = d.Skip()
			}
			return err
		})
	})
	return in, err
}

// toolArgs reads tool_input as an object, with strictjson as the gateway
// reads the arguments.
func (in *Input) toolArgs() (map[string]any, error) {
	raw := bytes.TrimSpace(in.ToolInput)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{}, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("%w: tool_input of %s is not a JSON object", ErrBadInput, in.ToolName)
	}
	m, err := strictjson.Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: tool_input of %s: %w", ErrBadInput, in.ToolName, err)
	}
	return m, nil
}

// Call is the toolhooks call a Claude Code tool use maps to.
type Call struct {
	Tool string
	Args map[string]any
}

// MapTool maps a Claude Code tool use to a toolhooks call (see the package
// documentation for the table). A mapped tool whose required argument is
// missing or not a string is an error, never a call with the check left out.
func MapTool(in *Input) (Call, error) {
	args, err := in.toolArgs()
	if err != nil {
		return Call{}, err
	}
	m := mapper{in: in, src: args, dst: map[string]any{}}
	switch in.ToolName {
	case "Bash":
		m.req("command", "command")
		m.opt("cwd", in.Cwd)
		return m.done(toolnames.Shell)
	case "Read":
		m.req("file_path", "path")
		return m.done(toolnames.ReadFile)
	case "Write":
		m.req("file_path", "path")
		m.req("content", "content")
		return m.done(toolnames.WriteFile)
	case "Edit":
		m.req("file_path", "path")
		m.req("old_string", "old_string")
		m.req("new_string", "new_string")
		return m.done(toolnames.EditFile)
	case "MultiEdit":
		m.req("file_path", "path")
		m.dst["edits"] = args["edits"]
		return m.done(toolnames.EditFile)
	case "NotebookEdit":
		m.req("notebook_path", "path")
		m.copyIf("new_source", "new_string")
		return m.done(toolnames.EditFile)
	case "Glob":
		m.req("pattern", "pattern")
		m.pathOrCwd()
		m.patternBase()
		return m.done("glob")
	case "Grep":
		m.req("pattern", "pattern")
		m.pathOrCwd()
		m.copyIf("glob", "glob")
		return m.done("grep")
	case "LS":
		m.req("path", "path")
		return m.done(toolnames.ListDir)
	case "WebFetch":
		m.req("url", "url")
		return m.done("web_fetch")
	case "WebSearch":
		m.req("query", "query")
		return m.done("web_search")
	}
	if rest, ok := strings.CutPrefix(in.ToolName, "mcp__"); ok {
		server, tool, ok := strings.Cut(rest, "__")
		if !ok || server == "" || tool == "" {
			return Call{}, fmt.Errorf("%w: MCP tool name %q is not mcp__<server>__<tool>", ErrBadInput, in.ToolName)
		}
		return Call{Tool: server + "_" + tool, Args: args}, nil
	}
	return Call{Tool: in.ToolName, Args: args}, nil
}

// mcpServer returns the server of an mcp__<server>__<tool> name.
func mcpServer(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", false
	}
	server, tool, ok := strings.Cut(rest, "__")
	return server, ok && server != "" && tool != ""
}

// mapper builds a call's arguments, remembering the first error.
type mapper struct {
	in  *Input
	src map[string]any
	dst map[string]any
	err error
}

// req copies the string argument from into to, failing when it is absent or not a string.
func (m *mapper) req(from, to string) {
	v, ok := m.src[from]
	s, isStr := v.(string)
	switch {
	case m.err != nil:
	case !ok || v == nil:
		m.err = fmt.Errorf("%w: %s needs the argument %q", ErrBadInput, m.in.ToolName, from)
	case !isStr:
		m.err = fmt.Errorf("%w: %s: argument %q must be a string", ErrBadInput, m.in.ToolName, from)
	default:
		m.dst[to] = s
	}
}

// copyIf copies argument from into to when present.
func (m *mapper) copyIf(from, to string) {
	if v, ok := m.src[from]; ok && v != nil {
		m.dst[to] = v
	}
}

// opt sets key to v when v is not empty.
func (m *mapper) opt(key, v string) {
	if v != "" {
		m.dst[key] = v
	}
}

// pathOrCwd sets path to the input's path, else to the session's cwd.
func (m *mapper) pathOrCwd() {
	if v, ok := m.src["path"]; ok && v != nil {
		m.dst["path"] = v
		return
	}
	m.opt("path", m.in.Cwd)
}

// patternBase adds the directory a glob pattern starts from (its literal
// leading segments, appended to the path when relative) as "paths", so that
// "/etc/**" or "../../**" is checked like the directory it lists.
func (m *mapper) patternBase() {
	pattern, _ := m.dst["pattern"].(string)
	if pattern == "" {
		return
	}
	var lit []string
	for seg := range strings.SplitSeq(pattern, "/") {
		if strings.ContainsAny(seg, "*?[{\\") {
			break
		}
		lit = append(lit, seg)
	}
	base := strings.Join(lit, "/")
	if strings.HasPrefix(pattern, "/") && base == "" {
		base = "/"
	}
	if base == "" {
		return
	}
	if dir, ok := m.dst["path"].(string); ok && dir != "" && !strings.HasPrefix(base, "/") && !strings.HasPrefix(base, "~") {
		// Not path.Join: ".." stays for the autonomy hook to resolve
		// symlink-safely, never cleaned lexically here.
		base = strings.TrimRight(dir, "/") + "/" + base
	}
	m.dst["paths"] = []any{base}
}

func (m *mapper) done(tool string) (Call, error) {
	if m.err != nil {
		return Call{}, m.err
	}
	return Call{Tool: tool, Args: m.dst}, nil
}
