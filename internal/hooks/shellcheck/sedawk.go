package shellcheck

import (
	"slices"
	"strings"
)

// sedScript reports "e" when a sed program (any -e text, or the first
// operand) runs a command or opens a file other than its input: the e, r,
// R, w and W commands and the e and w flags of s. A program this reader
// cannot follow is reported too.
func sedScript(args []string) []string {
	if slices.ContainsFunc(scriptTexts(args, 'e', []string{"--expression"}, "fl", []string{"--file", "--line-length"}), sedRisky) {
		return []string{"e"}
	}
	return nil
}

// sedRisky walks a sed program command by command the way GNU sed's
// compiler reads it: addresses, '!', then one command letter and its
// arguments.
func sedRisky(p string) bool {
	r := sedReader{p: p}
	for {
		r.skip(" \t\n;")
		if r.eof() {
			return false
		}
		if !r.address() {
			return true
		}
		r.skip(" \t")
		if r.peek() == ',' {
			r.i++
			r.skip(" \t")
			if c := r.peek(); c == '+' || c == '~' {
				r.i++
			}
			if !r.address() {
				return true
			}
		}
		r.skip(" \t!")
		if r.eof() {
			return true // an address without a command is an error
		}
		c := r.p[r.i]
		r.i++
		switch c {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			r.skip(" \t0123456789")
		case '#':
			r.toEOL()
		case ':', 'b', 't', 'T', 'v':
			// A label ends at a blank or ';'; reading it as ending
			// there when sed reads on only finds more commands.
			r.skip(" \t")
			for !r.eof() && !strings.ContainsRune(" \t\n;", rune(r.p[r.i])) {
				r.i++
			}
		case 'a', 'i', 'c':
			r.text()
		case 's':
			if !r.delimited(2, true) {
				return true
			}
			for !r.eof() {
				f := r.p[r.i]
				if f == 'e' || f == 'w' {
					return true
				}
				if !strings.ContainsRune("gpiImM0123456789", rune(f)) {
					break
				}
				r.i++
			}
		case 'y':
			if !r.delimited(2, false) {
				return true
			}
		default:
			return true // e, r, R, w, W, or a command this reader does not know
		}
	}
}

type sedReader struct {
	p string
	i int
}

func (r *sedReader) eof() bool { return r.i >= len(r.p) }

func (r *sedReader) peek() byte {
	if r.eof() {
		return 0
	}
	return r.p[r.i]
}

func (r *sedReader) skip(set string) {
	for !r.eof() && strings.IndexByte(set, r.p[r.i]) >= 0 {
		r.i++
	}
}

func (r *sedReader) toEOL() {
	for !r.eof() && r.p[r.i] != '\n' {
		r.i++
	}
}

// address reads one address, if any: a line number (first~step), $,
// /regex/ or \cregexc with its I and M flags. It is false for a regex
// without its closing delimiter.
func (r *sedReader) address() bool {
	switch c := r.peek(); {
	case c >= '0' && c <= '9':
		r.skip("0123456789")
		if r.peek() == '~' {
			r.i++
			r.skip("0123456789")
		}
	case c == '$':
		r.i++
	case c == '/' || c == '\\':
		if c == '\\' {
			r.i++
		}
		if !r.delimited(1, true) {
			return false
		}
		r.skip("IM")
	}
	return true
}

// delimited reads n parts ended by the delimiter at r.i (s/a/b/ has two),
// as GNU sed reads them: a backslash escapes the next character, and in
// the first part (a regular expression, when regex is set) a bracket
// expression may hold the delimiter.
func (r *sedReader) delimited(n int, regex bool) bool {
	if r.eof() {
		return false
	}
	d := r.p[r.i]
	if d == '\n' || d == '\\' {
		return false
	}
	r.i++
	for part := range n {
		for {
			if r.eof() {
				return false
			}
			c := r.p[r.i]
			r.i++
			switch {
			case c == '\\':
				r.i++
				continue
			case c == '[' && regex && part == 0:
				if !r.bracket() {
					return false
				}
				continue
			}
			if c == d {
				break
			}
		}
	}
	return true
}

// bracket skips a bracket expression after its '[': an optional '^', a
// leading ']', and [:class:], [.coll.] and [=equiv=] inside.
func (r *sedReader) bracket() bool {
	if r.peek() == '^' {
		r.i++
	}
	if r.peek() == ']' {
		r.i++
	}
	for !r.eof() {
		c := r.p[r.i]
		r.i++
		switch {
		case c == ']':
			return true
		case c == '[' && (r.peek() == ':' || r.peek() == '.' || r.peek() == '='):
			end := string([]byte{r.p[r.i], ']'})
			k := strings.Index(r.p[r.i+1:], end)
			if k < 0 {
				return false
			}
			r.i += 1 + k + 2
		}
	}
	return false
}

// text skips the text of a, i or c: to the end of the line, continued past
// a newline escaped with a backslash.
func (r *sedReader) text() {
	for !r.eof() {
		c := r.p[r.i]
		r.i++
		if c == '\\' {
			r.i++
			continue
		}
		if c == '\n' {
			return
		}
	}
}

// awkScript reports what an awk program does beyond reading its operands
// and printing: system(), pipes, output redirection, getline from a file,
// changes to ARGV (which names the files read), and gawk's extensions.
func awkScript(args []string) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range scriptTexts(args, 'e', []string{"--source"}, "vFf", []string{"--assign", "--field-separator", "--file"}) {
		if strings.Contains(s, "system") {
			add("system")
		}
		if strings.Contains(s, "|") {
			add("|")
		}
		if strings.Contains(s, ">") {
			add(">")
		}
		if strings.Contains(s, "getline") && strings.Contains(s, "<") {
			add("getline<")
		}
		if strings.Contains(s, "ARGV") || strings.Contains(s, "ARGC") {
			add("ARGV")
		}
		if strings.Contains(s, "@load") || strings.Contains(s, "@include") || strings.Contains(s, "@namespace") {
			add("@load")
		}
	}
	return out
}
