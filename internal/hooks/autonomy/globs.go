package autonomy

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
)

// forbiddenGlob is one configured forbidden-path pattern, compiled.
type forbiddenGlob struct {
	pattern string         // as configured, for messages
	entry   string         // the DefaultProtected entry it comes from, if any
	forms   []compiledForm // doublestar patterns for the path itself and for what lies under it
}

// compiledForm is one doublestar pattern with the literal text every match
// starts with and a literal every match contains, so most non-matching paths
// are rejected by strings.HasPrefix and strings.Contains before doublestar
// runs.
type compiledForm struct {
	glob    string
	prefix  string
	literal string
	litSet  byteSet // the bytes of literal
	newLit  bool    // literal is not the previous form's
}

// byteSet is a set of byte values.
type byteSet [4]uint64

// byteSetOf returns the set of the bytes of s.
func byteSetOf(s string) byteSet {
	var b byteSet
	for i := 0; i < len(s); i++ {
		b[s[i]>>6] |= 1 << (s[i] & 63)
	}
	return b
}

// covers reports whether every byte of t is in b: a string whose bytes are
// b cannot contain a string whose bytes are t otherwise.
func (b *byteSet) covers(t *byteSet) bool {
	return t[0]&^b[0] == 0 && t[1]&^b[1] == 0 && t[2]&^b[2] == 0 && t[3]&^b[3] == 0
}

