package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/jsonscan"
)

// ErrInvalidArguments is wrapped by every error ParseArgs returns, so callers
// can tell malformed arguments apart with errors.Is.
var ErrInvalidArguments = errors.New("invalid tool arguments")

// maxArgsDepth bounds how deeply argument values may nest; it matches the
// limit encoding/json applies when decoding.
const maxArgsDepth = 10000

// NewCall returns a Call for tool with its arguments parsed once by ParseArgs.
// Args is never nil; when the arguments are not one JSON object ArgsErr says
// why, Args is empty and the executor denies the call. The caller fills in the
// session, channel, sender, correlation id and streaming flag.
func NewCall(tool, argsJSON string) *Call {
	args, err := ParseArgs(argsJSON)
	return &Call{Tool: tool, ArgsJSON: argsJSON, Args: args, ArgsErr: err}
}

// ParseArgs parses a tool call's arguments, which must be exactly one JSON
// object. Text that is empty or only JSON whitespace means no arguments ({}).
// Numbers are kept exact as json.Number. It always returns a non-nil map (an
// empty one on error) and rejects, with an error wrapping ErrInvalidArguments:
//   - any top-level value that is not an object (array, string, number, bool, null);
//   - invalid JSON, including truncated input;
//   - anything but whitespace after the object;
//   - text that is not valid UTF-8 (encoding/json would silently replace it,
//     so hooks reading the raw text and the tool would see different bytes);
//   - duplicate keys in any object at any depth (parsers disagree on which
//     value wins, which would let a hook and a tool see different arguments);
//   - nesting deeper than 10,000 levels.
//
// Error messages never quote the arguments beyond the single offending
// character encoding/json reports, so they are safe to audit and log.
func ParseArgs(argsJSON string) (map[string]any, error) {
	if jsonscan.IsBlank(argsJSON) {
		return map[string]any{}, nil
	}
	args, err := parseArgs(argsJSON)
	if err != nil {
		return map[string]any{}, err
	}
	return args, nil
}

func parseArgs(s string) (map[string]any, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalidArguments)
	}
	if args, ok := parseArgsFlat(s); ok {
		return args, nil
	}
	if args, ok := parseArgsFast(s); ok {
		return args, nil
	}
	return parseArgsStrict(s)
}

// parseArgsFlat parses the commonest arguments without encoding/json: one
// object whose values are all strings without escapes or control
// characters, numbers, true, false or null, with no key twice, and nothing
// but whitespace after it. Its strings are substrings of s, which must be
// valid UTF-8. ok is false for anything else, which the other parsers
// decide; what it accepts it returns exactly as parseArgsStrict would.
func parseArgsFlat(s string) (args map[string]any, ok bool) {
	i := jsonscan.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	args = make(map[string]any, 4)
	i = jsonscan.SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return args, jsonscan.IsBlank(s[i+1:])
	}
	for {
		key, next, ok := jsonscan.PlainString(s, i)
		if !ok {
			return nil, false
		}
		if _, dup := args[key]; dup {
			return nil, false
		}
		i = jsonscan.SkipSpace(s, next)
		if i >= len(s) || s[i] != ':' {
			return nil, false
		}
		var v any
		if v, i, ok = scalar(s, jsonscan.SkipSpace(s, i+1)); !ok {
			return nil, false
		}
		args[key] = v
		i = jsonscan.SkipSpace(s, i)
		switch {
		case i < len(s) && s[i] == ',':
			i = jsonscan.SkipSpace(s, i+1)
		case i < len(s) && s[i] == '}':
			return args, jsonscan.IsBlank(s[i+1:])
		default:
			return nil, false
		}
	}
}

// scalar parses the JSON string (as jsonscan.PlainString), number, true, false
// or null at s[i], returning it as parseArgsStrict would and the index after it.
func scalar(s string, i int) (any, int, bool) {
	if i >= len(s) {
		return nil, i, false
	}
	switch c := s[i]; {
	case c == '"':
		return jsonscan.PlainString(s, i)
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := numberEnd(s, i)
		return json.Number(s[i:end]), end, ok
	case strings.HasPrefix(s[i:], "true"):
		return true, i + 4, true
	case strings.HasPrefix(s[i:], "false"):
		return false, i + 5, true
	case strings.HasPrefix(s[i:], "null"):
		return nil, i + 4, true
	}
	return nil, i, false
}

