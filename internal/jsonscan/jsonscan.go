// Package jsonscan holds the byte-level steps over JSON text shared by the
// gateway's request decoder and the hooks' argument parsers: each looks at
// the text as written and decodes nothing, so a caller that accepts what
// they find must still prove the text valid JSON (or leave it to
// encoding/json).
package jsonscan

import "unicode/utf8"

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, tab, newline, carriage return).
func SkipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// IsBlank reports whether s is empty or holds only JSON whitespace.
func IsBlank(s string) bool { return SkipSpace(s, 0) == len(s) }

// PlainString returns the content of the JSON string starting at s[i] (a
// quote) and the index after it, if the string has no escapes, no control
// characters and is valid UTF-8, so that its content is its decoded value.
// ok is false for anything else, including a string that does not end.
func PlainString(s string, i int) (content string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	ascii := true
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v := s[i+1 : j]
			if !ascii && !utf8.ValidString(v) {
				return "", i, false
			}
			return v, j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", i, false
}

// StringEnd returns the index of the quote closing the JSON string that
// starts at s[i] (a quote), stepping over backslash escapes; it returns
// len(s) or more when the string does not end.
func StringEnd(s string, i int) int {
	for i++; i < len(s) && s[i] != '"'; i++ {
		if s[i] == '\\' {
			i++
		}
	}
	return i
}
