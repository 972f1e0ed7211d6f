package shellcheck

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/pattern"
)

// Bounds of one Expand.
const (
	// MaxGlobMatches bounds the names one pattern may expand to.
	MaxGlobMatches = 1024
	// MaxGlobReads bounds the directories one pattern may read.
	MaxGlobReads = 4096
)

// ErrGlob wraps every failure to expand a pattern; a caller denies.
var ErrGlob = errors.New("glob cannot be expanded")

// GlobOptions say how a shell would read a pattern.
type GlobOptions struct {
	// Home replaces a leading unquoted ~ (a ~user prefix is an error).
	Home string
	// ExtGlob enables bash's extended operators (the word used them).
	ExtGlob bool
	// NoCase matches names case-insensitively (a case-insensitive file system).
	NoCase bool
	// HideDots matches a name that starts with a dot only by a pattern
	// component that starts with a dot (quoted or not), as bash without
	// dotglob and dash do: ?env, *env and [.]env do not match .env. An
	// extended pattern (@(.)env) still matches it.
	HideDots bool
	// DotGlob lets every wildcard match a leading dot, as bash's dotglob
	// does (otherwise a leading * never matches one).
	DotGlob bool
	// Listed, when set, is told of every directory whose entries the
	// expansion reads, as the shell reads them ("dir/.." for a pattern
	// such as .[[:punct:]]/x*): reading a directory's names is touching it.
	Listed func(dir string)
}

// Expand returns every existing path the shell pattern pat (a Word.Glob or
// Redirect.Pattern, relative to dir unless absolute) can name, as absolute
// paths, under every reading the supported shells give it: each component
// is matched with mvdan.cc/sh/v3/pattern (POSIX bracket expressions and
// character classes included) against the directory's entries plus "." and
// ".." (dash and bash before 5.2 let a pattern such as .[[:punct:]] match
// ".."), and "**" both as "*" and as bash's globstar (any depth). Bracket
// features mvdan.cc/sh does not implement (collating symbols [[.x.]] and
// equivalence classes [[=e=]]), negated extended globs and exceeding
// MaxGlobMatches or MaxGlobReads are errors wrapping ErrGlob.
func Expand(pat, dir string, opt GlobOptions) ([]string, error) {
	if strings.HasPrefix(pat, "~") {
		rest := pat[1:]
		if rest != "" && rest[0] != '/' {
			return nil, fmt.Errorf("%w: %q names another user's home directory", ErrGlob, pat)
		}
		if opt.Home == "" {
			return nil, fmt.Errorf("%w: %q needs a home directory", ErrGlob, pat)
		}
		pat = quoteMeta(opt.Home) + rest
	}
	base := dir
	if strings.HasPrefix(pat, "/") {
		base = "/"
	}
	g := globber{opt: opt}
	matches := []string{strings.TrimSuffix(base, "/")}
	if base == "/" {
		matches[0] = ""
	}
	for seg := range strings.SplitSeq(pat, "/") {
		if seg == "" {
			continue
		}
		next, err := g.segment(matches, seg)
		if err != nil {
			return nil, err
		}
		matches = next
		if len(matches) == 0 {
			return nil, nil
		}
	}
	for i, m := range matches {
		if m == "" {
			matches[i] = "/"
		}
	}
	return matches, nil
}

type globber struct {
	opt   GlobOptions
	reads int
}

func (g *globber) mode() pattern.Mode {
	m := pattern.Filenames | pattern.EntireString | pattern.NoGlobStar
	if g.opt.ExtGlob {
		m |= pattern.ExtendedOperators
	}
	if g.opt.NoCase {
		m |= pattern.NoGlobCase
	}
	if g.opt.DotGlob {
		m |= pattern.GlobLeadingDot
	}
	return m
}

// segment matches one path component against the entries of every dir.
func (g *globber) segment(dirs []string, seg string) ([]string, error) {
	if !pattern.HasMeta(seg, 0) && (!g.opt.ExtGlob || !hasExtOp(seg)) {
		lit := unquote(seg)
		out := make([]string, len(dirs))
		for i, d := range dirs {
			out[i] = d + "/" + lit
		}
		return out, nil
	}
	expr, err := pattern.Regexp(seg, g.mode())
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrGlob, seg, err)
	}
	rx, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrGlob, seg, err)
	}
	var out []string
	for _, d := range dirs {
		names, err := g.read(d)
		if err != nil {
			return nil, err
		}
		hide := g.opt.HideDots && !g.opt.DotGlob && !strings.HasPrefix(seg, ".") && !strings.HasPrefix(seg, `\.`) &&
			(!g.opt.ExtGlob || !hasExtOp(seg))
		for _, n := range names {
			if hide && strings.HasPrefix(n, ".") {
				continue
			}
			if rx.MatchString(n) {
				if out, err = g.add(out, d+"/"+n); err != nil {
					return nil, err
				}
			}
		}
	}
	if seg == "**" {
		// bash's globstar: every directory at any depth (names starting
		// with a dot excluded, symlinks not followed), and what is in them.
		for _, d := range dirs {
			if out, err = g.walk(out, d, 0); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// walk adds everything below d (not starting with a dot) to out.
func (g *globber) walk(out []string, d string, depth int) ([]string, error) {
	if depth > 64 {
		return nil, fmt.Errorf("%w: directories nested deeper than 64", ErrGlob)
	}
	ents, err := g.readEntries(d)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := d + "/" + e.Name()
		if out, err = g.add(out, p); err != nil {
			return nil, err
		}
		if e.IsDir() {
			if out, err = g.walk(out, p, depth+1); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (g *globber) add(out []string, p string) ([]string, error) {
	if len(out) >= MaxGlobMatches {
		return nil, fmt.Errorf("%w: it matches more than %d names", ErrGlob, MaxGlobMatches)
	}
	return append(out, p), nil
}

// read returns the names in d plus "." and ".."; none when d is not a
// readable directory.
func (g *globber) read(d string) ([]string, error) {
	ents, err := g.readEntries(d)
	if err != nil {
		return nil, err
	}
	if ents == nil {
		return nil, nil
	}
	names := make([]string, 0, len(ents)+2)
	names = append(names, ".", "..")
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func (g *globber) readEntries(d string) ([]os.DirEntry, error) {
	g.reads++
	if g.reads > MaxGlobReads {
		return nil, fmt.Errorf("%w: it reads more than %d directories", ErrGlob, MaxGlobReads)
	}
	if d == "" {
		d = "/"
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, nil //nolint:nilerr // not a directory: no matches, as in the shell
	}
	if g.opt.Listed != nil {
		g.opt.Listed(d)
	}
	if ents == nil {
		ents = []os.DirEntry{}
	}
	return ents, nil
}

// hasExtOp reports whether s has an unescaped extended operator.
func hasExtOp(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if strings.IndexByte("?*+@!", s[i]) >= 0 && s[i+1] == '(' {
			return true
		}
	}
	return false
}

// unquote removes a pattern's backslash escapes.
func unquote(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
