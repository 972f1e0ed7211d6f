// Package argmask prepares a tool call's arguments for the decision log:
// their canonical JSON text (keys sorted, numbers as written) with the
// values a team must not keep masked, bounded in size. Values under
// configured keys are replaced whole; secrets the result scanner's
// detectors find inside any other string are replaced in place (the rest
// of a path or command stays, so it can still be evaluated). Every value
// changed is named by its JSON Pointer, so a reader (the replay command)
// knows which parts of a call it did not see.
package argmask

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// MaskedMarker replaces a value under a masked key.
const MaskedMarker = "[MASKED]"

// DefaultMaxBytes bounds a record's arguments text when Config.MaxBytes is zero.
const DefaultMaxBytes = 16 << 10

// DefaultKeys are keys whose values are masked whatever they hold.
var DefaultKeys = []string{"password", "passwd", wordSecret, wordToken, "apiKey", "api_key", "authorization", "credentials"}

// Config says what a Masker masks.
type Config struct {
	// Keys are object keys (any depth, compared ignoring case) whose values
	// are replaced by MaskedMarker. Nil means DefaultKeys; empty (non-nil)
	// means none.
	Keys []string
	// Detectors are the result scanner's detector sets or rules run over
	// every other string; nil means the "secrets" set. Empty (non-nil)
	// means none.
	Detectors []string
	// MaxBytes bounds the arguments text; longer strings are shortened,
	// longest first, until it fits, and when it cannot fit the arguments are
	// left out. Zero means DefaultMaxBytes.
	MaxBytes int
}

// Masker masks arguments; it is immutable and safe for concurrent use.
type Masker struct {
	keys     map[string]bool
	scanner  *resultscan.Scanner // nil without detectors
	maxBytes int
}

// New builds the Masker of cfg; an unknown detector is an error wrapping
// hooks.ErrInvalidSpec.
func New(cfg Config) (*Masker, error) {
	m := &Masker{keys: map[string]bool{}, maxBytes: cfg.MaxBytes}
	if m.maxBytes == 0 {
		m.maxBytes = DefaultMaxBytes
	}
	if m.maxBytes < 64 {
		return nil, fmt.Errorf("decision log size bound %d is under 64 bytes: %w", m.maxBytes, hooks.ErrInvalidSpec)
	}
	keys := cfg.Keys
	if keys == nil {
		keys = DefaultKeys
	}
	for _, k := range keys {
		m.keys[strings.ToLower(k)] = true
	}
	detectors := cfg.Detectors
	if detectors == nil {
		detectors = []string{resultscan.SetSecrets}
	}
	if len(detectors) > 0 {
		s, err := resultscan.New(resultscan.Config{Detectors: detectors, Action: resultscan.Redact})
		if err != nil {
			return nil, fmt.Errorf("decision log detectors: %w", err)
		}
		m.scanner = s
	}
	return m, nil
}

// Reasons arguments are left out (audit.Arguments.Omitted).
const (
	OmittedInvalid  = "invalid"  // the arguments were not one JSON object
	OmittedTooLarge = "tooLarge" // they did not fit the size bound even shortened
	OmittedScan     = "scan"     // the detectors could not finish
)

// Mask returns what the decision log keeps of call's arguments.
func (m *Masker) Mask(ctx context.Context, call *hooks.Call) *audit.Arguments {
	if call.ArgsErr != nil {
		return &audit.Arguments{Omitted: OmittedInvalid}
	}
	out := &audit.Arguments{}
	v, err := m.mask(ctx, call.Args, "", out)
	if err != nil {
		return &audit.Arguments{Omitted: OmittedScan}
	}
	text, err := strictjson.Marshal(v)
	for err == nil && len(text) > m.maxBytes {
		if !shortenLongest(v, "", out) {
			return &audit.Arguments{Omitted: OmittedTooLarge}
		}
		text, err = strictjson.Marshal(v)
	}
	if err != nil {
		return &audit.Arguments{Omitted: OmittedInvalid}
	}
	out.JSON = string(text)
	slices.Sort(out.Masked)
	out.Masked = slices.Compact(out.Masked)
	return out
}

