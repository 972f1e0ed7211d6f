package shellcheck

import (
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// renderedWords parses a rendered command and returns its assignments and
// words, each of which must be a literal (no expansion of any kind).
func renderedWords(t *testing.T, cmd string) (env, argv []string) {
	t.Helper()
	f, err := ParseBash(cmd)
	if err != nil {
		t.Fatalf("Render produced %q, which does not parse: %v", cmd, err)
	}
	if len(f.Stmts) != 1 {
		t.Fatalf("Render produced %q: %d statements", cmd, len(f.Stmts))
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(st.Redirs) > 0 || st.Background || st.Negated {
		t.Fatalf("Render produced %q, not one simple command", cmd)
	}
	lit := func(w *syntax.Word) string {
		if w == nil {
			return ""
		}
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.Lit:
				if strings.ContainsAny(p.Value, "*?[$`{~") {
					t.Fatalf("Render produced %q: unquoted special characters in %q", cmd, p.Value)
				}
			case *syntax.SglQuoted:
			case *syntax.DblQuoted:
				for _, q := range p.Parts {
					if _, ok := q.(*syntax.Lit); !ok {
						t.Fatalf("Render produced %q: a %T inside double quotes", cmd, q)
					}
				}
			default:
				t.Fatalf("Render produced %q with a %T", cmd, p)
			}
		}
		v, err := expand.Literal(&expand.Config{Env: expand.ListEnviron()}, w)
		if err != nil {
			t.Fatalf("Render produced %q: %v", cmd, err)
		}
		return v
	}
	for _, a := range call.Assigns {
		env = append(env, a.Name.Value+"="+lit(a.Value))
	}
	for _, w := range call.Args {
		argv = append(argv, lit(w))
	}
	return env, argv
}

func FuzzRenderRoundTrips(f *testing.F) {
	for _, seed := range [][2]string{
		{"", "cat .env"}, {"X=1", "ls *.go"}, {"", "echo $(rm -rf ~)"}, {"", "a'b \"c\" `d`"},
		{"P=a b", "[[ x || sh -ef /dev/stdin ]]"}, {"", "cat .[[:alpha:]]nv"}, {"", "{a,b} ~root !x #c"},
		{"", "x\ny\tz"}, {"", "-n ; & | < > ( )"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, envText, argvText string) {
		argv := strings.Split(argvText, " ")
		var env []string
		if envText != "" {
			env = []string{envText}
		}
		cmd, err := Render(env, argv)
		if err != nil {
			return // NUL bytes and invalid names are refused, which the checks deny
		}
		if strings.ContainsRune(argvText, 0) || strings.ContainsRune(envText, 0) {
			t.Fatalf("Render accepted a NUL byte: %q", cmd)
		}
		gotEnv, gotArgv := renderedWords(t, cmd)
		if !slices.Equal(gotArgv, argv) || !slices.Equal(gotEnv, env) {
			t.Errorf("Render(%q, %q) = %q, which parses as %q %q", env, argv, cmd, gotEnv, gotArgv)
		}
	})
}
