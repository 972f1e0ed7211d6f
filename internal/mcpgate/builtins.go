package mcpgate

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/tools"
)

// builtinTools describe the gateway's built-in tools (internal/tools) for tools/list.
func builtinTools() []*mcp.Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	obj := func(props map[string]any, required ...string) map[string]any {
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	const path = "path"
	ro, destructive := true, false
	return []*mcp.Tool{
		{Name: tools.ReadFile, Description: "Read a text file in the workspace.",
			InputSchema: obj(map[string]any{path: str("file path, relative to the workspace or absolute")}, path),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}},
		{Name: tools.WriteFile, Description: "Create or replace a file with the given content.",
			InputSchema: obj(map[string]any{path: str("file path"), "content": str("the file's new content")}, path, "content"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		{Name: tools.EditFile, Description: "Replace one exact occurrence of old_string with new_string in a file.",
			InputSchema: obj(map[string]any{path: str("file path"), "old_string": str("text to replace (must occur exactly once)"),
				"new_string": str("replacement text")}, path, "old_string", "new_string")},
		{Name: tools.ListDir, Description: "List a directory in the workspace (the workspace root by default).",
			InputSchema: obj(map[string]any{path: str("directory path")}),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}},
		{Name: tools.Shell, Description: "Run a shell command in the workspace.",
			InputSchema: obj(map[string]any{"command": str("the command line"), "cwd": str("working directory")}, "command")},
	}
}
