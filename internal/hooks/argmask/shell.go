package argmask

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// maxShellDepth bounds how deep commands inside words (sh -c '...') are
// read as commands; deeper ones are left to the text pass.
const maxShellDepth = 3

// maskValue masks the secrets of one string: as a command when it parses
// as one and may hold more than one word, then as text.
func maskValue(v string) string {
	if !mayHoldSecret(v) {
		return v
	}
	if strings.ContainsAny(v, " \t\n;|&()`$'\"\\") {
		if nv, ok := maskShell(v, 1); ok {
			v = nv
		}
	}
	return maskText(v)
}

// maskArgv masks the secrets of one command's words (values after quote
// removal, the program first): the values of options whose names say
// secret or that the program's catalogue entry lists, a NAME=value word
// whose NAME says secret (env, export, docker -e), and in a word that may
// hold a command (sh -c '...'), what maskShell finds in it. The text pass
// reads the words' source afterwards. It returns nil when nothing changed.
func maskArgv(vals []string, depth int) []string {
	var (
		out      []string
		active   []string // the secret options of the programs named so far
		maskNext bool
	)
	set := func(i int, v string) {
		if v == vals[i] {
			return
		}
		if out == nil {
			out = slices.Clone(vals)
		}
		out[i] = v
	}
	for i, v := range vals {
		if maskNext {
			set(i, MaskedMarker)
			maskNext = false
			continue
		}
		if opts := shellcheck.SecretOptions(path.Base(v)); opts != nil {
			active = opts
		}
		nv := v
		if len(v) > 1 && v[0] == '-' {
			name, _, glued := strings.Cut(v, "=")
			switch {
			case SecretName(strings.TrimLeft(name, "-")) || slices.Contains(active, name):
				if glued {
					nv = name + "=" + MaskedMarker
				} else {
					maskNext = true
				}
			case v[1] != '-':
				nv, maskNext = shortOption(v, active)
			}
		}
		if nv == v {
			nv = wordSecrets(v, depth)
		}
		if nv != v && strings.HasSuffix(v, "=") {
			// NAME= or --name= with nothing after it: the value may be the
			// next word, split off where a command line was quoted again
			// (a reason's rendering), so it is masked too.
			maskNext = true
		}
		set(i, nv)
	}
	return out
}

// wordSecrets masks the value of a --name=value or NAME=value word whose
// name says secret (the word is one argument: all that follows '=' is the
// value, blanks included), or else what maskShell finds in a word that may
// hold a command (sh -c '...', a quoted command in a reason).
func wordSecrets(v string, depth int) string {
	// Every NAME= in the word, whatever precedes it (a word re-read from a
	// quoted command line may hold blanks before the name): the rest of
	// the word is the value of the first whose name says secret.
	for off := 0; ; {
		eq := strings.IndexByte(v[off:], '=')
		if eq < 0 {
			break
		}
		eq += off
		off = eq + 1
		i := eq
		for i > 0 && isNameByte(v[i-1]) {
			i--
		}
		query := i > 0 && strings.IndexByte("?&;", v[i-1]) >= 0 // a URL's parameter: the text pass reads it
		if n := v[i:eq]; n != "" && !query && SecretName(strings.TrimLeft(n, "-")) && (!isEnvName(n) || secretEnvName(n)) {
			return v[:eq+1] + MaskedMarker
		}
	}
	if depth < maxShellDepth && strings.ContainsAny(v, " \t\n;|&") && mayHoldSecret(v) {
		// As text first: a word re-read as a command can split a value off
		// its name (NAME= value) or make it a redirection (NAME= 000<0).
		t := maskText(v)
		if nv, ok := maskShell(t, depth+1); ok {
			return nv
		}
		return t
	}
	return v
}

