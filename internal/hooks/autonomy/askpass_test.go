package autonomy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// The ask rules are matched inside the deny pass; the two-pass decision
// (twopass_test.go) is the oracle they must agree with, verdict for verdict:
// allowed, asked or denied, rule, reason and expiry.

// askFixture is the common fixture with a symlink alias -> src/pkg, a
// deploy directory and a git repository under src, so that every route a
// path takes (symlinks, recursive readers, revisions) reaches the ask globs.
func askFixture(t testing.TB) fixture {
	t.Helper()
	f := newFixture(t)
	for _, d := range []string{"deploy/prod", "src/.git", "src/pkg/prod"} {
		if err := os.MkdirAll(filepath.Join(f.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"deploy/prod/app.yaml", "src/pkg/prod/k.txt", "src/.git/HEAD"} {
		if err := os.WriteFile(filepath.Join(f.ws, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src/pkg", filepath.Join(f.ws, "alias")); err != nil {
		t.Fatal(err)
	}
	return f
}

type askVariant struct {
	name string
	cfg  Config
}

// askVariants are policies with ask rules: with and without deny path
// rules (without them the paths are read for the ask rules alone), closed
// and open allow-lists, every anchoring of a glob, each kind of ask rule
// alone, each dialect, readonly mode and extra path arguments.
func askVariants(f fixture) []askVariant {
	closed := f.askConfig()
	open := f.askConfig()
	open.AllowedShellCommands = []string{"*"}
	noPaths := func(c Config) Config {
		c.WorkspaceOnly, c.ForbiddenPathGlobs = false, nil
		return c
	}
	anchored := &AskConfig{PathGlobs: []string{f.ws + "/src/pkg/**", "**/prod/**", "*.txt", "notes*", "src/a.go", "deploy"},
		Commands: []string{"git push *", "cat *notes*"}, ExpirySeconds: 60}
	anchoredClosed := closed
	anchoredClosed.Ask = anchored
	anchoredOpen := open
	anchoredOpen.Ask = anchored
	cmdsOnly := open
	cmdsOnly.Ask = &AskConfig{Commands: []string{"git push *", "rm *", "cat *"}}
	pathsOnly := closed
	pathsOnly.Ask = &AskConfig{PathGlobs: []string{"src/pkg/**", "deploy/**"}}
	toolsOnly := Config{ToolDeny: []string{"drop_*"}, Ask: &AskConfig{Tools: []string{"deploy_*", "read_*"}}}
	bash := closed
	bash.ShellDialects = []string{"bash"}
	posix := noPaths(open)
	posix.ShellDialects = []string{"posix"}
	ro := closed
	ro.Mode = ModeReadOnly
	ro.ReadOnlyTools = []string{"deploy_status"}
	ro.Ask.Tools = []string{"deploy_*"}
	pathArgs := noPaths(closed)
	pathArgs.PathArgs = map[string][]string{"my_tool": {"target"}, "apply_patch": {"patch"}}
	wsOnly := closed
	wsOnly.ForbiddenPathGlobs = nil
	forbidOnly := closed
	forbidOnly.WorkspaceOnly = false
	noShell := noPaths(closed)
	noShell.AllowShell = false
	variants := []askVariant{
		{"closed", closed},
		{"open", open},
		{"closed without path rules", noPaths(closed)},
		{"open without path rules", noPaths(open)},
		{"every anchoring, closed", anchoredClosed},
		{"every anchoring, open", anchoredOpen},
		{"every anchoring without path rules", noPaths(anchoredOpen)},
		{"commands only", cmdsOnly},
		{"paths only", pathsOnly},
		{"paths only without path rules", noPaths(pathsOnly)},
		{"tools only, no workspace", toolsOnly},
		{"bash only", bash},
		{"posix only without path rules", posix},
		{"readonly", ro},
		{"path arguments", pathArgs},
		{"workspace-only without forbidden globs", wsOnly},
		{"forbidden globs without workspace-only", forbidOnly},
		{"shell disabled", noShell},
	}
	// The two-pass oracle's deny pass predates protected paths, which
	// protected_test.go checks on their own.
	for i := range variants {
		variants[i].cfg.ProtectedPaths = &ProtectedConfig{Lift: defaultNames()}
	}
	return variants
}

// askPaths are path arguments: the seeds of FuzzResolveStaysInside, the
// adversarial suite's and paths into the ask globs every way.
var askPaths = []string{
	"src/a.go", "..", "../outside/secret", "in/../secret-data", "out/secret", "passwd", "loop1", "nope/../out/x",
	"up/ws/src", "/etc/passwd", "~/x", "src//./a.go/", ".env", "src/pkg/../../.env", "esc/new", "SECRET-data",
	"in/./../in/a.go", "src/pkg/new.go", "alias/sub/x.go", "notes/../src/pkg/sub/x.go", "src/pkg", "src/pkg/",
	"alias", "in/pkg/sub", "deploy", "deploy/prod/app.yaml", "notes.txt", "src/pkg/prod/k.txt", "src/pkg/.env",
	"loop2/a/b", "", "src/a.go\x00.txt", "/dev/null", "x.pem", "src", ".",
}

// askCommandLines are shell command lines: the seeds of FuzzShellAllowList
// and FuzzOracle, the soundness classes and commands into the ask rules
// every way.
var askCommandLines = append(append([]string{
	"ls", "ls src", "cat src/a.go", "git status", "git status; rm -rf /", "ls && cat ../outside/secret", "cat passwd",
	"echo $(ls)", "ls > /tmp/x", "cat < .env", "ls | cat", "bash -c 'ls'", "cat {.,.}{.,.}/outside/secret", "ls .*",
	"cat ~/x", "cat 'src/a.go'", "ls -la src 2>&1", "cat src/*.go", "(ls; cat notes.txt) > out.txt", "cat <<EOF\nx\nEOF",
	"cat src/pkg/sub/x.go", "cat src/p*/sub/x.go", "echo x > alias/y", "cd src && cat pkg/sub/x.go", "cat sub/x.go",
	"git push origin main", "git status; rm notes.txt", "sudo kubectl delete pod x", "bash -c 'rm notes.txt'",
	"echo $(git push origin x)", "$CMD notes.txt", "git log --oneline", "kubectl delete pod x; python3 x",
	"(cat src/pkg/sub/x.go)", "ls | cat alias/sub/x.go", "ls | grep x > src/pkg/out", "{ cat notes.txt; }",
	"grep -r x src", "grep -r x .", "ls -R src", "git log -p", "git diff HEAD", "cat loop1", "cat loop1 src/pkg/new",
	"cd loop1 && ls", "cd src/pkg && ls", "cd alias; cd sub; cat x.go", "cat src/pkg/sub/x.go > .env",
	"cat src/pkg/sub/x.go; cat /etc/passwd", "ls 'unterminated", "cat src/pkg/sub/x.go 'unterminated",
	"cat src/*/sub/*.go", "cat */prod/*", "cat deploy", "echo > notes.txt", "cat < notes.txt", "echo x >> deploy/prod/y",
	"diff <(cat src/pkg/sub/x.go) src/a.go", "cat src/pkg/sub/x.go && rm x", "rm src/pkg/sub/x.go", "cat @(notes.txt)",
	"cat ~/src/pkg/x", "find src -name '*.go'", "find -L src", "cp -r src deploy/c", "du -a src", "git status > notes.txt",
	"ls\x00; rm x", "cat $HOME/x", "eval ls", "tee src/pkg/t < notes.txt", "ls src/[p]kg", "cat src/{pkg,x}/sub/x.go",
	"cd src; cd pkg; cd sub; cd ..; cd ..; cd ..; cd src; cd pkg; cd sub; cd ..; cd ..; cd ..; cat a.go",
	"cd a; cd b; cd c; cd d; cat x.go", "cd a; cd b; cd c; cd d; cd src; cat pkg/sub/x.go",
}, oracleSeeds...), soundnessCommands...)

// soundnessCommands are TestShellSoundnessClassesAreDenied's classes.
var soundnessCommands = []string{
	"cat .[[:alpha:]]nv", "cat s[[:alpha:]]crets/key", "cat .[e]nv", "cat secret[-_]data", "cat .?nv", "cat ./*/key",
	"cat @(.env)", "cat +(.e)nv", "cat src/**/../../.env", "ls > {.env,}", "cat < src/{a.go,../.env}", "cat .env{,}",
	"[[ -f x || cat .env > y ]]", "[ -f x ] || cat $'.env'", "cat <<< x > .env", "function f { cat .env; }; f",
	"sh -c 'cat .[[:alpha:]]nv'", "bash -c 'cat {.env,}'",
}

// askCalls are the calls of the differential test: every route a path or a
// command reaches the rules by.
func askCalls(t testing.TB) []*hooks.Call {
	t.Helper()
	var calls []*hooks.Call
	add := func(tool string, args map[string]any) { calls = append(calls, hooks.NewCall(tool, obj(t, args))) }
	for _, p := range askPaths {
		add("read_file", map[string]any{"path": p})
		add("write_file", map[string]any{"path": p, "content": "x"})
		add("my_tool", map[string]any{"target": p})
		add("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: " + p + "\n@@\n-a\n+b\n*** End Patch\n"})
		add("git", map[string]any{"cwd": p})
		add("shell", map[string]any{"command": "cat sub/x.go", "cwd": p})
		add("process", map[string]any{"command": "ls", "working_directory": p})
	}
	add("read_file", map[string]any{"paths": []any{"src/a.go", "src/pkg/sub/x.go"}})
	add("read_file", map[string]any{"paths": []any{"src/pkg/sub/x.go", "/etc/passwd"}})
	add("read_file", map[string]any{"paths": []any{"src/pkg/sub/x.go", 1}})
	add("move", map[string]any{"source": "src/a.go", "destination": "deploy/prod/a.go"})
	add("apply_patch", map[string]any{"input": "--- a/src/a.go\n+++ b/src/pkg/sub/x.go\n@@\n-a\n+b\n"})
	add("apply_patch", map[string]any{"input": "*** Add File: src/pkg/n.go\n*** Add File: .env\n"})
	for _, c := range askCommandLines {
		add("shell", sh(c))
		add("bash", map[string]any{"command": c, "cwd": "src"})
	}
	add("shell", map[string]any{"command": []any{"git", "push", "origin"}})
	add("shell", map[string]any{"command": 1})
	add("shell", map[string]any{})
	add("code_exec", map[string]any{"code": "import os"})
	for _, tool := range []string{"deploy_prod", "Deploy_Prod", "drop_tables", "web_search", "deploy_status", "read_file", "frobnicate"} {
		add(tool, map[string]any{})
	}
	for _, raw := range []struct{ tool, args string }{
		{"read_file", `{"path":"src/a.go"`}, {"shell", `"ls"`}, {"web_search", `[1]`}, {"deploy_prod", `[1]`},
		{"write_file", `{"path":"src/pkg/x","path":"src/a.go"}`},
	} {
		calls = append(calls, hooks.NewCall(raw.tool, raw.args))
	}
	return calls
}

// requireSameAsTwoPass fails t when h and its two-pass oracle tp decide
// call differently, in a bare context and in the executor's (with a path
// memo).
func requireSameAsTwoPass(t testing.TB, h *Hook, tp *twoPass, call *hooks.Call) {
	t.Helper()
	for _, ctx := range []context.Context{context.Background(), pathguard.WithMemo(context.Background())} {
		got, err := h.Before(ctx, call)
		if err != nil {
			t.Fatalf("Before: %v", err)
		}
		want := tp.Before(ctx, call)
		if got != want {
			t.Fatalf("%s %s:\n single pass %+v\n two passes  %+v", call.Tool, call.ArgsJSON, got, want)
		}
	}
}

func TestAskSinglePassAgreesWithTwoPasses(t *testing.T) {
	f := askFixture(t)
	calls := askCalls(t)
	asked := map[string]int{}
	for _, v := range askVariants(f) {
		t.Run(v.name, func(t *testing.T) {
			h := newHook(t, v.cfg)
			tp, err := newTwoPass(v.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range calls {
				requireSameAsTwoPass(t, h, tp, call)
				if v, _ := h.Before(t.Context(), call); v.Ask {
					asked[v.Rule]++
				}
			}
		})
	}
	// The table must reach every ask rule, or it tests too little.
	for _, r := range []string{RuleAskTools, RuleAskPathGlobs, RuleAskCommands, RuleAskUnchecked} {
		if asked[r] < 3 {
			t.Errorf("only %d calls asked by %s: %v", asked[r], r, asked)
		}
	}
}

// fuzzSeeds are the inputs of the package's fuzz corpora
// (testdata/fuzz/*/*).
func fuzzSeeds(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/fuzz/*/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if q, ok := strings.CutPrefix(strings.TrimSpace(line), "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no fuzz corpus entries found")
	}
	return out
}

// FuzzAskSinglePass decides one input as a shell command line, a command
// in the working directory it names, a path argument and an apply_patch
// file under every ask variant, and requires the two-pass verdicts.
func FuzzAskSinglePass(f *testing.F) {
	for _, s := range askCommandLines {
		f.Add(s)
	}
	for _, s := range askPaths {
		f.Add(s)
	}
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	fx := askFixture(f)
	type pair struct {
		h  *Hook
		tp *twoPass
	}
	var pairs []pair
	for _, v := range askVariants(fx) {
		tp, err := newTwoPass(v.cfg)
		if err != nil {
			f.Fatal(err)
		}
		pairs = append(pairs, pair{newHook(f, v.cfg), tp})
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 512 {
			t.Skip("long inputs only slow the fuzzer down")
		}
		calls := []*hooks.Call{
			hooks.NewCall("shell", obj(t, sh(s))),
			hooks.NewCall("shell", obj(t, map[string]any{"command": "cat x.go", "cwd": s})),
			hooks.NewCall("read_file", obj(t, map[string]any{"path": s})),
			hooks.NewCall("apply_patch", obj(t, map[string]any{"input": "*** Update File: " + s + "\n"})),
		}
		for _, p := range pairs {
			for _, call := range calls {
				requireSameAsTwoPass(t, p.h, p.tp, call)
			}
		}
	})
}

// TestAskRulesSeeEveryRoute asks for a path or command that reaches the ask
// rules by each route the deny rules read: with the deny path rules on
// (the ask globs are matched on the paths they resolve) and off (the paths
// are read for the ask rules alone, and what cannot be read asks).
func TestAskRulesSeeEveryRoute(t *testing.T) {
	f := askFixture(t)
	closed := f.askConfig()
	open := f.askConfig()
	open.AllowedShellCommands = []string{"*"}
	off := func(c Config) Config {
		c.WorkspaceOnly, c.ForbiddenPathGlobs = false, nil
		return c
	}
	type tc struct {
		name, tool string
		args       map[string]any
		open       bool // decided with the allow-list ["*"]
		pathArgs   bool // my_tool's target is a path argument
		dialects   []string
		want       string // "allow", "ask:<rule>" or "deny:<rule>", with the deny path rules on
		wantOff    string // the same with them off, when it differs
		reason     string // a text the reason contains
	}
	askPath, askCmd := "ask:"+RuleAskPathGlobs, "ask:"+RuleAskCommands
	for _, c := range []tc{
		{name: "path argument", tool: "read_file", args: map[string]any{"path": "src/pkg/sub/x.go"}, want: askPath},
		{name: "path argument through a symlink", tool: "write_file", args: map[string]any{"path": "alias/new.go"}, want: askPath,
			reason: f.ws + "/src/pkg/new.go"},
		{name: "path array element", tool: "read_file", args: map[string]any{"paths": []any{"src/a.go", "in/pkg/sub"}}, want: askPath},
		{name: "extra path argument", tool: "my_tool", args: map[string]any{"target": "src/pkg/sub"}, pathArgs: true, want: askPath},
		{name: "cwd that matches", tool: "shell", args: map[string]any{"command": "ls", "cwd": "src/pkg"}, want: askPath},
		{name: "cwd as the base of a word", tool: "shell", args: map[string]any{"command": "cat pkg/y", "cwd": "src"}, want: askPath,
			reason: `In shell command "cat pkg/y": Path "pkg/y"`},
		{name: "working_directory as the base of a word", tool: "process", args: map[string]any{"command": "cat pkg/y", "working_directory": "src"},
			want: askPath},
		{name: "apply_patch file", tool: "apply_patch", args: map[string]any{"input": "*** Update File: src/pkg/sub/x.go\n"}, want: askPath},
		{name: "unified diff file", tool: "apply_patch", args: map[string]any{"input": "--- a/src/a.go\n+++ b/alias/sub/x.go\n"}, want: askPath},
		{name: "shell word", tool: "shell", args: sh("cat src/pkg/sub/x.go"), want: askPath},
		{name: "redirection target", tool: "shell", args: sh("echo x > alias/y"), want: askPath, reason: `Path "alias/y"`},
		{name: "glob expansion", tool: "shell", args: sh("cat src/p*/sub/x.go"), want: askPath,
			reason: `Path "` + f.ws + `/src/pkg/sub/x.go"`},
		{name: "glob expansion of a redirection", tool: "shell", args: sh("echo x >> src/p?g/sub/x.go"), want: askPath},
		{name: "brace expansion", tool: "shell", args: sh("cat src/{a.go,pkg/sub/x.go}"), want: askPath},
		{name: "cd target", tool: "shell", args: sh("cd src/pkg && ls"), want: askPath},
		{name: "word relative to a cd target", tool: "shell", args: sh("cd src; cat pkg/sub/x.go"), want: askPath},
		{name: "beneath a recursive reader", tool: "shell", args: sh("grep -r x src"), want: askPath, reason: "reads or writes beneath"},
		{name: "path in a subshell", tool: "shell", args: sh("(cat src/pkg/sub/x.go)"), want: askPath},
		{name: "path in a pipeline", tool: "shell", args: sh("ls | cat alias/sub/x.go"), want: askPath},
		{name: "path in a nested shell", tool: "shell", args: sh("bash -c 'cat src/pkg/sub/x.go'"), want: askPath},
		{name: "command in a pipeline", tool: "shell", args: sh("ls | rm notes.txt"), want: askCmd},
		{name: "command in a subshell", tool: "shell", args: sh("(rm notes.txt)"), want: askCmd},
		{name: "command in a nested shell", tool: "shell", args: sh("bash -c 'git push origin main'"), want: askCmd},
		{name: "command under a wrapper", tool: "shell", args: sh("sudo kubectl delete pod x"), open: true, want: askCmd},
		{name: "command in a substitution", tool: "shell", args: sh("echo $(git push origin x)"), open: true, want: askCmd},
		{name: "command as an argv list", tool: "shell", args: map[string]any{"command": []any{"rm", "notes.txt"}}, want: askCmd},
		{name: "command in the POSIX reading only", tool: "shell", args: sh("[[ x || rm ]]"), open: true, want: askCmd},
		{name: "the same read as bash only", tool: "shell", args: sh("[[ x || rm ]]"), open: true, dialects: []string{"bash"}, want: "allow"},
		{name: "a command before a path", tool: "shell", args: sh("rm src/pkg/sub/x.go"), want: askCmd},
		{name: "a path before a command", tool: "shell", args: map[string]any{"command": "rm x", "cwd": "src/pkg"}, want: askPath},
		{name: "command that cannot be read statically", tool: "shell", args: sh("$CMD notes.txt"), open: true, want: askCmd,
			reason: "cannot be read statically"},
		{name: "code that cannot be read", tool: "code_exec", args: map[string]any{"code": "import os"}, open: true, want: askCmd},
		{name: "unparseable command", tool: "shell", args: sh("cat src/pkg/sub/x.go 'unterminated"), open: true,
			want: "deny:" + RuleShellUnverifiable},
		{name: "path that cannot be resolved", tool: "read_file", args: map[string]any{"path": "loop1"},
			want: "deny:" + RuleInvalidArguments, wantOff: "ask:" + RuleAskUnchecked},
		{name: "shell word that cannot be resolved", tool: "shell", args: sh("cat src/a.go loop1"),
			want: "deny:" + RuleInvalidArguments, wantOff: "ask:" + RuleAskUnchecked},
		{name: "the first match is kept", tool: "shell", args: sh("cat src/pkg/sub/x.go loop1"),
			want: "deny:" + RuleInvalidArguments, wantOff: askPath},
		{name: "deny wins over an earlier ask", tool: "shell", args: sh("cat src/pkg/sub/x.go .env"),
			want: "deny:" + RuleForbiddenPaths, wantOff: askPath},
		{name: "deny wins over a later ask", tool: "read_file", args: map[string]any{"paths": []any{"/etc/passwd", "src/pkg/sub/x.go"}},
			want: "deny:" + RuleWorkspaceOnly, wantOff: askPath},
		{name: "deny beneath wins", tool: "shell", args: sh("grep -r x ."), want: "deny:" + RuleForbiddenPaths, wantOff: askPath},
		{name: "nothing asks", tool: "shell", args: sh("cat src/a.go | grep x | wc -l"), want: "allow"},
	} {
		for _, on := range []bool{true, false} {
			cfg := closed
			if c.open {
				cfg = open
			}
			cfg.ShellDialects = c.dialects
			if c.pathArgs {
				cfg.PathArgs = map[string][]string{"my_tool": {"target"}}
			}
			want := c.want
			if !on {
				cfg = off(cfg)
				if c.wantOff != "" {
					want = c.wantOff
				}
			}
			t.Run(fmt.Sprintf("%s/path rules %v", c.name, on), func(t *testing.T) {
				h := newHook(t, cfg)
				v := decide(t, h, c.tool, obj(t, c.args))
				got := "allow"
				switch {
				case v.Ask:
					got = "ask:" + v.Rule
				case !v.Allowed:
					got = "deny:" + v.Rule
				}
				if got != want || !strings.Contains(v.Reason, c.reason) {
					t.Fatalf("got %s (%s), want %s with %q", got, v.Reason, want, c.reason)
				}
				tp, err := newTwoPass(cfg)
				if err != nil {
					t.Fatal(err)
				}
				requireSameAsTwoPass(t, h, tp, hooks.NewCall(c.tool, obj(t, c.args)))
			})
		}
	}
}

// TestAskToolPrefixNeverRejectsAMatch checks the prefix test askTool runs
// before doublestar: every tool name a pattern matches starts with the
// pattern's literalPrefix.
func TestAskToolPrefixNeverRejectsAMatch(t *testing.T) {
	patterns := []string{"deploy_*", "deploy_prod", "*_file", "{read,write}_file", "[dr]*", "de?loy_*", `deploy\_*`, "**", "mcp/**", "mcp/*/x"}
	names := []string{"deploy_prod", "deploy_", "deploy", "read_file", "write_file", "drop", "mcp", "mcp/a", "mcp/a/x", "deXloy_1", "x"}
	matched := 0
	for _, p := range patterns {
		pre := literalPrefix(p)
		for _, n := range names {
			if ok, err := doublestar.Match(p, n); err != nil {
				t.Fatalf("pattern %q: %v", p, err)
			} else if !ok {
				continue
			}
			matched++
			if !strings.HasPrefix(n, pre) {
				t.Errorf("%q matches %q but does not start with its literal prefix %q", n, p, pre)
			}
		}
	}
	if matched < 10 {
		t.Fatalf("only %d pattern/name pairs matched", matched)
	}
}
