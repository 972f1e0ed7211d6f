package audit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/jsonappend"
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
	b = jsonappend.String(b, r.Tool, jsonappend.Slog)
	b = append(b, `,"sessionId":`...)
	b = jsonappend.String(b, r.SessionID, jsonappend.Slog)
	b = append(b, `,"channelId":`...)
	b = jsonappend.String(b, r.ChannelID, jsonappend.Slog)
	b = append(b, `,"senderId":`...)
	b = jsonappend.String(b, r.SenderID, jsonappend.Slog)
	b = append(b, `,"correlationId":`...)
	b = jsonappend.String(b, r.CorrelationID, jsonappend.Slog)
	b = append(b, `,"streaming":`...)
	b = strconv.AppendBool(b, r.Streaming)
	b = append(b, `,"outcome":`...)
	b = jsonappend.String(b, string(r.Outcome), jsonappend.Slog)
	if r.Denial != nil {
		b = append(b, `,"denial":`...)
		b = appendDecision(b, r.Denial)
	}
	if len(r.Warnings) > 0 {
		b = jsonappend.Array(append(b, `,"warnings":`...), len(r.Warnings), func(b []byte, i int) []byte {
			return appendDecision(b, &r.Warnings[i])
		})
	}
	b = append(b, `,"durationMs":`...)
	b = jsonappend.Float(b, float64(r.Duration)/float64(time.Millisecond))
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
	return jsonappend.String(append(b, key...), s, jsonappend.JSONNoHTML)
}