// isEnvName reports whether s is a shell variable name.
func isEnvName(s string) bool {
	for i := range len(s) {
		if c := s[i]; c != '_' && !isUpper(c) && !isLower(c) && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// shortOption masks the value of a single-letter secret option of opts in
// the word v (-psecret, -upsecret), or reports that the next word is its
// value (-p, -up).
func shortOption(v string, opts []string) (string, bool) {
	for _, o := range opts {
		if len(o) != 2 {
			continue
		}
		at := strings.IndexByte(v[1:], o[1])
		switch {
		case at < 0:
		case 1+at == len(v)-1:
			return v, true
		default:
			return v[:at+2] + MaskedMarker, false
		}
	}
	return v, false
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// maskShell masks the secrets of src read as a bash command line (see the
// top of secrets.go); false when it does not parse.
func maskShell(src string, depth int) (res string, ok bool) {
	defer func() {
		if recover() != nil { // a parser bug: the text pass still runs
			res, ok = src, false
		}
	}()
	if len(src) > shellcheck.MaxInput || strings.IndexByte(src, 0) >= 0 {
		return src, false // the parser drops NUL bytes: words would be rewritten without them
	}
	f, err := shellcheck.ParseBash(src)
	if err != nil {
		return src, false
	}
	var edits []edit
	add := func(n syntax.Node, text string) {
		start, end := int(n.Pos().Offset()), int(n.End().Offset())
		if n.Pos().IsValid() && n.End().IsValid() && 0 <= start && start <= end && end <= len(src) {
			edits = append(edits, edit{start, end, text})
		}
	}
	done := map[*syntax.Word]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name == nil || !secretEnvName(n.Name.Value) {
				break
			}
			if n.Value != nil {
				add(n.Value, MaskedMarker)
				done[n.Value] = true
			}
			if n.Array != nil {
				for _, e := range n.Array.Elems {
					if e.Value != nil {
						add(e.Value, MaskedMarker)
						done[e.Value] = true
					}
				}
			}
		case *syntax.CallExpr:
			vals := make([]string, len(n.Args))
			for i, w := range n.Args {
				vals[i] = wordValue(w, src)
				done[w] = true
			}
			if nv := maskArgv(vals, depth); nv != nil {
				for i, w := range n.Args {
					if nv[i] != vals[i] {
						add(w, shellQuote(nv[i]))
					}
				}
			}
		case *syntax.Word:
			if !done[n] {
				v := wordValue(n, src)
				if nv := wordSecrets(v, depth); nv != v {
					add(n, shellQuote(nv))
				}
			}
		}
		return true
	})
	if len(edits) == 0 {
		return src, true
	}
	// A word inside another (a command substitution's) was masked with it.
	slices.SortFunc(edits, func(a, b edit) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var b strings.Builder
	at := 0
	for _, e := range edits {
		if e.start < at {
			continue
		}
		b.WriteString(src[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:])
	return b.String(), true
}

// wordValue is w's value after quote removal, with the source text of what
// only runs at run time (expansions, substitutions).
func wordValue(w *syntax.Word, src string) string {
	text := func(n syntax.Node) string {
		start, end := int(n.Pos().Offset()), int(n.End().Offset())
		if !n.Pos().IsValid() || !n.End().IsValid() || start < 0 || start > end || end > len(src) {
			return ""
		}
		return src[start:end]
	}
	if lit := w.Lit(); lit != "" {
		return unescape(lit, "")
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, ""))
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(text(p))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			if p.Dollar {
				b.WriteString(text(p))
				break
			}
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescape(l.Value, "$`\"\\\n"))
				} else {
					b.WriteString(text(q))
				}
			}
		default:
			b.WriteString(text(p))
		}
	}
	return b.String()
}

// unescape removes the backslashes of an unquoted literal (only), or of a
// double-quoted one before the bytes of only.
func unescape(s, only string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (only == "" || strings.IndexByte(only, s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// shellQuote writes v as one shell word: as it is when every byte is one
// no shell treats specially (and the marker's brackets), else single-quoted.
func shellQuote(v string) string {
	plain := v != ""
	for i := 0; plain && i < len(v); i++ {
		c := v[i]
		plain = isAlnum(c) || strings.IndexByte("_./=:,+@%-[]", c) >= 0
	}
	if plain {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
