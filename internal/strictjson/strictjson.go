// Package strictjson is the one JSON parser of tool-call arguments and of
// the requests that carry them: the gateway's HTTP bodies, MCP messages and
// Claude Code hook events are all read through it, so a hook and a tool can
// never see different arguments. It reads JSON with
// github.com/go-json-experiment/json's jsontext under these rules:
//
//   - exactly one JSON value, followed by nothing but JSON white space;
//   - valid UTF-8 throughout, and no escaped lone surrogate ("\ud800");
//   - no key twice in any object at any depth (compared after unescaping);
//   - at most 10,000 levels of nesting;
//   - in the objects of a protocol (Options), known keys spelled exactly:
//     a key equal to one of them ignoring case is rejected, because
//     encoding/json, which the MCP SDK decodes with, matches keys that way.
//
// Each rejection is an error wrapping ErrStrict whose message names the
// problem and its byte offset but never quotes the input beyond a single
// character or escape sequence, so it is safe to audit and log.
//
// # Canonical form
//
// The canonical value of a JSON value is what Value returns:
// map[string]any for an object, []any for an array, string, json.Number
// (the number's text exactly as written), bool, and nil for null. Its
// canonical text is Marshal's: encoding/json's encoding of that value
// (keys sorted, numbers verbatim), which Parse reads back to the same value.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrStrict is wrapped by every rejection.
var ErrStrict = errors.New("JSON rejected")

// ErrSyntax is wrapped by the rejections of text that is not JSON at all
// (as opposed to JSON that breaks a strict rule). ErrTrailingData is one.
var ErrSyntax = errors.New("not JSON")

// ErrTrailingData is wrapped by the rejection of data after the value.
var ErrTrailingData = errors.New("unexpected data after the JSON value")

// MaxDepth is the deepest nesting accepted (jsontext's limit).
const MaxDepth = 10000

// Error is a rejection: why, and where in the input.
type Error struct {
	// Offset is the byte offset in the input at or after which the problem
	// is; it is negative where it says nothing (a top-level value of
	// another kind).
	Offset int64
	// Reason says what is wrong, without quoting the input.
	Reason string
	// Err, when set, is a sentinel the rejection wraps too (ErrTrailingData).
	Err error
	// Syntax is true when the text is not JSON at all (ErrSyntax).
	Syntax bool
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return e.Reason
	}
	return fmt.Sprintf("%s at byte offset %d", e.Reason, e.Offset)
}

// Is reports whether target is ErrStrict, e.Err, or ErrSyntax for a
// syntax error.
func (e *Error) Is(target error) bool {
	return target == ErrStrict || (e.Err != nil && target == e.Err) || (e.Syntax && target == ErrSyntax)
}

// Options say which keys the objects of a protocol may have.
type Options struct {
	// Keys are the known keys, spelled exactly.
	Keys []string
	// AllowUnknown admits keys that are not in Keys, unless they equal one
	// of Keys ignoring case (those are always rejected).
	AllowUnknown bool
}

// Decoder reads one JSON value under the package's rules. Get one from
// Decode; it is valid only within the function Decode calls.
type Decoder struct {
	dec   jsontext.Decoder
	loose bool // Raw and Skip admit repeated keys (DecodeLooseRaw)
	in    bytes.Buffer
	store []byte // the input, when it is a string
	data  []byte // the input
}

var decoders = sync.Pool{New: func() any { return new(Decoder) }}

// maxPooledStore is the largest copied input a pooled Decoder keeps.
const maxPooledStore = 64 << 10

// Decode reads data, which must hold exactly one JSON value: read reads
// that value through d (with d's methods, which return *Error rejections),
// then Decode checks that only white space follows. Its error is read's or
// an *Error.
func Decode(data []byte, read func(d *Decoder) error) error {
	d := decoders.Get().(*Decoder)
	err := d.run(data, false, read)
	d.release()
	return err
}

// DecodeLooseRaw is Decode, except that the values Raw returns may repeat
// a key: their reader (ParseArgs) rejects that, so that the gateway can
// deny and audit such arguments rather than refuse the request. Every
// other rule holds for them, and Object, Value and ArgsObject reject
// repeated keys as always.
func DecodeLooseRaw(data []byte, read func(d *Decoder) error) error {
	d := decoders.Get().(*Decoder)
	err := d.run(data, true, read)
	d.release()
	return err
}

// DecodeString is Decode for a string.
func DecodeString(text string, read func(d *Decoder) error) error {
	d := decoders.Get().(*Decoder)
	d.store = append(d.store[:0], text...)
	err := d.run(d.store, false, read)
	d.release()
	return err
}

// release drops d's references to the input and pools it.
func (d *Decoder) release() {
	d.in, d.data = bytes.Buffer{}, nil
	d.dec.Reset(&d.in)
	if cap(d.store) <= maxPooledStore {
		decoders.Put(d)
	}
}