// MaskReason returns text, a decision's reason, with the secrets Mask would
// mask in an argument masked: a reason may quote a command line or a path,
// in Go syntax ("%q"), and such a quoted value is masked as the value
// itself (then quoted again), the rest of the reason as text.
func (m *Masker) MaskReason(ctx context.Context, text string) string {
	if mayHoldSecret(text) {
		var b strings.Builder
		rest := text
		for {
			start, end := goQuoted(rest)
			if start < 0 {
				b.WriteString(maskText(rest))
				break
			}
			b.WriteString(maskText(rest[:start]))
			v, _ := strconv.Unquote(rest[start:end])
			b.WriteString(strconv.Quote(maskValue(v)))
			rest = rest[end:]
		}
		text = b.String()
	}
	v, err := m.scan(ctx, text, false, "", &audit.Arguments{})
	if err != nil {
		return MaskedMarker
	}
	return v.(string)
}

// goQuoted returns the extent of the first double-quoted Go string literal
// in s, or -1.
func goQuoted(s string) (int, int) {
	for start := 0; ; start++ {
		i := strings.IndexByte(s[start:], '"')
		if i < 0 {
			return -1, -1
		}
		start += i
		e := start + 1
		for e < len(s) && s[e] != '"' {
			if s[e] == '\\' {
				e++
			}
			e++
		}
		if e < len(s) {
			if _, err := strconv.Unquote(s[start : e+1]); err == nil {
				return start, e + 1
			}
		}
	}
}

// mask returns a copy of v with its masked values replaced, adding their
// pointers (under ptr) to out.
func (m *Masker) mask(ctx context.Context, v any, ptr string, out *audit.Arguments) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			p := ptr + "/" + escape(k)
			if e != nil && (m.keys[strings.ToLower(k)] || SecretName(k)) {
				c[k] = MaskedMarker
				out.Masked = append(out.Masked, p)
				continue
			}
			var err error
			if c[k], err = m.mask(ctx, e, p, out); err != nil {
				return nil, err
			}
		}
		return c, nil
	case []any:
		named := argv(x) // the words of a command, masked together
		c := make([]any, len(x))
		for i, e := range x {
			p := ptr + "/" + strconv.Itoa(i)
			var err error
			if named != nil {
				c[i], err = m.scan(ctx, named[i], named[i] != e, p, out)
			} else {
				c[i], err = m.mask(ctx, e, p, out)
			}
			if err != nil {
				return nil, err
			}
		}
		return c, nil
	case string:
		nv := maskValue(x)
		return m.scan(ctx, nv, nv != x, ptr, out)
	}
	return v, nil
}

// argv returns the elements of a, when they are two or more strings, with
// the secrets maskArgv finds masked; nil otherwise.
func argv(a []any) []string {
	if len(a) < 2 {
		return nil
	}
	vals := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		vals[i] = s
	}
	if nv := maskArgv(vals, 0); nv != nil {
		vals = nv
	}
	for i, v := range vals {
		vals[i] = maskText(v)
	}
	return vals
}

// scan runs the detectors over s (masked already when changed) and returns
// what the log keeps, adding ptr to out when that is not the argument.
func (m *Masker) scan(ctx context.Context, s string, changed bool, ptr string, out *audit.Arguments) (any, error) {
	if m.scanner != nil {
		o, err := m.scanner.Scan(ctx, s)
		if err != nil {
			return nil, err
		}
		if o.Changed() {
			changed = true
			s = o.Text
			if o.Withheld {
				s = MaskedMarker
			}
		}
	}
	if changed {
		out.Masked = append(out.Masked, ptr)
	}
	return s, nil
}

// shortenLongest replaces the longest string in v (of at least 32 bytes) by
// a marker naming its length and reports whether it found one.
func shortenLongest(v any, ptr string, out *audit.Arguments) bool {
	var (
		best    int
		bestPtr string
		set     func(string)
	)
	var walk func(v any, ptr string, put func(string))
	walk = func(v any, ptr string, put func(string)) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, ptr+"/"+escape(k), func(s string) { x[k] = s })
			}
		case []any:
			for i, e := range x {
				walk(e, ptr+"/"+strconv.Itoa(i), func(s string) { x[i] = s })
			}
		case string:
			if len(x) >= 32 && len(x) > best {
				best, bestPtr, set = len(x), ptr, put
			}
		}
	}
	walk(v, ptr, nil)
	if set == nil {
		return false
	}
	set(fmt.Sprintf("[OMITTED:%d bytes]", best))
	out.Masked = append(out.Masked, bestPtr)
	return true
}

// escape escapes one JSON Pointer reference token (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
