package autonomy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// oracleReal resolves p like the kernel would, independently of pathguard:
// filepath.EvalSymlinks on the longest existing prefix, the rest cleaned
// lexically, repeated until stable (so a ".." that climbs back into existing
// directories is resolved again).
func oracleReal(full string) (string, bool) {
	if t := strings.TrimRight(full, "/"); t != "" {
		full = t
	}
	for range 64 {
		comps := strings.Split(full, "/")
		// Resolve the existing prefix (up to the first missing component)
		// with the kernel's semantics; the rest is lexical.
		real := "/"
		i := 1
		for ; i <= len(comps); i++ {
			prefix := strings.Join(comps[:i], "/")
			if prefix == "" {
				continue
			}
			r, err := filepath.EvalSymlinks(prefix)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					return "", false // loops, ENOTDIR: the hook must have denied
				}
				break
			}
			real = r
		}
		i--
		if i < 0 {
			i = 0
		}
		next := filepath.Clean(real + "/" + strings.Join(comps[i:], "/"))
		if next == full {
			return next, true
		}
		full = next
	}
	return "", false
}

// oracleForbidden reports whether real or an ancestor matches the fixture's
// forbidden globs.
func oracleForbidden(ws, real string) bool {
	for a := real; ; a = filepath.Dir(a) {
		if ok, _ := doublestar.Match(ws+"/secret*", a); ok {
			return true
		}
		if filepath.Base(a) == ".env" {
			return true
		}
		if a == "/" {
			return false
		}
	}
}

func FuzzResolveStaysInside(f *testing.F) {
	for _, s := range []string{"src/a.go", "..", "../outside/secret", "in/../secret-data", "out/secret",
		"passwd", "loop1", "nope/../out/x", "up/ws/src", "/etc/passwd", "~/x", "src//./a.go/", ".env",
		"src/pkg/../../.env", "esc/new", "SECRET-data", "in/./../in/a.go"} {
		f.Add(s)
	}
	fx := newFixture(f)
	cfg := fx.config()
	h := newHook(f, cfg)
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) > 512 {
			t.Skip("long paths only slow the oracle down")
		}
		v := decide(t, h, "read_file", obj(t, map[string]any{"path": p}))
		if !v.Allowed {
			return
		}
		if p == "" || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "~") {
			t.Fatalf("allowed an empty, NUL or home path %q", p)
		}
		full := p
		if !strings.HasPrefix(full, "/") {
			full = fx.ws + "/" + p
		}
		real, ok := oracleReal(full)
		if !ok {
			t.Fatalf("allowed %q, which the oracle cannot resolve", p)
		}
		if real != fx.ws && !strings.HasPrefix(real, fx.ws+"/") {
			t.Fatalf("allowed %q, which resolves to %q outside %q", p, real, fx.ws)
		}
		if oracleForbidden(fx.ws, real) {
			t.Fatalf("allowed %q, whose real path %q is forbidden", p, real)
		}
	})
}

// checkShellPath fails t when p, a path word of the allowed command cmd,
// cannot be resolved, resolves outside the workspace ws or is forbidden.
func checkShellPath(t *testing.T, ws, cmd, what, p string) {
	t.Helper()
	if p == "" || strings.HasPrefix(p, "/dev/") {
		return
	}
	full := p
	if !strings.HasPrefix(full, "/") {
		full = ws + "/" + p
	}
	real, ok := oracleReal(full)
	if !ok {
		t.Fatalf("allowed %q: %s %q cannot be resolved", cmd, what, p)
	}
	if real != ws && !strings.HasPrefix(real, ws+"/") {
		t.Fatalf("allowed %q: %s %q resolves to %q outside the workspace", cmd, what, p, real)
	}
	if oracleForbidden(ws, real) {
		t.Fatalf("allowed %q: %s %q is forbidden", cmd, what, p)
	}
}