func (d *Decoder) run(data []byte, loose bool, read func(d *Decoder) error) error {
	if !utf8.Valid(data) {
		return &Error{Offset: int64(invalidUTF8At(data)), Reason: "the text is not valid UTF-8"}
	}
	d.data = data
	d.in = *bytes.NewBuffer(data)
	d.loose = loose
	d.dec.Reset(&d.in, jsontext.AllowDuplicateNames(loose))
	kind := d.dec.PeekKind()
	if err := read(d); err != nil {
		return err
	}
	end := d.dec.InputOffset()
	if _, err := d.dec.ReadToken(); err != io.EOF { //nolint:errorlint // jsontext returns io.EOF itself
		what := "value"
		switch kind {
		case '{':
			what = "object"
		case '[':
			what = "array"
		}
		return &Error{Offset: end, Reason: "unexpected data after the " + what, Err: ErrTrailingData, Syntax: true}
	}
	return nil
}

// invalidUTF8At returns the offset of the first byte of b that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// fail turns an error of jsontext into an *Error.
func (d *Decoder) fail(err error) error {
	var serr *jsontext.SyntacticError
	switch {
	case err == nil:
		return nil
	case err == io.EOF: //nolint:errorlint // jsontext returns io.EOF itself
		return &Error{Offset: int64(len(d.data)), Reason: "unexpected EOF", Syntax: true}
	case !errors.As(err, &serr):
		return &Error{Offset: d.dec.InputOffset(), Reason: err.Error()}
	}
	e := &Error{Offset: serr.ByteOffset, Syntax: true}
	switch {
	case errors.Is(serr.Err, jsontext.ErrDuplicateName):
		return duplicate(serr.ByteOffset)
	case errors.Is(serr.Err, io.ErrUnexpectedEOF):
		e.Reason, e.Offset = "unexpected EOF", int64(len(d.data))
	case strings.HasPrefix(serr.Err.Error(), "invalid surrogate pair"):
		e.Reason, e.Syntax = "an escaped lone surrogate in a string", false
	case strings.HasPrefix(serr.Err.Error(), "invalid escape sequence"):
		e.Reason = "an invalid escape sequence in a string"
		if surrogateAt(d.data, serr.ByteOffset) {
			e.Reason, e.Syntax = "an escaped lone surrogate in a string", false
		}
	case strings.Contains(serr.Err.Error(), "max depth"):
		e.Reason = fmt.Sprintf("nested more than %d levels deep", MaxDepth)
	default:
		e.Reason = serr.Err.Error()
	}
	return e
}

// duplicate rejects a repeated key at offset at.
func duplicate(at int64) error {
	return &Error{Offset: at, Reason: "a key appears more than once in an object (duplicate object key)"}
}

// surrogateAt reports whether the escape at offset off of data is the
// \u escape of a UTF-16 surrogate.
func surrogateAt(data []byte, off int64) bool {
	if off < 0 || off+6 > int64(len(data)) {
		return false
	}
	e := data[off : off+6]
	return e[0] == '\\' && e[1] == 'u' && (e[2] == 'd' || e[2] == 'D') && strings.IndexByte("89abcdefABCDEF", e[3]) >= 0
}

// kindName names the kind of a JSON value, for messages.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "nothing"
}

// Kind returns the kind of the next value ('{', '[', '"', '0', 't', 'f',
// 'n'), or 0 when there is none or it is invalid (the next read then
// returns the error).
func (d *Decoder) Kind() jsontext.Kind { return d.dec.PeekKind() }

// want rejects a value of kind k where want is expected.
func (d *Decoder) want(k jsontext.Kind, want string) error {
	if k == 0 {
		_, err := d.dec.ReadToken()
		return d.fail(err)
	}
	at := d.dec.InputOffset()
	if d.dec.StackDepth() == 0 {
		at = -1
	}
	return &Error{Offset: at, Reason: "want " + want + ", got " + kindName(k)}
}

// Object reads an object, calling member with each key; member must read
// the key's value (with one of d's methods). With opt, keys must keep its
// rules (see Options); nil admits every key.
func (d *Decoder) Object(opt *Options, member func(key string) error) error {
	if k := d.dec.PeekKind(); k != '{' {
		return d.want(k, "one JSON object")
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return d.fail(err)
	}
	var seen []string // the keys so far, when the decoder does not check them
	for d.dec.PeekKind() != '}' {
		at := d.dec.InputOffset()
		name, err := d.dec.ReadValue()
		if err != nil {
			return d.fail(err)
		}
		key, err := keyText(name, opt)
		if err != nil {
			return d.fail(err)
		}
		if d.loose {
			if slices.Contains(seen, key) {
				return duplicate(at)
			}
			seen = append(seen, key)
		}
		if opt != nil {
			if err := opt.check(key, at); err != nil {
				return err
			}
		}
		if err := member(key); err != nil {
			return err
		}
		if _, n := d.dec.StackIndex(d.dec.StackDepth()); n%2 != 0 {
			panic("strictjson: a member function did not read its value")
		}
	}
	_, err := d.dec.ReadToken()
	return d.fail(err)
}

