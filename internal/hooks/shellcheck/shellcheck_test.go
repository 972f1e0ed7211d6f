package shellcheck

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func texts(a *Analysis) []string {
	out := make([]string, 0, len(a.Commands))
	for _, c := range a.Commands {
		out = append(out, c.Text)
	}
	return out
}

func TestAnalyzeFindsEveryCommand(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		want []string
	}{
		{"a list yields each command", "git status; rm -rf /", []string{"git status", "rm -rf /"}},
		{"a pipeline yields each stage", "ls && curl x | sh", []string{"ls", "curl x", "sh"}},
		{"command substitution is recursed into", "echo $(rm -rf /)", []string{"echo $(rm -rf /)", "rm -rf /"}},
		{"backticks are recursed into", "echo `id`", []string{"echo `id`", "id"}},
		{"bash -c strings are parsed", "bash -c 'cat /etc/passwd'", []string{"bash -c 'cat /etc/passwd'", "cat /etc/passwd"}},
		{"nested sh -c strings are parsed", `sh -c "bash -c 'rm x'"`, []string{`sh -c 'bash -c '\''rm x'\'''`, "bash -c 'rm x'", "rm x"}},
		{"process substitution is recursed into", "diff <(ls a) >(tee b)", []string{"diff <(ls a) >(tee b)", "ls a", "tee b"}},
		{"env is unwrapped", "env -i rm x", []string{"env -i rm x", "rm x"}},
		{"timeout is unwrapped", "timeout -s KILL 5 rm x", []string{"timeout -s KILL 5 rm x", "rm x"}},
		{"nohup is unwrapped", "nohup rm x", []string{"nohup rm x", "rm x"}},
		{"sudo is unwrapped", "sudo -u bob rm x", []string{"sudo -u bob rm x", "rm x"}},
		{"xargs is unwrapped", "xargs -n 1 rm", []string{"xargs -n 1 rm", "rm"}},
		{"control structures are recursed into", "if a; then b; else c; fi; while d; do e; done", []string{"a", "b", "c", "d", "e"}},
		{"function bodies are recursed into", "f() { rm x; }", []string{"rm x"}},
		{"heredoc substitutions are recursed into", "cat <<EOF\n$(rm x)\nEOF", []string{"cat", "rm x"}},
		{"brace expansion expands arguments", "echo {a,b}c", []string{"echo ac bc"}},
		{"quotes are removed", `grep "a b" 'c'`, []string{"grep 'a b' c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(a); !slices.Equal(got, tt.want) {
				t.Fatalf("commands = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAnalyzeReportsUnverifiable(t *testing.T) {
	for _, cmd := range []string{
		"eval ls", "source x", ". x", "$X a", "${X} a", "$(echo rm) x", "a=1", "PATH=/tmp ls",
		"echo $((1+1))", "cat $F", "exec 3>x", "declare -x A=1", "xargs rm", "bash script.sh",
		"echo x | sh", "zsh -c ls", "env A=1 ls", "find . -exec rm {} ;", "git -c a=b log",
		"cd", "trap 'rm x' EXIT", "set -k", `printf -v 'a[$(id)]' x`, "for f in a; do echo; done",
		"[[ $a -eq 1 ]]", "sudo -s", "echo {1..999}{1..999}", "()0>0",
	} {
		a, err := Analyze(cmd)
		if err != nil {
			t.Fatalf("Analyze(%q): %v", cmd, err)
		}
		if len(a.Unverifiable) == 0 {
			t.Errorf("Analyze(%q) reported nothing unverifiable", cmd)
		}
	}
}

func TestAnalyzeWordsAndRedirects(t *testing.T) {
	a, err := Analyze("sort -o/tmp/x --out=/tmp/y a > b 2>&1 < c >&d <<<e; curl @f file:///g; cd h")
	if err != nil {
		t.Fatal(err)
	}
	words := make([]string, 0, len(a.Words))
	redirs := make([]string, 0, len(a.Redirects))
	for _, w := range a.Words {
		words = append(words, w.Value)
	}
	for _, r := range a.Redirects {
		redirs = append(redirs, r.Target)
	}
	for _, want := range []string{"/tmp/x", "/tmp/y", "a", "f", "/g", "h"} {
		if !slices.Contains(words, want) {
			t.Errorf("words %q lack %q", words, want)
		}
	}
	if got := strings.Join(redirs, ","); got != "b,c,d" {
		t.Errorf("redirects = %q, want b,c,d", got)
	}
	if !slices.Equal(a.Dirs, []string{"h"}) {
		t.Errorf("dirs = %q, want [h]", a.Dirs)
	}
}

func TestAnalyzeRejectsBadInput(t *testing.T) {
	for _, cmd := range []string{"ls 'x", "ls\x00", strings.Repeat("bash -c '", 1) + "sh -c \"sh -c 'sh -c \\\"sh -c ls\\\"'\"'", strings.Repeat("a", MaxInput+1)} {
		if _, err := Analyze(cmd); !errors.Is(err, ErrParse) {
			t.Errorf("Analyze(%.40q) err = %v, want ErrParse", cmd, err)
		}
	}
}
