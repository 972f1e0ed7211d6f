package shellcheck

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzAnalyze reads arbitrary text in both dialects without the recover
// AnalyzeDialects keeps as a last resort: any panic on any input is a bug.
// It also expands every glob it reports against a small real tree.
func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{
		"src/main{.go,}", "cat src/main{.go,}", "echo x{,}", "echo {a,b}{c,}", "ls > {.env,}",
		"cat - < {secrets/key,}", "git status > {../x,}", "{,}", "a{,}{,}b", "cat {,,}",
		"echo {a..c}{,x}", "cat .[[:alpha:]]nv", "cat .[[=e=]]nv", "ls .[[:punct:]]",
		"cat @(a|b) !(x)", "[[ -f x || cat .env > y ]]", "echo $'\\x41' $\"x\"", "cat <<< x",
		"diff <(ls) >(cat)", "function f { ls; }", "echo $((1+2))", "sh -c 'cat {a,}'",
		"bash -c \"echo {x,}\" > {o,}", "cat <<EOF\n{a,}\nEOF", "x=1 {a,b}=c", "[ \"$x\" ] && ls",
		"echo `ls {a,}`", "coproc ls", "ls |& cat", "cat a\\{b,c\\}", "echo ${x:-{a,}}",
		"cat a | grep b > c; ls -l && echo $X", "a=1 b=2 ls", "echo 'x' \"y\" > f 2>&1", "! ls || true",
		"case x in a) ls;; esac", "time ls", "x+=1", "echo $'a'", "local x=1", "ls &> f", "local\r", "export\vx=1",
		"cat <<E\"O\"F\n$(ls)\nEOF", "cat <<E\\OF\n`ls`\nEOF\n", "cat <<-E'O'F\n\t$(ls)\n\tEOF", "cat <<E\"O\"F\nx\\\nEOF\nls\nEOF",
		"cat <<E\"$x\"F\nEOF", "cat <<\"\"\nx\n\n", "go build -gcflags='all=-N -l -cpuprofile x' .", "go build -gcflags all=-m -ldflags=-extar=x",
		"go build -gcflags='-N \"-cpuprofile=x' .", "go -C d build -gcflags=-trace=t", "go build -gccgoflags=-B/x",
		"git diff -C -c -u -M", "git -c a=b diff -c", "git clone -c a=b x", "CGO_ENABLED=0 GOOS=linux go build ./...",
		"GLOBIGNORE=x; cat ?env", "shopt -s dotglob; cat *env", "ls -RL x", "cat ?env [.]env",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	for _, p := range []string{"a/b", ".env", "x[y]"} {
		_ = os.MkdirAll(filepath.Join(dir, p), 0o755)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > 4096 {
			return
		}
		if sameReadings(cmd) {
			// The shortcut that reads such text once must be exact.
			b, errB := analyze(cmd, Bash)
			p, errP := analyze(cmd, POSIX)
			if (errB == nil) != (errP == nil) || (errB == nil && !reflect.DeepEqual(b, p)) {
				t.Fatalf("%q reads differently: bash %+v (%v), posix %+v (%v)", cmd, b, errB, p, errP)
			}
		}
		an, err := analyze(cmd, AllDialects)
		if err != nil {
			return
		}
		for _, w := range an.Words {
			if w.Glob == "" {
				continue
			}
			ms, err := Expand(w.Glob, dir, GlobOptions{ExtGlob: w.ExtGlob, Home: dir})
			if err != nil {
				continue
			}
			for _, m := range ms {
				if !strings.HasPrefix(m, "/") {
					t.Fatalf("Expand(%q) returned a relative path %q", w.Glob, m)
				}
			}
			// Hiding dot names only removes names; dotglob only adds them.
			hidden, errH := Expand(w.Glob, dir, GlobOptions{ExtGlob: w.ExtGlob, Home: dir, HideDots: true})
			dotted, errD := Expand(w.Glob, dir, GlobOptions{ExtGlob: w.ExtGlob, Home: dir, DotGlob: true})
			if errH == nil {
				for _, m := range hidden {
					if !slices.Contains(ms, m) {
						t.Fatalf("Expand(%q) hiding dot names returned %q, which it does not return otherwise", w.Glob, m)
					}
				}
			}
			if errD == nil {
				for _, m := range ms {
					if !slices.Contains(dotted, m) {
						t.Fatalf("Expand(%q) under dotglob misses %q", w.Glob, m)
					}
				}
			}
		}
	})
}
