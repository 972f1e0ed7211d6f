package contract

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// Reasons given in refusedCommands.
const (
	reasonChdir       = "changes the working directory"
	reasonNestedShell = "starts a nested shell"
)

// refusedCommands change the directory that relative words are resolved
// against, or run text this check cannot see; a scoped shell call naming one
// of them (as any word, conservatively) is denied.
var refusedCommands = map[string]string{
	"cd": reasonChdir, "pushd": reasonChdir,
	"popd": reasonChdir, "eval": "runs text built at run time",
	"source": "runs a script this check cannot see",
	"sh":     reasonNestedShell, "bash": reasonNestedShell, "dash": reasonNestedShell,
	"zsh": reasonNestedShell, "ksh": reasonNestedShell, "mksh": reasonNestedShell,
	"ash": reasonNestedShell, "busybox": reasonNestedShell, "fish": reasonNestedShell,
	"csh": reasonNestedShell, "tcsh": reasonNestedShell,
}

// shellPaths returns the words of a shell command that may name paths, for
// a scoped shell (or process) grant. It is deliberately conservative and
// simple; it checks the paths a command NAMES, not what the programs it runs
// do (an interpreter can open any file), so a scoped shell grant is a
// best-effort confinement, and granting no shell is the only strict one.
//
// The command is parsed as bash. Every word anywhere in it (arguments,
// assignments, redirection targets, test expressions, the commands inside
// subshells, pipelines and lists) must be static: a word with a parameter
// expansion, command or process substitution, arithmetic expansion, $'...'
// string or extended glob is an error. A here-document body must be static
// too. Brace expansions are expanded (at most 16Ki words). A glob segment
// that could match ".." (such as ".*") is an error. A word equal to cd,
// pushd, popd, eval, source or a shell's name (anywhere, so that `builtin cd`
// and `xargs sh` are caught too), or a "." command, is an error, because the
// relative paths after it could not be resolved correctly. The path words
// returned are the candidates (see candidates) of every word; relative ones
// resolve against the call's working directory.
func shellPaths(cmd string) ([]string, error) {
	if strings.IndexByte(cmd, 0) >= 0 {
		return nil, fmt.Errorf("the command contains a NUL byte")
	}
	f, err := shellcheck.ParseBash(cmd)
	if err != nil {
		return nil, fmt.Errorf("the command cannot be parsed: %w", err)
	}
	var out []string
	var werr error
	syntax.Walk(f, func(n syntax.Node) bool {
		if werr != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) > 0 {
				if v, _, err := literal(n.Args[0]); err == nil && v == "." {
					werr = fmt.Errorf("the \".\" command runs a script this check cannot see")
					return false
				}
			}
		case *syntax.Redirect:
			if n.Hdoc != nil {
				for _, p := range n.Hdoc.Parts {
					if _, ok := p.(*syntax.Lit); !ok {
						werr = fmt.Errorf("a here-document expands text at run time")
						return false
					}
				}
			}
			if n.Word != nil {
				werr = shellWord(n.Word, &out)
			}
			return false
		case *syntax.Word:
			werr = shellWord(n, &out)
			return false
		}
		return true
	})
	if werr != nil {
		return nil, werr
	}
	return out, nil
}

// shellWord appends the path candidates of w to out.
func shellWord(w *syntax.Word, out *[]string) error {
	words := []*syntax.Word{w}
	if syntax.SplitBraces(w) {
		words = words[:0]
		for bw, err := range expand.BracesSeq(nil, w) {
			if err != nil {
				return fmt.Errorf("word %q: %w", wordText(w), err)
			}
			words = append(words, bw)
		}
	}
	for _, bw := range words {
		v, globbed, err := literal(bw)
		if err != nil {
			return fmt.Errorf("word %q %w", wordText(w), err)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("word %q contains a NUL byte", v)
		}
		base := v
		if i := strings.LastIndexByte(v, '/'); i >= 0 && i < len(v)-1 {
			base = v[i+1:]
		}
		if why, ok := refusedCommands[base]; ok && (base == v || strings.Contains(v, "/")) {
			return fmt.Errorf("word %q %s, so relative paths cannot be checked", v, why)
		}
		if globbed {
			for seg := range strings.SplitSeq(v, "/") {
				if !strings.HasPrefix(seg, ".") {
					continue
				}
				if m, err := path.Match(seg, ".."); m || err != nil {
					return fmt.Errorf("glob %q may match \"..\"", v)
				}
			}
		}
		*out = append(*out, candidates(v)...)
	}
	return nil
}

// literal returns the value of a static word and whether an unquoted glob
// character occurs in it; any expansion is an error.
func literal(w *syntax.Word) (string, bool, error) {
	var b strings.Builder
	globbed := false
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[") {
				globbed = true
			}
			unescape(&b, p.Value, false)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false, fmt.Errorf("uses a $'...' string")
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false, fmt.Errorf("uses a $\"...\" string")
			}
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false, fmt.Errorf("expands text at run time")
				}
				unescape(&b, lit.Value, true)
			}
		default:
			return "", false, fmt.Errorf("expands text at run time")
		}
	}
	return b.String(), globbed, nil
}

// unescape writes the value of a literal's source text: a backslash quotes
// the next character (inside double quotes only $ ` " \ and newline), and a
// backslash-newline is a line continuation.
func unescape(b *strings.Builder, s string, dquoted bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++
		case !dquoted || strings.IndexByte("$`\"\\", next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte(c)
		}
	}
}

// wordText prints w for an error message.
func wordText(w *syntax.Word) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, w); err != nil {
		return "?"
	}
	return b.String()
}
