package autonomy

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestCoreBehaviours(t *testing.T) {
	f := newFixture(t)
	full := f.config()
	ro := f.config()
	ro.Mode = "ReadOnly"
	ro.ReadOnlyTools = []string{"my_reader"}
	tests := []struct {
		name    string
		cfg     Config
		tool    string
		args    map[string]any
		allowed bool
		rule    string
	}{
		{name: "a path within the workspace is allowed", cfg: full, tool: "read_file", args: map[string]any{"path": "src/a.go"}, allowed: true},
		{name: "a path outside the workspace is denied", cfg: full, tool: "read_file", args: map[string]any{"path": f.outside + "/secret"}, rule: RuleWorkspaceOnly},
		{name: "a symlink escaping the workspace is denied", cfg: full, tool: "read_file", args: map[string]any{"path": "passwd"}, rule: RuleWorkspaceOnly},
		{name: "a symlink inside the workspace is allowed", cfg: full, tool: "read_file", args: map[string]any{"path": "in/a.go"}, allowed: true},
		{name: "a file under a symlinked parent that escapes is denied", cfg: full, tool: "write_file", args: map[string]any{"path": "esc/new.txt"}, rule: RuleWorkspaceOnly},
		{name: "a cyclic symlink terminates with a denial", cfg: full, tool: "read_file", args: map[string]any{"path": "loop1/x"}, rule: RuleInvalidArguments},
		{name: "readonly denies write_file", cfg: ro, tool: "write_file", args: map[string]any{"path": "a"}, rule: RuleReadOnly},
		{name: "readonly denies a file_write-style unknown tool", cfg: ro, tool: "file_write", args: map[string]any{"path": "a"}, rule: RuleReadOnly},
		{name: "readonly denies mutating tools case-insensitively", cfg: ro, tool: "Write_File", args: map[string]any{}, rule: RuleReadOnly},
		{name: "readonly allows read_file", cfg: ro, tool: "read_file", args: map[string]any{"path": "src/a.go"}, allowed: true},
		{name: "readonly allows a tool the policy declares read-only", cfg: ro, tool: "my_reader", args: map[string]any{}, allowed: true},
		{name: "readonly denies process with the default start action", cfg: ro, tool: "process", args: map[string]any{}, rule: RuleReadOnly},
		{name: "readonly allows process list", cfg: ro, tool: "process", args: map[string]any{"action": "list"}, allowed: true},
		{name: "readonly denies process kill", cfg: ro, tool: "process", args: map[string]any{"action": "kill"}, rule: RuleReadOnly},
		{name: "readonly allows automation with the default list action", cfg: ro, tool: "automation", args: map[string]any{}, allowed: true},
		{name: "readonly denies automation run", cfg: ro, tool: "automation", args: map[string]any{"action": "run"}, rule: RuleReadOnly},
		{name: "readonly allows external_cli by default", cfg: ro, tool: "external_cli", args: map[string]any{}, allowed: true},
		{name: "readonly denies external_cli execute", cfg: ro, tool: "external_cli", args: map[string]any{"action": "execute"}, rule: RuleReadOnly},
		{name: "readonly allows todo list", cfg: ro, tool: "todo", args: map[string]any{"action": "list"}, allowed: true},
		{name: "readonly denies todo add", cfg: ro, tool: "todo", args: map[string]any{"action": "add"}, rule: RuleReadOnly},
		{name: "readonly denies a non-string action", cfg: ro, tool: "automation", args: map[string]any{"action": 1}, rule: RuleReadOnly},
		{name: "process working_directory /tmp outside the workspace is denied", cfg: full, tool: "process", args: map[string]any{"working_directory": "/tmp"}, rule: RuleWorkspaceOnly},
		{name: "git cwd outside the workspace is denied", cfg: full, tool: "git", args: map[string]any{"cwd": f.outside}, rule: RuleWorkspaceOnly},
		{name: "the workspace secret glob forbids secret-data", cfg: full, tool: "read_file", args: map[string]any{"path": "secret-data"}, rule: RuleForbiddenPaths},
		{name: "the workspace secret glob forbids its absolute path", cfg: full, tool: "read_file", args: map[string]any{"path": f.ws + "/secret-data"}, rule: RuleForbiddenPaths},
		{name: "a double-star glob forbids .env at the root", cfg: full, tool: "read_file", args: map[string]any{"path": ".env"}, rule: RuleForbiddenPaths},
		{name: "a double-star glob forbids .env in a subdirectory", cfg: full, tool: "write_file", args: map[string]any{"path": "src/.env"}, rule: RuleForbiddenPaths},
		{name: "a relative name glob forbids a key anywhere", cfg: full, tool: "write_file", args: map[string]any{"path": "src/k.pem"}, rule: RuleForbiddenPaths},
		{name: "shell disabled denies shell", cfg: Config{WorkspaceRoot: f.ws}, tool: "shell", args: sh("ls"), rule: RuleShellDisabled},
		{name: "an allowed shell command is allowed", cfg: full, tool: "shell", args: sh("git status"), allowed: true},
		{name: "a shell command outside the allow-list is denied", cfg: full, tool: "shell", args: sh("rm -rf x"), rule: RuleShellAllowList},
		{name: "an empty allow-list denies every command", cfg: Config{WorkspaceRoot: f.ws, AllowShell: true}, tool: "shell", args: sh("ls"), rule: RuleShellAllowList},
		{name: "a star allow-list allows any command", cfg: Config{WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"}}, tool: "shell", args: sh("rm -rf x; make"), allowed: true},
		{name: "git star allows a log with a path", cfg: full, tool: "shell", args: sh("git log --oneline src/a.go"), allowed: true},
		{name: "a denied tool glob wins over an allowed one", cfg: Config{ToolAllow: []string{"*"}, ToolDeny: []string{"light.*"}}, tool: "light.kitchen", args: map[string]any{}, rule: RuleToolDeny},
		{name: "a tool outside the allow globs is denied", cfg: Config{ToolAllow: []string{"light.*"}}, tool: "switch.kitchen", args: map[string]any{}, rule: RuleToolAllow},
		{name: "a tool inside the allow globs is allowed", cfg: Config{ToolAllow: []string{"light.*"}}, tool: "light.kitchen", args: map[string]any{}, allowed: true},
		{name: "abc*def does not match abcZZZde", cfg: Config{ToolAllow: []string{"abc*def"}}, tool: "abcZZZde", args: map[string]any{}, rule: RuleToolAllow},
		{name: "a tool with no paths passes in full mode", cfg: full, tool: "web_search", args: map[string]any{"query": "x"}, allowed: true},
		{name: "supervised enforces like full", cfg: Config{Mode: "Supervised", WorkspaceRoot: f.ws, WorkspaceOnly: true}, tool: "read_file", args: map[string]any{"path": "/etc/passwd"}, rule: RuleWorkspaceOnly},
		{name: "code_exec is denied unless the allow-list is star", cfg: full, tool: "code_exec", args: map[string]any{"code": "print(1)"}, rule: RuleShellUnverifiable},
		{name: "code_exec is allowed with a star allow-list", cfg: Config{WorkspaceRoot: f.ws, AllowShell: true, AllowedShellCommands: []string{"*"}}, tool: "code_exec", args: map[string]any{"code": "print(1)"}, allowed: true},
		{name: "a shell cwd inside the workspace is allowed", cfg: full, tool: "shell", args: map[string]any{"command": "cat a.go", "cwd": "src"}, allowed: true},
		{name: "shell words resolve against the shell cwd", cfg: full, tool: "shell", args: map[string]any{"command": "cat ../passwd", "cwd": "src"}, rule: RuleWorkspaceOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHook(t, tt.cfg)
			v := decide(t, h, tt.tool, obj(t, tt.args))
			if v.Allowed != tt.allowed {
				t.Fatalf("allowed = %v (%s: %s), want %v", v.Allowed, v.Rule, v.Reason, tt.allowed)
			}
			if !tt.allowed && v.Rule != tt.rule {
				t.Fatalf("rule = %q (%s), want %q", v.Rule, v.Reason, tt.rule)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{name: "an invalid forbidden glob is rejected", cfg: Config{WorkspaceRoot: f.ws, ForbiddenPathGlobs: []string{"a[b"}}, want: hooks.ErrInvalidGlob},
		{name: "an invalid tool glob is rejected", cfg: Config{ToolAllow: []string{"{a"}}, want: hooks.ErrInvalidGlob},
		{name: "an invalid deny glob is rejected", cfg: Config{ToolDeny: []string{"[x"}}, want: hooks.ErrInvalidGlob},
		{name: "a shell pattern ending in a backslash is rejected", cfg: Config{WorkspaceRoot: f.ws, AllowedShellCommands: []string{`ls \`}}, want: hooks.ErrInvalidGlob},
		{name: "a relative root is rejected", cfg: Config{WorkspaceRoot: "ws", WorkspaceOnly: true}, want: hooks.ErrInvalidPath},
		{name: "a missing root is rejected", cfg: Config{WorkspaceRoot: f.ws + "/nope", WorkspaceOnly: true}, want: hooks.ErrInvalidPath},
		{name: "workspace-only without a root is rejected", cfg: Config{WorkspaceOnly: true}, want: hooks.ErrInvalidPath},
		{name: "an unknown mode is rejected", cfg: Config{Mode: "yolo"}, want: hooks.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := New(Config{ToolAllow: []string{"{a"}}); err == nil || !strings.Contains(err.Error(), `"{a"`) {
		t.Fatalf("error %v does not name the pattern", err)
	}
}

func TestMatchCommand(t *testing.T) {
	tests := []struct {
		pattern, text string
		want          bool
	}{
		{"git *", "git log --oneline src/x.go", true},
		{"git status", "git status", true},
		{"git status", "git status --short", false},
		{"ls *", "ls", false},
		{"*", "anything / at all", true},
		{"cat ?.go", "cat a.go", true},
		{`echo \*`, "echo *", true},
		{`echo \*`, "echo x", false},
		{"abc*def", "abcZZZde", false},
		{"a*b*c", "a/x b/y c", true},
	}
	for _, tt := range tests {
		if got := MatchCommand(tt.pattern, tt.text); got != tt.want {
			t.Errorf("MatchCommand(%q, %q) = %v, want %v", tt.pattern, tt.text, got, tt.want)
		}
	}
}