// numberEnd returns the index after the JSON number at s[i] (RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or false when there is none.
func numberEnd(s string, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

// fastArgsDepth is the deepest nesting parseArgsFast accepts; deeper input
// (legal up to maxArgsDepth) goes to the token parser.
const fastArgsDepth = 64

// parseArgsFast decodes s with one json.Decoder.Decode, which is several
// times cheaper than the token-by-token parser, and reports whether the
// result is certainly what parseArgsStrict would return. It is for valid
// input only: whenever s might be rejected (not one object, data after it,
// nested deeper than fastArgsDepth, a duplicate key) it returns false and
// the caller runs parseArgsStrict, which gives the reasoned error. s must be
// valid UTF-8.
//
// Duplicate keys: Decode keeps the last of several equal keys, so the
// decoded maps then hold fewer members than the text has name separators
// (':' outside strings, one per object member in valid JSON). Equal counts
// mean no key was dropped anywhere.
func parseArgsFast(s string) (map[string]any, bool) {
	members, depth, ok := scanMembers(s)
	if !ok || depth > fastArgsDepth {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	m, isObject := v.(map[string]any)
	if !isObject || !jsonscan.IsBlank(s[dec.InputOffset():]) || countMembers(m) != members {
		return nil, false
	}
	return m, true
}

// scanMembers counts the name separators (':' outside strings) of s and its
// deepest nesting of '{' and '['. It does not validate s; ok is false when a
// string is not closed.
func scanMembers(s string) (members, maxDepth int, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			if i = jsonscan.StringEnd(s, i); i >= len(s) {
				return 0, 0, false
			}
		case ':':
			members++
		case '{', '[':
			depth++
			maxDepth = max(maxDepth, depth)
		case '}', ']':
			depth--
		}
	}
	return members, maxDepth, true
}

// countMembers returns how many members the objects in v hold in total.
func countMembers(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := len(v)
		for _, e := range v {
			n += countMembers(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += countMembers(e)
		}
		return n
	}
	return 0
}

// parseArgsStrict parses s token by token, rejecting every input ParseArgs
// documents as invalid with the reason.
func parseArgsStrict(s string) (map[string]any, error) {
	p := argsParser{dec: json.NewDecoder(strings.NewReader(s))}
	p.dec.UseNumber()
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: want one JSON object, got %s", ErrInvalidArguments, jsonKind(tok))
	}
	args, err := p.object(1)
	if err != nil {
		return nil, err
	}
	end := p.dec.InputOffset()
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: unexpected data after the object at byte offset %d", ErrInvalidArguments, end)
	}
	return args, nil
}

// argsParser builds the argument value from a token stream so that duplicate
// keys, which json.Decoder.Decode silently accepts, can be rejected.
type argsParser struct {
	dec *json.Decoder
}

func (p *argsParser) token() (json.Token, error) {
	tok, err := p.dec.Token()
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	return tok, nil
}

// value converts tok, the first token of a value, into the value.
func (p *argsParser) value(tok json.Token, depth int) (any, error) {
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	if depth >= maxArgsDepth {
		return nil, fmt.Errorf("%w: nested more than %d levels deep", ErrInvalidArguments, maxArgsDepth)
	}
	switch d {
	case '{':
		return p.object(depth + 1)
	case '[':
		return p.array(depth + 1)
	default:
		// json.Decoder.Token reports misplaced closing delimiters itself.
		return nil, fmt.Errorf("%w: unexpected %q", ErrInvalidArguments, rune(d))
	}
}

// object reads the members of an object whose '{' has been consumed.
func (p *argsParser) object(depth int) (map[string]any, error) {
	m := map[string]any{}
	for {
		offset := p.dec.InputOffset()
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return m, nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: object key at byte offset %d is not a string", ErrInvalidArguments, offset)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("%w: duplicate object key at byte offset %d", ErrInvalidArguments, offset)
		}
		tok, err = p.token()
		if err != nil {
			return nil, err
		}
		v, err := p.value(tok, depth)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
}

// array reads the elements of an array whose '[' has been consumed.
func (p *argsParser) array(depth int) ([]any, error) {
	a := []any{}
	for {
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			return a, nil
		}
		v, err := p.value(tok, depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
}

// jsonKind names the kind of value tok starts, for error messages.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return fmt.Sprintf("%q", rune(t))
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", tok)
	}
}