// shellFields expands w as the oracle does (mvdan.cc/sh's expand),
// dropping the names that start with a dot matched by a component of w
// that does not start with one: expand lets ? and [.] match a leading dot,
// which neither bash without dotglob nor dash does.
func shellFields(t *testing.T, ecfg *expand.Config, cmd string, w *syntax.Word) []string {
	t.Helper()
	fields, err := expand.Fields(ecfg, w)
	if err != nil {
		t.Fatalf("allowed %q, whose word cannot be expanded: %v", cmd, err)
	}
	var src strings.Builder
	if err := syntax.NewPrinter().Print(&src, w); err != nil {
		return fields
	}
	pat := strings.Split(src.String(), "/")
	var out []string
	for _, f := range fields {
		comps := strings.Split(f, "/")
		keep := true
		for i, c := range comps {
			if i < len(pat) && strings.HasPrefix(c, ".") && c != "." && c != ".." &&
				!strings.HasPrefix(strings.TrimLeft(pat[i], `'"\`), ".") && strings.ContainsAny(pat[i], "?[*") {
				keep = false
			}
		}
		if keep || len(comps) != len(pat) {
			out = append(out, f)
		}
	}
	return out
}

func FuzzShellAllowList(f *testing.F) {
	for _, s := range []string{"ls", "ls src", "cat src/a.go", "git status", "git status; rm -rf /",
		"ls && cat ../outside/secret", "cat passwd", "echo $(ls)", "ls > /tmp/x", "cat < .env",
		"ls | cat", "bash -c 'ls'", "cat {.,.}{.,.}/outside/secret", "ls .*", "cat ~/x", "cat 'src/a.go'",
		"ls -la src 2>&1", "cat src/*.go", "(ls; cat notes.txt) > out.txt", "cat <<EOF\nx\nEOF",
		"cat <<E\"O\"F\n$(cat .env)\nEOF", "cat <<E\"O\"F\nx\\\nEOF\ncat .env\nEOF", "cat ?env", "cat [.]env",
		"shopt -s dotglob; cat ?env", "ls -R in", "ls -RL in", "cd src && ls", "cd out && ls", "LC_ALL=C ls src",
		"cat /dev/fd/3", "cat /proc/self/environ", "ls > /dev/stderr"} {
		f.Add(s)
	}
	fx := newFixture(f)
	cfg := fx.config()
	cfg.AllowedShellCommands = []string{"ls *", "cat *", "git status"}
	h := newHook(f, cfg)
	home, _ := os.UserHomeDir()
	ecfg := &expand.Config{Env: expand.ListEnviron("HOME="+home, "PWD="+fx.ws), ReadDir2: os.ReadDir}
	check := func(t *testing.T, cmd, what, p string) {
		t.Helper()
		checkShellPath(t, fx.ws, cmd, what, p)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		start := time.Now()
		v := decide(t, h, "shell", obj(t, sh(cmd)))
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("deciding %q took %v", cmd, d)
		}
		if !v.Allowed {
			return
		}
		// Check the command the hook (and the tool) received: JSON encoding
		// replaces invalid UTF-8.
		cmd = hooks.NewCall("shell", obj(t, sh(cmd))).Args["command"].(string)
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
		if err != nil {
			t.Fatalf("allowed %q, which does not parse: %v", cmd, err)
		}
		// Expand relative globs against the workspace, like the shell would.
		wd, _ := os.Getwd()
		if err := os.Chdir(fx.ws); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.Chdir(wd); err != nil {
				t.Errorf("restoring the working directory: %v", err)
			}
		}()
		var dirs []string
		syntax.Walk(file, func(n syntax.Node) bool {
			if r, ok := n.(*syntax.Redirect); ok && (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) {
				// A delimiter quoted in any part makes the body literal in
				// every shell (the parser looks at its last part only).
				for _, p := range r.Word.Parts {
					if l, lit := p.(*syntax.Lit); !lit || strings.Contains(l.Value, `\`) {
						r.Hdoc = nil
					}
				}
			}
			switch n := n.(type) {
			case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ArithmCmd,
				*syntax.ProcSubst, *syntax.DeclClause, *syntax.LetClause, *syntax.FuncDecl,
				*syntax.ExtGlob, *syntax.CoprocClause:
				t.Fatalf("allowed %q, which contains a dynamic %T", cmd, n)
			case *syntax.CallExpr:
				for _, as := range n.Assigns {
					// Only a plain locale or build switch for the command.
					v, err := expand.Literal(ecfg, as.Value)
					if len(n.Args) == 0 || err != nil || as.Append || as.Index != nil || as.Array != nil ||
						!slices.Contains([]string{"LC_ALL", "LANG", "CGO_ENABLED", "GOOS", "GOARCH", "NO_COLOR"}, as.Name.Value) ||
						strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:@+-") != "" {
						t.Fatalf("allowed %q, which assigns variables", cmd)
					}
				}
				fields, err := expand.Fields(ecfg, n.Args...)
				if err != nil || len(fields) == 0 {
					t.Fatalf("allowed %q, whose command cannot be expanded: %v", cmd, err)
				}
				switch fields[0] {
				case "cd", "pushd", "popd":
					// The shell changes directory: the target is a path,
					// and later relative words are checked from it too.
					for _, a := range fields[1:] {
						check(t, cmd, "directory", a)
						if !strings.HasPrefix(a, "-") {
							dirs = append(dirs, a)
						}
					}
					return true
				case "ls", "cat":
					if len(fields) == 1 {
						t.Fatalf("allowed %q: bare %s is not in the allow-list", cmd, fields[0])
					}
				case "git":
					if len(fields) != 2 || fields[1] != "status" {
						t.Fatalf("allowed %q: git %v is not git status", cmd, fields[1:])
					}
				default:
					t.Fatalf("allowed %q, which runs %q", cmd, fields[0])
				}
				for _, w := range n.Args[1:] {
					for _, a := range shellFields(t, ecfg, cmd, w) {
						check(t, cmd, "argument", a)
						for _, d := range dirs {
							if !strings.HasPrefix(a, "/") && !strings.HasPrefix(a, "~") && !strings.HasPrefix(d, "~") {
								check(t, cmd, "argument", filepath.Join(d, a))
							}
						}
					}
				}
			case *syntax.Redirect:
				switch n.Op {
				case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
					return true
				}
				fields, err := expand.Fields(ecfg, n.Word)
				if err != nil || len(fields) != 1 {
					t.Fatalf("allowed %q, whose redirection cannot be expanded: %v", cmd, err)
				}
				if fields = shellFields(t, ecfg, cmd, n.Word); len(fields) == 0 {
					return true
				}
				if (n.Op == syntax.DplIn || n.Op == syntax.DplOut) && strings.Trim(fields[0], "0123456789-") == "" {
					return true
				}
				check(t, cmd, "redirection", fields[0])
				for _, d := range dirs {
					if !strings.HasPrefix(fields[0], "/") && !strings.HasPrefix(fields[0], "~") && !strings.HasPrefix(d, "~") {
						check(t, cmd, "redirection", filepath.Join(d, fields[0]))
					}
				}
			}
			return true
		})
	})
}
