package shellcheck

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// sedOracle compiles sed programs with GNU sed's --debug, which prints the
// program as sed read it, one command per line, confined by the kernel to a
// scratch directory (a w command opens its file while compiling).
type sedOracle struct {
	sb  *sandbox.Sandbox
	dir string
}

func newSedOracle(t testing.TB) *sedOracle {
	t.Helper()
	out, err := exec.Command("sed", "--version").Output()
	if err != nil || !bytes.Contains(out, []byte("GNU sed")) {
		t.Skipf("GNU sed is not installed (%v); the Debian image always has it", err)
	}
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Usable(); err != nil {
		t.Fatalf("the oracle runs sed confined: %v", err)
	}
	return &sedOracle{sb: sb, dir: t.TempDir()}
}

// risky reports whether GNU sed reads prog as running a command or opening
// a file (e, r, R, w, W, or s with the e or w flag), and whether sed
// accepted the program at all.
func (o *sedOracle) risky(t testing.TB, prog string) (risky, accepted bool) {
	t.Helper()
	cmd := exec.Command("sed", "--debug", "-n", "--expression="+prog, "/dev/null")
	cmd.Dir = o.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	p, err := o.sb.Start(cmd, sandbox.Confinement{Writable: []string{o.dir}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Wait()
	if strings.Contains(stderr.String(), "couldn't open file") {
		return true, true // a w file, refused by the sandbox
	}
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Exited || rep.ExitCode != 0 {
		return false, false
	}
	// A later line of a, i or c text is printed as written, after its
	// command: one that starts with two blanks (or escapes that print as
	// blanks) looks like a command. Each such line follows an escaped
	// newline of the program, so while the program has escaped newlines
	// left, an indented line after a text command gets no verdict.
	continued := strings.Count(prog, "\\\n")
	text := false
	risky = false
	for line := range strings.SplitSeq(stdout.String(), "\n") {
		if !strings.HasPrefix(line, "  ") {
			// The header, or a later line of a, i or c text, printed as
			// written: commands are indented by two spaces or more.
			if text {
				continued--
			}
			continue
		}
		if text && continued > 0 {
			return false, false // text or command: no verdict
		}
		cmd, r, ok := debugLineRisky(strings.TrimSpace(line))
		if !ok {
			return false, false // a line the canonical form leaves ambiguous: no verdict
		}
		text = text || cmd == 'a' || cmd == 'i' || cmd == 'c'
		risky = risky || r
	}
	return risky, true
}

// debugLineRisky reads one line of sed --debug's canonical program:
// addresses ("1", "$", "0~4", "/re/I", ",", "+3", "!"), then the command,
// whose letter it returns.
// ok is false for an s command whose replacement holds an unescaped '/'
// (sed prints it with '/' delimiters whatever the program used), where
// the flags cannot be told apart from the replacement.
func debugLineRisky(l string) (cmd byte, risky, ok bool) {
	i := 0
	for i < len(l) {
		switch c := l[i]; {
		case c >= '0' && c <= '9', c == '$', c == ',', c == '+', c == '~', c == '!', c == ' ', c == 'I' && i > 0, c == 'M' && i > 0:
			i++
		case c == '/':
			i++
			for i < len(l) && l[i] != '/' {
				if l[i] == '\\' {
					i++
				}
				i++
			}
			i++
		default:
			switch c {
			case 'e', 'r', 'R', 'w', 'W':
				return c, true, true
			case 's':
				// s/re/repl/flags, the delimiter escaped inside both parts.
				var seps []int
				for j := i + 1; j < len(l); j++ {
					if l[j] == '\\' {
						j++
						continue
					}
					if l[j] == '/' {
						seps = append(seps, j)
					}
				}
				if len(seps) != 3 {
					return c, false, false
				}
				return c, strings.ContainsAny(l[seps[2]+1:], "ew"), true
			}
			return c, false, true
		}
	}
	return 0, false, true
}

// sedCorpus are programs the reader must get right: a command or flag that
// runs or opens, in every form GNU sed accepts, and ordinary programs.
var sedCorpus = []string{
	"1e id", "1eid", "e", "$!e id", "/x/e id", "/x/I e id", "\\%x%e id", "\\%x%Ie id", "\\,x,e id",
	"0~3 e id", "1~2e id", "/x/,~4e id", "/x/,+2 e id", "0,/x/e id", "1!e id", "1 ! e id",
	":a;e id", ":a\ne id", "b a;e id\n:a", "ta;e id\n:a", "/x/{p;e id\n}", "{e id\n}", "y/ab/cd/;e",
	"s/a/b/e", "s/a/b/ge", "s/a/b/3e", "s/a/b/w out", "s/a/b/gw out", "s|a|b|e", "s,a,b,w out",
	"s/[/]/x/e", "s/[]/]/x/e", "s/[[:alpha:]/]/x/e", "s/a\\/b/c/e", "s/[\\/]/x/e", "s/a/[/e",
	"s/a/\\//e", "s/a/b/;wout", "1rsecret", "1R secret", "r secret", "$r x", "1w out", "1W out",
	"w out", "/x/w out", "s/x/y/;1r z", "a text\ne id", "a\\\ntext\ne id", "i\\\nx\\\ny\ne id",
	"c foo;e id", "#comment\ne id", "l 5;e id", "q5;e", "v;e id", "v 4.2\ne id", "F;e id", "z;e id",
	"=;e id", "{;e id;}", "/a[/]b/e id", "/[[:digit:]/]/e id", "s/[[.-.]/]/x/e", "s/[[=a=]/]/x/e",
	"\\/x/e id", "n;N;D;e", "x;h;H;g;G;e", "stt/et", "s|a|/e|w out", "s|a|/|e",
	"c\\\ne x\\\nw y", "a\\\nx\\\ne id", "i\\\nr x\ne id",
	// Ordinary programs.
	"p", "1,5p", "$p", "s/a/b/", "s/a/b/g", "s/a/b/gp", "s/[/]/x/", "s/[]/]/x/g",
	"s/[[:alpha:]/]/x/g", "1~2p;/x/,+3d", "$a text with e and w", "/start/,/end/{/x/!p}",
	"s/hello world/bye/", "y/abc/xyz/", "=", "1!G;h;$!d", "$!N;P;D", ":a;N;$!ba;s/\\n/ /g",
	"s/\\(a\\)/\\1/", "/x/I p", "0~4 p", "l", "q", "Q 3", "s/e/w/", "s/w/e/g", "/e/p", "/w/d",
	"a e id", "i w out", "c r x", "s/x/y/I", "s/x/y/M", "a00\\\n w", "a x\\\n  w out",
}

// TestSedReaderMatchesGNUSed compares the reader with how GNU sed compiles
// each program of the corpus: any program sed reads as running a command or
// opening a file must be reported.
func TestSedReaderMatchesGNUSed(t *testing.T) {
	o := newSedOracle(t)
	for prog, want := range map[string]bool{"1e id": true, "s/a/b/w out": true, "1r x": true, "s/a/b/g": false, "$!N;P;D": false} {
		if got, ok := o.risky(t, prog); !ok || got != want {
			t.Fatalf("the oracle reads %q as risky=%v (accepted %v), want %v", prog, got, ok, want)
		}
	}
	over, risky := 0, 0
	for _, prog := range sedCorpus {
		r, accepted := o.risky(t, prog)
		if !accepted {
			t.Logf("%q: no verdict (GNU sed rejects it, or its canonical form is ambiguous)", prog)
			continue
		}
		got := sedRisky(prog)
		if r {
			risky++
		}
		if r && !got {
			t.Errorf("%q: GNU sed runs a command or opens a file, the reader says it does not", prog)
		}
		if !r && got {
			over++
			t.Logf("%q: over-reported (sed reads no command or file)", prog)
		}
	}
	t.Logf("%d of %d programs run a command or open a file; %d over-reported", risky, len(sedCorpus), over)
	if over > 6 {
		t.Errorf("%d ordinary programs over-reported", over)
	}
}

// FuzzSedReader fuzzes the reader against GNU sed: a program sed accepts
// and reads as running a command or opening a file is never missed.
func FuzzSedReader(f *testing.F) {
	for _, p := range sedCorpus {
		f.Add(p)
	}
	o := newSedOracle(f)
	f.Fuzz(func(t *testing.T, prog string) {
		if strings.ContainsRune(prog, 0) || len(prog) > 200 {
			return
		}
		got := sedRisky(prog)
		if got {
			return
		}
		if risky, accepted := o.risky(t, prog); accepted && risky {
			t.Errorf("%q: GNU sed runs a command or opens a file, the reader says it does not", prog)
		}
	})
}
