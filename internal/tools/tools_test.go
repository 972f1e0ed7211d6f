package tools_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/tools"
)

// workspace returns a temporary workspace with a few files and its tools by name.
func workspace(t *testing.T, opts tools.Options) (string, map[string]hooks.Tool) {
	t.Helper()
	ws := t.TempDir()
	for name, body := range map[string]string{
		"README.md":   "# hello\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
		"dup.txt":     "x x\n",
	} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list, err := tools.Builtins(ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]hooks.Tool{}
	for _, tl := range list {
		byName[tl.Name()] = tl
	}
	return ws, byName
}

// run calls tl and returns its output, or the text of the *hooks.ToolError
// it failed with: a call the agent is told "Error: ..." must fail that way
// (so that it is audited as failed), never succeed with the text.
func run(t *testing.T, tl hooks.Tool, args map[string]any) string {
	t.Helper()
	out, err := tl.Execute(guarded(t, context.Background()), args)
	if te, ok := errors.AsType[*hooks.ToolError](err); ok {
		if out != "" || !strings.HasPrefix(te.Text, "Error: ") {
			t.Fatalf("%s(%v) failed with output %q and error text %q", tl.Name(), args, out, te.Text)
		}
		return te.Text
	}
	if err != nil {
		t.Fatalf("%s(%v) failed: %v", tl.Name(), args, err)
	}
	if strings.HasPrefix(out, "Error: ") {
		t.Fatalf("%s(%v) succeeded with the error text %q", tl.Name(), args, out)
	}
	return out
}

func TestBuiltinsAreTheFiveTools(t *testing.T) {
	_, byName := workspace(t, tools.Options{})
	for _, n := range tools.Names() {
		if byName[n] == nil {
			t.Errorf("no tool %s", n)
		}
	}
	if len(byName) != 5 {
		t.Errorf("got %d tools", len(byName))
	}
	if _, err := tools.Builtins("relative/dir", tools.Options{}); err == nil {
		t.Error("a relative workspace was accepted")
	}
	if _, err := tools.Builtins(filepath.Join(t.TempDir(), "missing"), tools.Options{}); err == nil {
		t.Error("a missing workspace was accepted")
	}
}

