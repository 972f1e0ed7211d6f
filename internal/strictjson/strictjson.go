// Package strictjson checks the top level of a JSON object the way a
// security check needs it read: keys matched exactly (encoding/json matches
// them case-insensitively, so a "TOOL" key would fill the tool field), each
// at most once (encoding/json keeps the last), no invalid UTF-8 anywhere
// (encoding/json turns it into U+FFFD), and no top-level string holding an
// escaped lone surrogate (which encoding/json also turns into U+FFFD).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrStrict wraps every rejection.
var ErrStrict = errors.New("JSON object rejected")

// Options say which keys an object may have.
type Options struct {
	// Keys are the known keys, spelled exactly.
	Keys []string
	// AllowUnknown admits keys that are not in Keys, unless they equal one
	// of Keys ignoring case (those are always rejected).
	AllowUnknown bool
}

// CheckObject checks that data is one JSON object (followed by nothing but
// white space) that keeps the rules in the package doc. It returns the raw
// value of each key. Every error wraps ErrStrict.
func CheckObject(data []byte, opt Options) (map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", ErrStrict)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStrict, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrStrict)
	}
	out := make(map[string]json.RawMessage, len(opt.Keys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStrict, err)
		}
		key, _ := tok.(string)
		if err := checkKey(key, opt); err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%w: the key %q appears more than once", ErrStrict, key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: the value of %q: %w", ErrStrict, key, err)
		}
		if len(raw) > 0 && raw[0] == '"' && LoneSurrogate(raw) {
			return nil, fmt.Errorf("%w: the value of %q has an escaped lone surrogate", ErrStrict, key)
		}
		out[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%w: %w", ErrStrict, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: unexpected data after the JSON object", ErrStrict)
	}
	return out, nil
}

func checkKey(key string, opt Options) error {
	if slices.Contains(opt.Keys, key) {
		return nil
	}
	for _, k := range opt.Keys {
		if strings.EqualFold(key, k) {
			return fmt.Errorf("%w: the key %q is not spelled %q (keys match exactly)", ErrStrict, key, k)
		}
	}
	if !opt.AllowUnknown {
		return fmt.Errorf("%w: unknown field %q", ErrStrict, key)
	}
	return nil
}

// LoneSurrogate reports whether the JSON string literal s (quotes
// included) has a \uXXXX escape of a UTF-16 surrogate that is not a valid
// high-low pair.
func LoneSurrogate(s []byte) bool {
	for i := 0; i+5 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(s[i+2 : i+6])
		if !ok {
			return true
		}
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return true // a low surrogate without a high one
		case r >= 0xd800 && r <= 0xdbff:
			if i+11 >= len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
				return true
			}
			lo, ok := hex4(s[i+8 : i+12])
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
