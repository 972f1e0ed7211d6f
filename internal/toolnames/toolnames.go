// Package toolnames names the gateway's built-in tools. It has no
// dependencies, so code that only needs the names (the Claude Code adapter in
// the kubectl plugin, which runs on any operating system) does not pull in
// the Linux-only tools and sandbox.
package toolnames

// Names of the built-in tools.
const (
	ReadFile  = "read_file"
	WriteFile = "write_file"
	EditFile  = "edit_file"
	ListDir   = "list_dir"
	Shell     = "shell"
)

// All are the built-in tools' names.
func All() []string { return []string{ReadFile, WriteFile, EditFile, ListDir, Shell} }