// keyText returns the text of an object name as the decoder read it (a
// quoted JSON string). A name without escapes that equals one of opt's Keys
// is that key's string, so that known keys cost no allocation.
func keyText(name jsontext.Value, opt *Options) (string, error) {
	inner := name[1 : len(name)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		b, err := jsontext.AppendUnquote(nil, name)
		return string(b), err
	}
	if opt != nil {
		for _, k := range opt.Keys {
			if string(inner) == k {
				return k, nil
			}
		}
	}
	return string(inner), nil
}

func (opt *Options) check(key string, at int64) error {
	if slices.Contains(opt.Keys, key) {
		return nil
	}
	for _, k := range opt.Keys {
		if strings.EqualFold(key, k) {
			return &Error{Offset: at, Reason: fmt.Sprintf("the key %q is not spelled %q (keys match exactly)", key, k)}
		}
	}
	if !opt.AllowUnknown {
		return &Error{Offset: at, Reason: fmt.Sprintf("unknown field %q", key)}
	}
	return nil
}

// Array reads an array, calling elem for each element; elem must read it.
func (d *Decoder) Array(elem func() error) error {
	if k := d.dec.PeekKind(); k != '[' {
		return d.want(k, "a JSON array")
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return d.fail(err)
	}
	for d.dec.PeekKind() != ']' {
		if d.dec.PeekKind() == 0 {
			_, err := d.dec.ReadToken()
			return d.fail(err)
		}
		if err := elem(); err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return d.fail(err)
}

// String reads a string; null reads as "" (as encoding/json leaves a
// string field alone for null).
func (d *Decoder) String() (string, error) {
	switch k := d.dec.PeekKind(); k {
	case '"', 'n':
		tok, err := d.dec.ReadToken()
		if err != nil || k == 'n' {
			return "", d.fail(err)
		}
		return tok.String(), nil
	default:
		return "", d.want(k, "a string")
	}
}

// Bool reads true or false; null reads as false.
func (d *Decoder) Bool() (bool, error) {
	switch k := d.dec.PeekKind(); k {
	case 't', 'f', 'n':
		tok, err := d.dec.ReadToken()
		if err != nil {
			return false, d.fail(err)
		}
		return k != 'n' && tok.Bool(), nil
	default:
		return false, d.want(k, "a boolean")
	}
}

// Raw reads a value and returns its text as written (see DecodeLooseRaw).
// The bytes are the input's own: they are valid only until Decode returns.
func (d *Decoder) Raw() ([]byte, error) {
	v, err := d.dec.ReadValue()
	return v, d.fail(err)
}

// Skip reads a value and discards it.
func (d *Decoder) Skip() error { return d.fail(d.dec.SkipValue()) }

// Value reads a value as its canonical value (see the package doc).
func (d *Decoder) Value() (any, error) {
	switch d.dec.PeekKind() {
	case '{':
		return d.object()
	case '[':
		return d.array()
	}
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, d.fail(err)
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	default: // null (ReadToken returns a delimiter only where PeekKind saw one)
		return nil, nil
	}
}

// ArgsObject reads an object as its canonical value.
func (d *Decoder) ArgsObject() (map[string]any, error) {
	if k := d.dec.PeekKind(); k != '{' {
		return nil, d.want(k, "one JSON object")
	}
	return d.object()
}

// object reads the object at the next '{'.
func (d *Decoder) object() (map[string]any, error) {
	if d.dec.StackDepth() >= MaxDepth {
		return nil, &Error{Offset: d.dec.InputOffset(), Reason: fmt.Sprintf("nested more than %d levels deep", MaxDepth)}
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, d.fail(err)
	}
	m := make(map[string]any)
	for d.dec.PeekKind() != '}' {
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, d.fail(err)
		}
		key := tok.String()
		if _, dup := m[key]; dup { // only when the decoder does not check them
			return nil, duplicate(d.dec.InputOffset())
		}
		v, err := d.Value()
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, d.fail(err)
	}
	return m, nil
}

// array reads the array at the next '['.
func (d *Decoder) array() ([]any, error) {
	if d.dec.StackDepth() >= MaxDepth {
		return nil, &Error{Offset: d.dec.InputOffset(), Reason: fmt.Sprintf("nested more than %d levels deep", MaxDepth)}
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, d.fail(err)
	}
	a := []any{}
	for d.dec.PeekKind() != ']' {
		if d.dec.PeekKind() == 0 {
			_, err := d.dec.ReadToken()
			return nil, d.fail(err)
		}
		v, err := d.Value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, d.fail(err)
	}
	return a, nil
}

// Parse reads text, one JSON object, as its canonical value.
func Parse(text string) (map[string]any, error) {
	var m map[string]any
	d := decoders.Get().(*Decoder)
	d.store = append(d.store[:0], text...)
	// Every object is read into a map, which finds a repeated key itself:
	// the decoder need not track names as well.
	err := d.run(d.store, true, func(d *Decoder) error {
		var err error
		m, err = d.ArgsObject()
		return err
	})
	d.release()
	return m, err
}

// Check reports whether data is one JSON value that keeps the package's
// rules (nil), or why not.
func Check(data []byte) error { return Decode(data, (*Decoder).Skip) }

// Marshal returns the canonical text of v, a canonical value.
func Marshal(v any) ([]byte, error) { return json.Marshal(v) }