// literalPrefix returns the text before the first doublestar metacharacter
// of g, without a trailing slash (doublestar matches "a/**" against "a"):
// every name matching g starts with it, since doublestar compares literal
// characters exactly.
func literalPrefix(g string) string {
	if i := strings.IndexAny(g, `*?[{\`); i >= 0 {
		return strings.TrimSuffix(g[:i], "/")
	}
	return g
}

// requiredLiteral returns the longest run of literal characters (outside
// classes and braces, without '/') that every name matching the doublestar
// pattern g contains, or "" when there is none or g uses escapes.
func requiredLiteral(g string) string {
	if strings.IndexByte(g, '\\') >= 0 {
		return ""
	}
	// Runs are cut at ASCII bytes only, so they are whole UTF-8 sequences
	// of g (converting single bytes to strings would re-encode non-ASCII
	// bytes as other characters, and the literal would never be found).
	best := ""
	start := -1 // start of the current run, -1 when none
	depth := 0
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case c == '[' && depth == 0:
			if j := strings.IndexByte(g[i+1:], ']'); j >= 0 {
				i += j + 1
			}
		case depth == 0 && c != '*' && c != '?' && c != '/' && c != ']':
			if start < 0 {
				start = i
			}
			if i+1-start > len(best) {
				best = g[start : i+1]
			}
			continue
		}
		start = -1
	}
	return best
}

var _ hooks.Hook = (*Hook)(nil)

// New validates cfg and returns the hook; it opens the workspace root.

// matched against paths (see the package doc).
func (h *Hook) compileForbidden(p string) (forbiddenGlob, error) {
	return h.compileGlob("forbiddenPathGlobs", p, false)
}

// compileGlob compiles the pattern p of the field named field: anchored
// as the package doc says and, unless exact, also covering everything
// under what it matches.
func (h *Hook) compileGlob(field, p string, exact bool) (forbiddenGlob, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 || !doublestar.ValidatePattern(p) {
		return forbiddenGlob{}, fmt.Errorf("%s pattern %q: %w", field, p, hooks.ErrInvalidGlob)
	}
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" {
		trimmed = "/"
	}
	var forms []string
	switch {
	case strings.HasPrefix(trimmed, "/"):
		forms = append(forms, trimmed)
		if h.root != "" && h.root != h.real {
			if rel, ok := strings.CutPrefix(trimmed, h.root+"/"); ok {
				forms = append(forms, escapeGlob(h.real)+"/"+rel)
			}
		}
	case strings.HasPrefix(trimmed, "**"):
		forms = append(forms, trimmed)
	case !strings.Contains(trimmed, "/"):
		forms = append(forms, "**/"+trimmed)
	default:
		if h.root == "" {
			return forbiddenGlob{}, fmt.Errorf("%s pattern %q is relative but no workspace root is set: %w", field, p, hooks.ErrInvalidPath)
		}
		forms = append(forms, escapeGlob(h.root)+"/"+trimmed)
		if h.real != h.root {
			forms = append(forms, escapeGlob(h.real)+"/"+trimmed)
		}
	}
	var all []compiledForm
	for _, f := range forms {
		if h.fold {
			f = strings.ToLower(f)
		}
		// F and "F/**": the path itself and everything under it. Both are
		// needed: doublestar does not match "a*/**" against "a".
		base := strings.TrimSuffix(f, "/**")
		if base == "/" {
			base = ""
		}
		variants := []string{base + "/**"}
		if base != "" && base != "**" {
			variants = append(variants, base)
		}
		if exact {
			variants = []string{f}
		}
		for _, v := range variants {
			if !doublestar.ValidatePattern(v) {
				return forbiddenGlob{}, fmt.Errorf("%s pattern %q: %w", field, p, hooks.ErrInvalidGlob)
			}
			lit := requiredLiteral(v)
			newLit := len(all) == 0 || all[len(all)-1].literal != lit
			all = append(all, compiledForm{glob: v, prefix: literalPrefix(v), literal: lit, litSet: byteSetOf(lit), newLit: newLit})
		}
	}
	return forbiddenGlob{pattern: p, forms: all}, nil
}

// escapeGlob escapes doublestar metacharacters in a literal path.
func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]{}\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pathForms are the forms of one path the globs are matched against: the
// raw value, its lexical absolute form and its real path (case-folded on a
// case-insensitive workspace), with the set of the bytes of each.
type pathForms struct {
	cands [3]string
	sets  [3]byteSet
	n     int // the real path is left out when it equals the absolute form
}

// forms sets pf to the forms of the raw path raw, relative to base, whose
// real path is real.
func (h *Hook) forms(pf *pathForms, raw, base, real string) {
	abs := raw
	if strings.HasPrefix(abs, "~") {
		if home, err := homeDir(); err == nil {
			abs = home + abs[1:]
		}
	}
	if !strings.HasPrefix(abs, "/") {
		abs = base + "/" + abs
	}
	abs = pathguard.Clean(abs)
	pf.cands, pf.n = [3]string{raw, abs, real}, 3
	if h.fold {
		for i := range pf.cands {
			pf.cands[i] = strings.ToLower(pf.cands[i])
		}
	}
	if pf.cands[2] == pf.cands[1] {
		pf.n = 2
	}
	for k := range pf.cands[:pf.n] {
		pf.sets[k] = byteSetOf(pf.cands[k])
	}
}

// matchGlobs returns the first of globs that one of the forms pf matches.
func matchGlobs(globs []forbiddenGlob, pf *pathForms) (string, bool) {
	if g := matchGlob(globs, pf); g != nil {
		return g.pattern, true
	}
	return "", false
}

// matchGlob returns the first of globs that one of the forms pf matches, or nil.
func matchGlob(globs []forbiddenGlob, pf *pathForms) *forbiddenGlob {
	cands, sets := pf.cands[:pf.n], &pf.sets
	for gi := range globs {
		g := &globs[gi]
		// A pattern's forms mostly share their literal: search each
		// candidate for it at most once per literal, and only when the
		// cheaper prefix test passes.
		var lit string
		var litState [3]uint8 // per candidate: 0 not searched yet, 1 found, 2 absent
		for i := range g.forms {
			f := &g.forms[i]
			if f.newLit {
				lit, litState = f.literal, [3]uint8{}
			}
			for k, c := range cands {
				if !hasPrefix(c, f.prefix) {
					continue
				}
				if lit != "" {
					if litState[k] == 0 {
						litState[k] = 2
						if sets[k].covers(&f.litSet) && strings.Contains(c, lit) {
							litState[k] = 1
						}
					}
					if litState[k] != 1 {
						continue
					}
				}
				if doublestar.MatchUnvalidated(f.glob, c) {
					return g
				}
			}
		}
	}
	return nil
}

// hasPrefix is strings.HasPrefix comparing the prefix's last byte first: a
// prefix anchored in the workspace shares the root with most paths and
// differs from them after it.
func hasPrefix(s, prefix string) bool {
	n := len(prefix)
	return n == 0 || len(s) >= n && s[n-1] == prefix[n-1] && s[:n] == prefix
}
