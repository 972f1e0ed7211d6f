package audit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// JSONSink writes each record as one JSON object per line, byte for byte
// what a SlogSink over slog.NewJSONHandler(w, nil) writes (keys time, level,
// msg, then those of SlogSink), but encoded directly into a pooled buffer
// instead of through log/slog and reflection. Each record is written with
// one Write call, under a mutex, before Emit returns.
type JSONSink struct {
	mu sync.Mutex
	w  io.Writer
}

// NewJSONSink returns a sink writing one JSON object per line to w; the
// gateway uses os.Stdout.
func NewJSONSink(w io.Writer) *JSONSink { return &JSONSink{w: w} }

// maxPooledRecord is the largest buffer kept for reuse; records with long
// reasons are rare.
const maxPooledRecord = 16 << 10

var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Emit writes r, returning the writer's error.
func (s *JSONSink) Emit(ctx context.Context, r Record) error {
	bp := recordBufs.Get().(*[]byte)
	b, ok := appendRecord((*bp)[:0], &r)
	if !ok {
		// A year slog reports as an error: let slog write exactly that.
		var buf bytes.Buffer
		if err := NewSlogSink(slog.NewJSONHandler(&buf, nil)).Emit(ctx, r); err != nil {
			return err
		}
		b = append(b[:0], buf.Bytes()...)
	}
	s.mu.Lock()
	_, err := s.w.Write(b)
	s.mu.Unlock()
	if cap(b) <= maxPooledRecord {
		*bp = b
		recordBufs.Put(bp)
	}
	if err != nil {
		return fmt.Errorf("writing audit record: %w", err)
	}
	return nil
}

// appendRecord appends r as slog.JSONHandler formats it with SlogSink's
// attributes. It reports false, for the caller to use slog itself, when
// r.Time has a year outside [0, 9999] (slog writes an error value then).
func appendRecord(b []byte, r *Record) ([]byte, bool) {
	b = append(b, '{')
	if !r.Time.IsZero() {
		if y := r.Time.Year(); y < 0 || y >= 10000 {
			return b, false
		}
		b = append(b, `"time":"`...)
		b = r.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":"INFO","msg":"`+Message+`","tool":`...)
	b = appendString(b, r.Tool, false)
	b = append(b, `,"sessionId":`...)
	b = appendString(b, r.SessionID, false)
	b = append(b, `,"channelId":`...)
	b = appendString(b, r.ChannelID, false)
	b = append(b, `,"senderId":`...)
	b = appendString(b, r.SenderID, false)
	b = append(b, `,"correlationId":`...)
	b = appendString(b, r.CorrelationID, false)
	b = append(b, `,"streaming":`...)
	b = strconv.AppendBool(b, r.Streaming)
	b = append(b, `,"outcome":`...)
	b = appendString(b, string(r.Outcome), false)
	if r.Denial != nil {
		b = append(b, `,"denial":`...)
		b = appendDecision(b, r.Denial)
	}
	if len(r.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i := range r.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDecision(b, &r.Warnings[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"durationMs":`...)
	b = appendFloat(b, float64(r.Duration)/float64(time.Millisecond))
	b = append(b, `,"argumentLength":`...)
	b = strconv.AppendInt(b, int64(r.ArgumentLength), 10)
	b = append(b, `,"resultLength":`...)
	b = strconv.AppendInt(b, int64(r.ResultLength), 10)
	return append(b, "}\n"...), true
}

// appendDecision appends d as encoding/json marshals a hooks.Decision (its
// field tags: omitempty, and omitzero for the policy).
func appendDecision(b []byte, d *hooks.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = appendOptional(b, `,"hook":`, d.Hook)
	if d.Policy != (hooks.PolicyRef{}) {
		p := &d.Policy
		b = append(b, `,"policy":{`...)
		n := len(b)
		b = appendOptional(b, `,"kind":`, p.Kind)
		b = appendOptional(b, `,"namespace":`, p.Namespace)
		b = appendOptional(b, `,"name":`, p.Name)
		b = appendOptional(b, `,"uid":`, p.UID)
		if p.Generation != 0 {
			b = append(b, `,"generation":`...)
			b = strconv.AppendInt(b, p.Generation, 10)
		}
		if len(b) > n { // drop the first member's comma
			copy(b[n:], b[n+1:])
			b = b[:len(b)-1]
		}
		b = append(b, '}')
	}
	b = appendOptional(b, `,"rule":`, d.Rule)
	b = appendOptional(b, `,"reason":`, d.Reason)
	b = appendOptional(b, `,"enforcementAction":`, string(d.Action))
	return append(b, '}')
}

// appendOptional appends key and s as encoding/json does for an omitempty string field.
func appendOptional(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s, true)
}

// appendFloat appends f as encoding/json marshals a float64 (the ES6 number
// format). f is finite: it comes from a duration.
func appendFloat(b []byte, f float64) []byte {
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

const hexDigits = "0123456789abcdef"

// appendString appends s as a quoted JSON string the way log/slog's JSON
// handler (shortEscapes false: \b and \f as \u0008 and \u000c) or
// encoding/json without HTML escaping (shortEscapes true) does: quotes,
// backslashes and control characters escaped, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped, everything else as is.
func appendString(b []byte, s string, shortEscapes bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
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
			case c == '\b' && shortEscapes:
				b = append(b, '\\', 'b')
			case c == '\f' && shortEscapes:
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