func TestReadFile(t *testing.T) {
	ws, tl := workspace(t, tools.Options{MaxReadBytes: 16})
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a", 17)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bin"), []byte{0xff, 0xfe}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "README.md"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"a relative path resolves against the workspace", map[string]any{"path": "README.md"}, "# hello\n"},
		{"an absolute path is read as is", map[string]any{"path": filepath.Join(ws, "README.md")}, "# hello\n"},
		{"dot-dot inside the workspace resolves", map[string]any{"path": "src/../README.md"}, "# hello\n"},
		{"a symlink is followed", map[string]any{"path": "link"}, "# hello\n"},
		{"a missing file is an Error text", map[string]any{"path": "nope.txt"}, "Error: read_file: nope.txt does not exist"},
		{"a directory is an Error text", map[string]any{"path": "src"}, "Error: read_file: src is a directory"},
		{"a file over the limit is an Error text", map[string]any{"path": "big.txt"}, "Error: read_file: big.txt is larger than the 16-byte limit"},
		{"binary content is an Error text", map[string]any{"path": "bin"}, "Error: read_file: bin is not UTF-8 text"},
		{"a missing path argument is an Error text", map[string]any{}, `Error: read_file needs the argument "path"`},
		{"a non-string path is an Error text", map[string]any{"path": 3}, `Error: read_file: argument "path" must be a string`},
		{"an empty path is an Error text", map[string]any{"path": ""}, `must not be empty`},
		{"a NUL byte is an Error text", map[string]any{"path": "a\x00b"}, `Error: read_file: cannot resolve`},
		{"an unknown argument is an Error text", map[string]any{"path": "README.md", "file_path": "/etc/passwd"}, `Error: read_file does not take the argument(s) "file_path"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, tl[tools.ReadFile], tc.args)
			if !strings.Contains(out, tc.want) {
				t.Errorf("got %q, want it to contain %q", out, tc.want)
			}
		})
	}
}

func TestRelativePathsNeverUseTheProcessDirectory(t *testing.T) {
	ws, tl := workspace(t, tools.Options{})
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "README.md"), []byte("wrong file"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(other)
	if out := run(t, tl[tools.ReadFile], map[string]any{"path": "README.md"}); out != "# hello\n" {
		t.Errorf("read %q, want the workspace's README", out)
	}
	run(t, tl[tools.WriteFile], map[string]any{"path": "new.txt", "content": "x"})
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err != nil {
		t.Errorf("write_file did not write into the workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "new.txt")); err == nil {
		t.Error("write_file wrote into the process directory")
	}
}

func TestWriteFile(t *testing.T) {
	ws, tl := workspace(t, tools.Options{MaxWriteBytes: 8})
	out := run(t, tl[tools.WriteFile], map[string]any{"path": "a/b/c.txt", "content": "hi"})
	if out != "Wrote 2 bytes to a/b/c.txt" {
		t.Errorf("got %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a/b/c.txt")); string(b) != "hi" {
		t.Errorf("file holds %q", b)
	}
	if err := os.Chmod(filepath.Join(ws, "README.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, tl[tools.WriteFile], map[string]any{"path": "README.md", "content": ""})
	st, err := os.Stat(filepath.Join(ws, "README.md"))
	if err != nil || st.Size() != 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("overwritten file: %v %v", st, err)
	}
	for name, tc := range map[string]struct {
		args map[string]any
		want string
	}{
		"content over the limit":   {map[string]any{"path": "x", "content": "123456789"}, "Error: write_file: content is larger than the 8-byte limit"},
		"missing content":          {map[string]any{"path": "x"}, `Error: write_file needs the argument "content"`},
		"a directory as the path":  {map[string]any{"path": "src", "content": "x"}, "Error: write_file: src"},
		"a file as a parent":       {map[string]any{"path": "README.md/x", "content": "x"}, "Error: write_file:"},
		"a non-string content":     {map[string]any{"path": "x", "content": 1}, `argument "content" must be a string`},
		"a null path":              {map[string]any{"path": nil, "content": "x"}, `needs the argument "path"`},
		"an unexpected extra args": {map[string]any{"path": "x", "content": "x", "mode": "0777"}, `does not take the argument(s) "mode"`},
	} {
		t.Run(name, func(t *testing.T) {
			if out := run(t, tl[tools.WriteFile], tc.args); !strings.HasPrefix(out, "Error: ") || !strings.Contains(out, tc.want) {
				t.Errorf("got %q, want %q", out, tc.want)
			}
		})
	}
	ents, _ := os.ReadDir(ws)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".toolhooks-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestEditFile(t *testing.T) {
	ws, tl := workspace(t, tools.Options{})
	if out := run(t, tl[tools.EditFile], map[string]any{"path": "src/main.go", "old_string": "func main() {}", "new_string": "func main() { println() }"}); out != "Edited src/main.go" {
		t.Errorf("got %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src/main.go")); !strings.Contains(string(b), "println()") {
		t.Errorf("file holds %q", b)
	}
	for name, tc := range map[string]struct {
		args map[string]any
		want string
	}{
		"no match":           {map[string]any{"path": "README.md", "old_string": "absent", "new_string": ""}, "old_string does not occur in README.md"},
		"several matches":    {map[string]any{"path": "dup.txt", "old_string": "x", "new_string": "y"}, "old_string occurs 2 times in dup.txt"},
		"empty old_string":   {map[string]any{"path": "dup.txt", "old_string": "", "new_string": "y"}, `argument "old_string" must not be empty`},
		"missing new_string": {map[string]any{"path": "dup.txt", "old_string": "x"}, `needs the argument "new_string"`},
		"missing file":       {map[string]any{"path": "nope", "old_string": "x", "new_string": "y"}, "nope does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			if out := run(t, tl[tools.EditFile], tc.args); !strings.HasPrefix(out, "Error: ") || !strings.Contains(out, tc.want) {
				t.Errorf("got %q, want %q", out, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "dup.txt")); string(b) != "x x\n" {
		t.Errorf("a failed edit changed the file: %q", b)
	}
}

func TestListDir(t *testing.T) {
	ws, tl := workspace(t, tools.Options{MaxListEntries: 2})
	if err := os.Symlink("/etc", filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	out := run(t, tl[tools.ListDir], map[string]any{})
	if out != "README.md\ndup.txt\n[2 more entries not shown]\n" {
		t.Errorf("root listing %q", out)
	}
	_, tl = workspace(t, tools.Options{})
	if out := run(t, tl[tools.ListDir], map[string]any{"path": "src"}); out != "main.go\n" {
		t.Errorf("src listing %q", out)
	}
	if out := run(t, tl[tools.ListDir], map[string]any{"path": "README.md"}); !strings.HasPrefix(out, "Error: list_dir: README.md") {
		t.Errorf("listing a file: %q", out)
	}
	if out := run(t, tl[tools.ListDir], map[string]any{"path": "missing"}); out != "Error: list_dir: missing does not exist" {
		t.Errorf("listing a missing dir: %q", out)
	}
}

func TestListDirMarksDirectoriesAndSymlinks(t *testing.T) {
	ws, tl := workspace(t, tools.Options{})
	if err := os.Symlink("/etc", filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	out := run(t, tl[tools.ListDir], map[string]any{"path": "."})
	if !strings.Contains(out, "src/\n") || !strings.Contains(out, "escape -> /etc\n") {
		t.Errorf("listing %q", out)
	}
}

func TestShell(t *testing.T) {
	ws, tl := workspace(t, tools.Options{MaxOutputBytes: 64})
	sh := tl[tools.Shell]
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"it runs in the workspace", map[string]any{"command": "pwd"}, mustReal(t, ws) + "\n"},
		{"cwd resolves against the workspace", map[string]any{"command": "pwd", "cwd": "src"}, mustReal(t, ws) + "/src\n"},
		{"stdout and stderr are combined", map[string]any{"command": "echo out; echo err >&2"}, "out\nerr\n"},
		{"a non-zero exit is reported in the text", map[string]any{"command": "echo failing; exit 3"}, "failing\n[exit status 3]"},
		{"a command that is not found reports its exit", map[string]any{"command": "no-such-command-xyz"}, "[exit status 127]"},
		{"output over the cap is truncated with a note", map[string]any{"command": "head -c 100 /dev/zero | tr '\\0' a"}, strings.Repeat("a", 64) + "\n[output truncated: 36 more bytes not shown; the limit is 64 bytes]"},
		{"stdin is empty", map[string]any{"command": "cat; echo done"}, "done\n"},
		{"a missing command is an Error text", map[string]any{}, `Error: shell needs the argument "command"`},
		{"a missing cwd is an Error text", map[string]any{"command": "pwd", "cwd": "nope"}, "Error: shell: nope does not exist"},
		{"a file as cwd is an Error text", map[string]any{"command": "pwd", "cwd": "README.md"}, "Error: shell: cwd README.md is not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, sh, tc.args)
			exact := !strings.HasPrefix(tc.want, "[") && !strings.HasPrefix(tc.want, "Error")
			if exact && out != tc.want || !exact && !strings.Contains(out, tc.want) {
				t.Errorf("got %q, want %q", out, tc.want)
			}
		})
	}
}

func TestShellKillsTheProcessGroupWhenTheContextEnds(t *testing.T) {
	ws, tl := workspace(t, tools.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// The grandchild keeps the output pipe open; killing only the shell would hang.
	_, err := tl[tools.Shell].Execute(guarded(t, ctx), map[string]any{"command": "sleep 30 & echo $! > pid; wait"})
	if err == nil {
		t.Fatal("an interrupted command did not fail")
	}
	b, rerr := os.ReadFile(filepath.Join(ws, "pid"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid := strings.TrimSpace(string(b))
	// The killed grandchild is reaped by init; poll until it is gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %s still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAnExecutorTimeoutIsReportedAsTimedOut(t *testing.T) {
	_, tl := workspace(t, tools.Options{})
	exec, err := hooks.NewExecutor(nil, []hooks.Tool{tl[tools.Shell]}, hooks.WithToolTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	res := exec.Execute(context.Background(), hooks.NewCall(tools.Shell, `{"command":"sleep 30"}`))
	if res.Status != hooks.StatusTimedOut || res.Output != hooks.TimedOutText {
		t.Errorf("got %s %q", res.Status, res.Output)
	}
	res = exec.Execute(context.Background(), hooks.NewCall(tools.ReadFile, `{"path":"x"}`))
	if res.Status != hooks.StatusUnknownTool {
		t.Errorf("unregistered tool: %s", res.Status)
	}
	res = exec.Execute(context.Background(), hooks.NewCall(tools.Shell, `{"command":"exit 1"}`))
	if res.Status != hooks.StatusSucceeded || res.Failed || res.Output != "[exit status 1]" {
		t.Errorf("a failing command is a successful call with its exit status: %+v", res)
	}
}

func TestAnExecutorRecordsCallErrorsAsFailed(t *testing.T) {
	ws, tl := workspace(t, tools.Options{MaxReadBytes: 16})
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a", 17)), 0o644); err != nil {
		t.Fatal(err)
	}
	list := make([]hooks.Tool, 0, len(tl))
	for _, x := range tl {
		list = append(list, x)
	}
	exec, err := hooks.NewExecutor(nil, list)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tool, args, want string }{
		{tools.ReadFile, `{"path":"nope.txt"}`, "Error: read_file: nope.txt does not exist"},
		{tools.ReadFile, `{"path":"src"}`, "Error: read_file: src is a directory (use list_dir)"},
		{tools.ReadFile, `{"path":"big.txt"}`, "Error: read_file: big.txt is larger than the 16-byte limit"},
		{tools.ReadFile, `{"path":7}`, `Error: read_file: argument "path" must be a string`},
		{tools.WriteFile, `{"path":"src","content":"x"}`, "Error: write_file: src is a directory"},
		{tools.EditFile, `{"path":"README.md","old_string":"absent","new_string":"y"}`, "Error: edit_file: old_string does not occur in README.md"},
		{tools.ListDir, `{"path":"README.md"}`, "Error: list_dir: README.md is not a directory"},
		{tools.Shell, `{"command":"pwd","cwd":"nope"}`, "Error: shell: nope does not exist"},
		{tools.Shell, `{"command":"pwd","extra":1}`, `Error: shell does not take the argument(s) "extra"`},
	} {
		res := exec.Execute(context.Background(), hooks.NewCall(tc.tool, tc.args))
		if res.Status != hooks.StatusFailed || !res.Failed || !strings.HasPrefix(res.Output, tc.want) {
			t.Errorf("%s %s: got %s failed=%v %q, want failed %q", tc.tool, tc.args, res.Status, res.Failed, res.Output, tc.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "README.md")); err != nil || string(b) != "# hello\n" {
		t.Errorf("the failed edit changed README.md: %q %v", b, err)
	}
	res := exec.Execute(context.Background(), hooks.NewCall(tools.ReadFile, `{"path":"README.md"}`))
	if res.Status != hooks.StatusSucceeded || res.Failed || res.Output != "# hello\n" {
		t.Errorf("a good read: %+v", res)
	}
}

// guarded returns ctx with a runtime guard that has no checkers, as the
// executor attaches to every tool's context.
func guarded(tb testing.TB, ctx context.Context) context.Context {
	tb.Helper()
	g, err := hooks.NewGuard(&hooks.Call{Tool: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	return hooks.WithGuard(ctx, g)
}

func mustReal(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
