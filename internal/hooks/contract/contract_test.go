package contract

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// workspace builds a real directory tree with real symlinks:
//
//	<tmp>/ws/                 the workspace root
//	  allowed/file.txt
//	  allowed/sub/
//	  allowed/inner -> sub          (a symlink that stays inside)
//	  allowed/escape -> ../other    (a symlink out of the allowed prefix)
//	  allowed/toout -> <tmp>/outside (a symlink out of the workspace)
//	  allowed/loop1 -> loop2, loop2 -> loop1 (a cycle)
//	  a/ ab/ other/
//	<tmp>/outside/secret
type workspace struct {
	root, outside string
}

func newWorkspace(t *testing.T) workspace {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(tmp, "ws")
	out := filepath.Join(tmp, "outside")
	for _, d := range []string{"allowed/sub", "a", "ab", "other", "data/a", "data/ab"} {
		mkdir(t, filepath.Join(ws, d))
	}
	mkdir(t, out)
	write(t, filepath.Join(ws, "allowed", "file.txt"))
	write(t, filepath.Join(out, "secret"))
	symlink(t, "sub", filepath.Join(ws, "allowed", "inner"))
	symlink(t, "../other", filepath.Join(ws, "allowed", "escape"))
	symlink(t, out, filepath.Join(ws, "allowed", "toout"))
	symlink(t, "loop2", filepath.Join(ws, "allowed", "loop1"))
	symlink(t, "loop1", filepath.Join(ws, "allowed", "loop2"))
	return workspace{root: ws, outside: out}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func newHook(t testing.TB, root string, c *Contract) *ContractScope {
	t.Helper()
	cfg := Config{Contract: c, WorkspaceRoot: root}
	if c == nil {
		// No contract binds the calls: subjects no call matches, over a
		// contract that would deny every file-system tool if they did.
		m, err := hooks.NewSubjectMatcher(hooks.Subjects{Sessions: []string{"no-such-session"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Subjects = m
		cfg.Contract = &Contract{MaxToolCalls: 1, ScopedCapabilities: []Capability{{Tool: "nothing", AllowedPaths: []string{"/nonexistent"}}}}
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

func newCall(t testing.TB, tool, args string) *hooks.Call {
	t.Helper()
	c := hooks.NewCall(tool, args)
	c.SessionID, c.ChannelID, c.SenderID = "sess-1", "chan-1", "alice"
	return c
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\x00", `\u0000`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func TestNewValidatesItsConfiguration(t *testing.T) {
	ws := newWorkspace(t)
	c := &Contract{}
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"a missing contract is an error", Config{WorkspaceRoot: ws.root}, true},
		{"a workspace root that does not exist is an error", Config{Contract: c, WorkspaceRoot: filepath.Join(ws.root, "nope")}, true},
		{"a relative workspace root is an error", Config{Contract: c, WorkspaceRoot: "ws"}, true},
		{"a workspace root that is a file is an error", Config{Contract: c, WorkspaceRoot: filepath.Join(ws.root, "allowed", "file.txt")}, true},
		{"an existing workspace root is accepted", Config{Contract: c, WorkspaceRoot: ws.root}, false},
		{"no workspace root is accepted", Config{Contract: c}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestContractValidate(t *testing.T) {
	tests := []struct {
		name    string
		c       *Contract
		wantErr bool
	}{
		{"a nil contract is invalid", nil, true},
		{"a negative budget is invalid", &Contract{MaxToolCalls: -1}, true},
		{"a capability without a tool is invalid", &Contract{ScopedCapabilities: []Capability{{Tool: " "}}}, true},
		{"an empty allowed path is invalid", &Contract{AllowedPaths: []string{""}}, true},
		{"an allowed path with a NUL byte is invalid", &Contract{ScopedCapabilities: []Capability{{Tool: "read_file", AllowedPaths: []string{"a\x00b"}}}}, true},
		{"the empty contract is valid", &Contract{}, false},
		{"a scoped contract is valid", &Contract{MaxToolCalls: 3, ScopedCapabilities: []Capability{{Tool: "read_file", AllowedPaths: []string{"/x"}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidContract) {
				t.Fatalf("Validate error %v does not wrap ErrInvalidContract", err)
			}
		})
	}
}

// TestBeforeScope covers the contract's scope rules (no contract allows
// everything; scoped capabilities, allowed paths and their resolution), and
// adversarial paths.
func TestBeforeScope(t *testing.T) {
	ws := newWorkspace(t)
	allowed := filepath.Join(ws.root, "allowed")
	scoped := &Contract{ScopedCapabilities: []Capability{
		{Tool: "read_file", AllowedPaths: []string{"allowed"}},
		{Tool: "write_file", AllowedPaths: []string{allowed}},
		{Tool: "list_dir", AllowedPaths: []string{"data/a"}},
		{Tool: "process", AllowedPaths: []string{"allowed"}},
		{Tool: "git", AllowedPaths: []string{"allowed"}},
		{Tool: "shell", AllowedPaths: []string{"allowed"}},
		{Tool: "apply_patch", AllowedPaths: []string{"allowed"}},
		{Tool: "web_search"},
	}}
	grantsShell := &Contract{ScopedCapabilities: []Capability{{Tool: "shell"}, {Tool: "read_file", AllowedPaths: []string{"allowed"}}}}
	topLevel := &Contract{AllowedPaths: []string{"allowed"}, ScopedCapabilities: []Capability{{Tool: "code_exec"}}}
	topLevelOnly := &Contract{AllowedPaths: []string{"allowed"}}
	unionCaps := &Contract{ScopedCapabilities: []Capability{
		{Tool: "read_file", AllowedPaths: []string{"a"}},
		{Tool: "READ_FILE", AllowedPaths: []string{"ab"}},
	}}
	tests := []struct {
		name     string
		contract *Contract
		tool     string
		args     string
		want     bool
		wantRule string
	}{
		// No contract, and plain paths in and out of scope.
		{"no contract allows everything", nil, "shell", `{"command":"rm -rf /"}`, true, ""},
		{"a path within scope is allowed", scoped, "read_file", `{"path":"allowed/file.txt"}`, true, ""},
		{"an absolute path within scope is allowed", scoped, "read_file", `{"path":` + jsonString(filepath.Join(allowed, "file.txt")) + `}`, true, ""},
		{"a path outside scope is denied", scoped, "read_file", `{"path":"other/x"}`, false, RuleScopedCapabilities},
		{"a process working_directory outside scope is denied", scoped, "process", `{"action":"start","command":"make","working_directory":"/tmp"}`, false, RuleScopedCapabilities},
		{"a process working_directory inside scope is allowed", scoped, "process", `{"action":"start","command":"make test","working_directory":"allowed"}`, true, ""},
		{"a process without a working_directory is denied", scoped, "process", `{"action":"list"}`, false, RuleScopedCapabilities},
		{"a scoped shell with no resolvable path is denied", scoped, "shell", `{"command":"ls -la"}`, false, RuleScopedCapabilities},
		{"a scoped shell with a cwd in scope is allowed", scoped, "shell", `{"command":"ls -la","cwd":"allowed"}`, true, ""},
		{"a scoped shell naming a file in scope is allowed", scoped, "shell", `{"command":"cat allowed/file.txt | wc -l"}`, true, ""},
		{"a scoped shell globbing in scope is allowed", scoped, "shell", `{"command":"cat *.txt","cwd":"allowed"}`, true, ""},
		// dash reads the names of allowed/.. to expand this, whether or not anything matches.
		{"a glob that makes the shell read a directory out of scope is denied", scoped, "shell",
			`{"command":"cat .[[:punct:]]/nothing-here*","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a git call without cwd is denied", scoped, "git", `{"args":["status"]}`, false, RuleScopedCapabilities},
		{"a git call with cwd in scope is allowed", scoped, "git", `{"cwd":"allowed","args":["status"]}`, true, ""},
		{"a git -C option out of scope is denied", scoped, "git", `{"cwd":"allowed","args":["-C","/etc","status"]}`, false, RuleScopedCapabilities},
		{"a git --work-tree option out of scope is denied", scoped, "git", `{"cwd":"allowed","args":["--work-tree=../other","status"]}`, false, RuleScopedCapabilities},
		{"a git attached -C.. option is denied", scoped, "git", `{"cwd":"allowed","args":["-C..","status"]}`, false, RuleScopedCapabilities},

		// Rule 3: scoped contract, tools without capability.
		{"a file-system tool without a capability is denied under a scoped contract", scoped, "edit_file", `{"path":"allowed/file.txt"}`, false, RuleScopedCapabilities},
		{"code_exec without a grant is denied under a scoped contract", scoped, "code_exec", `{"code":"print(1)"}`, false, RuleScopedCapabilities},
		{"tool classification ignores case", scoped, "Code_Exec", `{"code":"print(1)"}`, false, RuleScopedCapabilities},
		{"a non-file-system tool without a capability is allowed", scoped, "web_fetch", `{"url":"https://x"}`, true, ""},
		{"a granted non-file-system tool is allowed", scoped, "web_search", `{"q":"x"}`, true, ""},
		// Rule 5.
		{"an unrestricted shell grant allows any command", grantsShell, "shell", `{"command":"cat /etc/passwd"}`, true, ""},
		// Several capabilities for one tool add up.
		{"the union of a tool's capabilities allows the first prefix", unionCaps, "read_file", `{"path":"a/x"}`, true, ""},
		{"the union of a tool's capabilities allows the second prefix", unionCaps, "read_file", `{"path":"ab/x"}`, true, ""},
		// Rule 6: top-level allowed paths.
		{"a top-level prefix allows a file-system tool without a capability", topLevel, "write_file", `{"path":"allowed/new.txt"}`, true, ""},
		{"a top-level prefix denies a path outside it", topLevel, "write_file", `{"path":"other/new.txt"}`, false, RuleAllowedPaths},
		{"a top-level prefix denies a git cwd outside it", topLevel, "git", `{"cwd":"other"}`, false, RuleAllowedPaths},
		{"a top-level prefix requires a path from a file-system tool", topLevel, "list_dir", `{}`, false, RuleAllowedPaths},
		{"a top-level prefix lets explicitly granted code_exec without paths through", topLevel, "code_exec", `{"code":"1"}`, true, ""},
		{"a top-level prefix checks code_exec's working directory", topLevel, "code_exec", `{"code":"1","cwd":"other"}`, false, RuleAllowedPaths},
		{"a top-level prefix requires a grant for shell", topLevelOnly, "shell", `{"command":"ls","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a top-level prefix does not restrict other tools", topLevelOnly, "web_fetch", `{"path":"/etc/passwd"}`, true, ""},

		// Adversarial paths.
		{"a .. traversal out of scope is denied", scoped, "read_file", `{"path":"allowed/../other/x"}`, false, RuleScopedCapabilities},
		{"a deep .. traversal to / is denied", scoped, "read_file", `{"path":"allowed/../../../../../../etc/passwd"}`, false, RuleScopedCapabilities},
		{"a symlink inside the scope is allowed", scoped, "read_file", `{"path":"allowed/inner/x"}`, true, ""},
		{"a symlink escaping the allowed prefix is denied", scoped, "read_file", `{"path":"allowed/escape/x"}`, false, RuleScopedCapabilities},
		{"a symlink escaping the workspace is denied", scoped, "read_file", `{"path":"allowed/toout/secret"}`, false, RuleScopedCapabilities},
		{"a .. after a symlink is applied to its target, not lexically", scoped, "read_file", `{"path":"allowed/escape/../file.txt"}`, false, RuleScopedCapabilities},
		{"a .. after a symlink that lands back in scope is allowed", scoped, "read_file", `{"path":"allowed/escape/../allowed/file.txt"}`, true, ""},
		{"a cyclic symlink is denied", scoped, "read_file", `{"path":"allowed/loop1/x"}`, false, RuleInvalidArguments},
		{"a prefix is not matched by a longer sibling name", scoped, "list_dir", `{"path":"data/ab"}`, false, RuleScopedCapabilities},
		{"a prefix is matched by itself", scoped, "list_dir", `{"path":"data/a"}`, true, ""},
		{"a NUL byte in a path is denied", scoped, "read_file", `{"path":"allowed/file.txt\u0000/../../etc"}`, false, RuleInvalidArguments},
		{"an empty path is denied", scoped, "read_file", `{"path":""}`, false, RuleInvalidArguments},
		{"a missing path is denied", scoped, "read_file", `{}`, false, RuleScopedCapabilities},
		{"a non-string path is denied", scoped, "read_file", `{"path":42}`, false, RuleInvalidArguments},
		{"every path of an array is checked", scoped, "read_file", `{"paths":["allowed/file.txt","other/x"]}`, false, RuleScopedCapabilities},
		{"a second path key is checked", scoped, "read_file", `{"path":"allowed/file.txt","file_path":"/etc/passwd"}`, false, RuleScopedCapabilities},
		{"a path key in another case is checked", scoped, "read_file", `{"PATH":"/etc/passwd"}`, false, RuleScopedCapabilities},
		{"a home-relative path is resolved and denied", scoped, "read_file", `{"path":"~/.ssh/id_rsa"}`, false, ""},
		{"a doubled-slash path out of scope is denied", scoped, "read_file", `{"path":"allowed//..//other"}`, false, RuleScopedCapabilities},
		{"invalid JSON arguments are denied", scoped, "read_file", `{"path":`, false, RuleInvalidArguments},
		{"arguments that are not an object are denied", scoped, "read_file", `["allowed/file.txt"]`, false, RuleInvalidArguments},

		// Shell commands under a scoped grant.
		{"a shell redirect out of scope is denied", scoped, "shell", `{"command":"echo x > /etc/passwd","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a shell argument traversing out is denied", scoped, "shell", `{"command":"cat ../other/x","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a shell option value out of scope is denied", scoped, "shell", `{"command":"tar -tf x.tar --directory=/tmp","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a shell attached option value out of scope is denied", scoped, "shell", `{"command":"grep -f../other/x y","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a shell cd is denied", scoped, "shell", `{"command":"cd sub && cat x","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a shell builtin cd is denied", scoped, "shell", `{"command":"builtin cd ..; cat x","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a nested shell is denied", scoped, "shell", `{"command":"sh -c 'cat x'","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a nested shell by path is denied", scoped, "shell", `{"command":"/bin/bash -c id","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"eval is denied", scoped, "shell", `{"command":"eval cat x","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a variable is denied", scoped, "shell", `{"command":"cat $HOME/x","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a command substitution is denied", scoped, "shell", `{"command":"cat $(echo /etc/passwd)","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"backticks are denied", scoped, "shell", "{\"command\":\"cat `echo x`\",\"cwd\":\"allowed\"}", false, RuleInvalidArguments},
		{"a glob through an escaping symlink is denied", scoped, "shell", `{"command":"cat escap[e]/x","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a bracket class through an escaping symlink is denied", scoped, "shell", `{"command":"cat escap[[:alpha:]]/x","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"an equivalence class is denied", scoped, "shell", `{"command":"cat escap[[=e=]]/x","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a brace redirect target reaching out is denied", scoped, "shell", `{"command":"ls > {../other/x,}","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a brace word with an empty alternative is allowed", scoped, "shell", `{"command":"cat file{.txt,}","cwd":"allowed"}`, true, ""},
		{"a dash reading of [[ is checked", scoped, "shell", `{"command":"[ x ] || cat ../other/x > y","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a brace expansion reaching out is denied", scoped, "shell", `{"command":"cat {x,..}/other","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a glob that can match .. is denied", scoped, "shell", `{"command":"cat .*/other/x","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a glob in scope is allowed", scoped, "shell", `{"command":"cat *.txt","cwd":"allowed"}`, true, ""},
		{"a quoted path out of scope is denied", scoped, "shell", `{"command":"cat '/etc/passwd'","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"an escaped path out of scope is denied", scoped, "shell", `{"command":"cat \\/etc\\/passwd","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a tilde word is resolved and denied", scoped, "shell", `{"command":"cat ~/x","cwd":"allowed"}`, false, ""},
		{"a here-document with a substitution is denied", scoped, "shell", `{"command":"cat <<EOF\n$(id)\nEOF","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a here-document with static text is allowed", scoped, "shell", `{"command":"cat <<EOF\nhello /etc\nEOF","cwd":"allowed"}`, true, ""},
		{"a command that does not parse is denied", scoped, "shell", `{"command":"cat 'x","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a dot command is denied", scoped, "shell", `{"command":". ./env.sh","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a path after a colon is checked", scoped, "shell", `{"command":"scp a host:/etc/x","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a shell cwd escaping via symlink is denied", scoped, "shell", `{"command":"ls","cwd":"allowed/escape"}`, false, RuleScopedCapabilities},
		{"a program that runs programs is denied", scoped, "shell", `{"command":"find . -exec cat /etc/passwd ;","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a go test -exec is denied", scoped, "shell", `{"command":"go test --exec=/bin/sh ./...","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"sed's e command is denied", scoped, "shell", `{"command":"sed -n 1eid file.txt","cwd":"allowed"}`, false, RuleInvalidArguments},
		{"a recursive reader through an escaping symlink is denied", scoped, "shell", `{"command":"grep -R x .","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"an abbreviated recursive option is read as one", scoped, "shell", `{"command":"grep --recur x .","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a git revision reads the whole repository", scoped, "shell", `{"command":"git show HEAD","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a git object path out of scope is denied", scoped, "shell", `{"command":"git show origin/main:../other/x","cwd":"allowed"}`, false, RuleScopedCapabilities},
		{"a process command out of scope is denied", scoped, "process", `{"command":"cat /etc/shadow","working_directory":"allowed"}`, false, RuleScopedCapabilities},

		// apply_patch names its files in the patch text.
		{"a patch within scope is allowed", scoped, "apply_patch", `{"input":"*** Begin Patch\n*** Update File: allowed/file.txt\n@@\n-x\n+y\n*** End Patch"}`, true, ""},
		{"a patch naming a file out of scope is denied", scoped, "apply_patch", `{"input":"*** Begin Patch\n*** Add File: ../outside/x\n+y\n*** End Patch"}`, false, RuleScopedCapabilities},
		{"a unified diff naming a file out of scope is denied", scoped, "apply_patch", `{"patch":"--- a/allowed/file.txt\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-x\n+y\n"}`, false, RuleScopedCapabilities},
		{"a patch with a move out of scope is denied", scoped, "apply_patch", `{"input":"*** Update File: allowed/file.txt\n*** Move to: other/file.txt\n"}`, false, RuleScopedCapabilities},
		{"a patch with no file is denied", scoped, "apply_patch", `{"input":"nothing"}`, false, RuleScopedCapabilities},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHook(t, ws.root, tt.contract)
			v, err := h.Before(context.Background(), newCall(t, tt.tool, tt.args))
			if err != nil {
				t.Fatalf("Before error: %v", err)
			}
			if v.Allowed != tt.want {
				t.Fatalf("Allowed = %v, want %v (rule %q: %s)", v.Allowed, tt.want, v.Rule, v.Reason)
			}
			if !v.Allowed {
				if tt.wantRule != "" && v.Rule != tt.wantRule {
					t.Errorf("Rule = %q, want %q (%s)", v.Rule, tt.wantRule, v.Reason)
				}
				if v.Reason == "" {
					t.Error("a denial has no reason")
				}
			}
		})
	}
}

func TestBeforeWithoutWorkspaceRootDeniesPathChecks(t *testing.T) {
	h, err := New(Config{Contract: &Contract{ScopedCapabilities: []Capability{{Tool: "read_file", AllowedPaths: []string{"/"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := h.Before(context.Background(), newCall(t, "read_file", `{"path":"/etc/passwd"}`))
	if v.Allowed {
		t.Fatal("a path check without a workspace root was allowed")
	}
	v, _ = h.Before(context.Background(), newCall(t, "web_search", `{}`))
	if !v.Allowed {
		t.Fatalf("a call needing no path check was denied: %s", v.Reason)
	}
}

func TestBeforeDeniesAnUnresolvableAllowedPrefix(t *testing.T) {
	ws := newWorkspace(t)
	h := newHook(t, ws.root, &Contract{ScopedCapabilities: []Capability{{Tool: "read_file", AllowedPaths: []string{"allowed/loop1"}}}})
	v, _ := h.Before(context.Background(), newCall(t, "read_file", `{"path":"allowed/file.txt"}`))
	if v.Allowed || !strings.Contains(v.Reason, "cannot be resolved") {
		t.Fatalf("verdict = %+v, want a denial naming the unresolvable prefix", v)
	}
}

// TestAllowedPrefixIsFrozenWhenFirstUsed: retargeting a symlink inside an
// allowed prefix afterwards cannot move the scope.
func TestAllowedPrefixIsFrozenWhenFirstUsed(t *testing.T) {
	ws := newWorkspace(t)
	link := filepath.Join(ws.root, "current")
	symlink(t, "allowed", link)
	h := newHook(t, ws.root, &Contract{ScopedCapabilities: []Capability{{Tool: "read_file", AllowedPaths: []string{"current"}}}})
	v, _ := h.Before(context.Background(), newCall(t, "read_file", `{"path":"current/file.txt"}`))
	if !v.Allowed {
		t.Fatalf("path under the symlinked prefix denied: %s", v.Reason)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	symlink(t, "..", link)
	for _, p := range []string{"current/outside/secret", "current/ws/other/x"} {
		v, _ = h.Before(context.Background(), newCall(t, "read_file", `{"path":`+jsonString(p)+`}`))
		if v.Allowed {
			t.Fatalf("%s through a retargeted prefix symlink was allowed", p)
		}
	}
	v, _ = h.Before(context.Background(), newCall(t, "read_file", `{"path":"allowed/file.txt"}`))
	if !v.Allowed {
		t.Fatalf("the frozen prefix no longer allows its original target: %s", v.Reason)
	}
}
