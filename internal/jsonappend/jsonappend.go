// Package jsonappend appends JSON strings and numbers to byte slices exactly
// as encoding/json and log/slog encode them, for the hot paths (audit
// records, decision answers) that write JSON without reflection. Its tests
// compare it byte for byte with both.
package jsonappend

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Escaping says whose string encoding String reproduces. All of them escape
// quotes, backslashes and control characters, write invalid UTF-8 as \ufffd
// and escape U+2028 and U+2029.
type Escaping uint8

const (
	// JSON is json.Marshal's: also <, > and & as \u003c, \u003e, \u0026,
	// and \b, \f as short escapes.
	JSON Escaping = iota
	// JSONNoHTML is a json.Encoder's with SetEscapeHTML(false) (log/slog's
	// for values it marshals): <, > and & as is.
	JSONNoHTML
	// Slog is log/slog's JSON handler's for string values and keys: like
	// JSONNoHTML but \b and \f as \u0008 and \u000c.
	Slog
)

const hexDigits = "0123456789abcdef"

// plain[e][c] is true for the ASCII bytes c that escaping e writes as is.
var plain = func() (t [3][utf8.RuneSelf]bool) {
	for e := range t {
		for c := 0x20; c < utf8.RuneSelf; c++ {
			t[e][c] = c != '"' && c != '\\' && (Escaping(e) != JSON || (c != '<' && c != '>' && c != '&'))
		}
	}
	return t
}()

// String appends s as a quoted JSON string with escaping e.
func String(b []byte, s string, e Escaping) []byte {
	b = append(b, '"')
	safe := &plain[e]
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b' && e != Slog:
				b = append(b, '\\', 'b')
			case c == '\f' && e != Slog:
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Float appends f as encoding/json marshals a finite float64 (the ES6
// number format); log/slog's JSON handler marshals floats the same way.
func Float(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Array appends a JSON array of the n elements elem appends, elem(b, i)
// appending the i-th.
func Array(b []byte, n int, elem func(b []byte, i int) []byte) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i)
	}
	return append(b, ']')
}
