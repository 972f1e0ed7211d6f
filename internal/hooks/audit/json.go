package audit

import (
	"bytes"
	"context"
	"errors"
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
// one Write call, one at a time, before Emit returns.
//
// With a write timeout (WithWriteTimeout), every Write runs in the sink's
// writer goroutine and Emit waits for it at most that long: a writer that
// blocks (a pipe nobody reads, a hung disk) fails the record with
// ErrWriteTimeout instead of holding the call. Once a Write has been
// blocked for longer than the timeout the sink is stalled: every record
// fails at once with ErrWriteTimeout, without waiting, including those
// already waiting for their turn, until the blocked Write returns. That
// Write is the probe of recovery: when the writer moves again the sink
// writes again (Healthy says which state it is in). A record that missed
// its deadline may still be written once the writer moves again.
type JSONSink struct {
	mu      sync.Mutex
	w       io.Writer
	timeout time.Duration
	writes  chan jsonWrite // to the writer goroutine, with a timeout

	stallMu sync.Mutex
	// writing is set while a Write is in progress; writeStart is when it started.
	writing    bool
	writeStart time.Time
	// stall is closed while the Write in progress has run past the
	// timeout, and replaced by an open channel when that Write returns.
	stall   chan struct{}
	stalled bool
}

// jsonWrite is one record for the writer goroutine.
type jsonWrite struct {
	b    []byte
	done chan error
}

// ErrWriteTimeout is the error of a record whose Write did not return within
// the sink's write timeout, and of every record while the sink is stalled.
var ErrWriteTimeout = errors.New("audit write timed out")

// JSONOption configures a JSONSink.
type JSONOption func(*JSONSink)

// WithWriteTimeout bounds how long Emit waits for the writer (0: no bound).
func WithWriteTimeout(d time.Duration) JSONOption {
	return func(s *JSONSink) { s.timeout = d }
}

// NewJSONSink returns a sink writing one JSON object per line to w; the
// gateway uses os.Stdout or a rotating file.
func NewJSONSink(w io.Writer, opts ...JSONOption) *JSONSink {
	s := &JSONSink{w: w, stall: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	if s.timeout > 0 {
		s.writes = make(chan jsonWrite)
		go s.writer()
	}
	return s
}

// writer writes the records handed to it, one at a time; it lives as long
// as the process.
func (s *JSONSink) writer() {
	// One watch for every Write: a firing left over from an earlier Write
	// finds the current one younger than the timeout and does nothing.
	watch := time.AfterFunc(time.Hour, s.markStalled)
	watch.Stop()
	for w := range s.writes {
		s.stallMu.Lock()
		s.writing, s.writeStart = true, time.Now()
		s.stallMu.Unlock()
		watch.Reset(s.timeout)
		_, err := s.w.Write(w.b)
		watch.Stop()
		s.stallMu.Lock()
		s.writing = false
		if s.stalled { // the writer moves again
			s.stall, s.stalled = make(chan struct{}), false
		}
		s.stallMu.Unlock()
		w.done <- err
	}
}

// markStalled marks the sink stalled if the Write in progress has run for
// the timeout.
func (s *JSONSink) markStalled() {
	s.stallMu.Lock()
	defer s.stallMu.Unlock()
	if s.writing && !s.stalled && time.Since(s.writeStart) >= s.timeout {
		s.stalled = true
		close(s.stall)
	}
}

// stallState returns the channel closed while the sink is stalled, and the
// error of a record refused for it when it is stalled now.
func (s *JSONSink) stallState() (<-chan struct{}, error) {
	s.stallMu.Lock()
	defer s.stallMu.Unlock()
	if s.stalled {
		return s.stall, s.stalledErr()
	}
	return s.stall, nil
}

// stalledErr describes the stall; s.stallMu is held.
func (s *JSONSink) stalledErr() error {
	return fmt.Errorf("%w: the audit writer has been blocked since %s, longer than %s; records fail at once until it moves again",
		ErrWriteTimeout, s.writeStart.UTC().Format(time.RFC3339), s.timeout)
}

// Healthy reports ErrWriteTimeout while the sink is stalled: a Write has
// been blocked longer than the write timeout.
func (s *JSONSink) Healthy() error {
	s.stallMu.Lock()
	defer s.stallMu.Unlock()
	if s.stalled {
		return s.stalledErr()
	}
	return nil
}

// write writes b, within the timeout if there is one. It reports whether b
// may be reused (false when a timed-out Write may still read it).
func (s *JSONSink) write(b []byte) (error, bool) { //nolint:revive,staticcheck // the flag rides with the error
	if s.writes == nil {
		s.mu.Lock()
		_, err := s.w.Write(b)
		s.mu.Unlock()
		return err, true
	}
	stall, err := s.stallState()
	if err != nil {
		return err, true
	}
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	w := jsonWrite{b: b, done: make(chan error, 1)}
	select {
	case s.writes <- w:
	case <-stall:
		_, err := s.stallState()
		if err == nil { // it moved again meanwhile
			err = fmt.Errorf("%w: the audit writer stalled while the record waited for it", ErrWriteTimeout)
		}
		return err, true
	case <-t.C:
		return fmt.Errorf("%w after %s: the previous write is still blocked", ErrWriteTimeout, s.timeout), true
	}
	select {
	case err := <-w.done:
		return err, true
	case <-stall:
		return fmt.Errorf("%w after %s", ErrWriteTimeout, s.timeout), false
	case <-t.C:
		return fmt.Errorf("%w after %s", ErrWriteTimeout, s.timeout), false
	}
}

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
	err, reusable := s.write(b)
	if reusable && cap(b) <= maxPooledRecord {
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
	if r.Phase == PhaseStarted {
		b = append(b, `"level":"INFO","msg":"`+MessageStarted+`","callId":`...)
	} else {
		b = append(b, `"level":"INFO","msg":"`+Message+`","callId":`...)
	}
	b = jsonappend.String(b, r.CallID, jsonappend.Slog)
	b = append(b, `,"tool":`...)
	b = jsonappend.String(b, r.Tool, jsonappend.Slog)
	b = append(b, `,"sessionId":`...)
	b = jsonappend.String(b, r.SessionID, jsonappend.Slog)
	b = append(b, `,"channelId":`...)
	b = jsonappend.String(b, r.ChannelID, jsonappend.Slog)
	b = append(b, `,"senderId":`...)
	b = jsonappend.String(b, r.SenderID, jsonappend.Slog)
	b = append(b, `,"correlationId":`...)
	b = jsonappend.String(b, r.CorrelationID, jsonappend.Slog)
	if r.TraceID != "" {
		b = append(b, `,"traceId":`...)
		b = jsonappend.String(b, r.TraceID, jsonappend.Slog)
	}
	if r.SenderUID != "" {
		b = append(b, `,"senderUid":`...)
		b = jsonappend.String(b, r.SenderUID, jsonappend.Slog)
	}
	if len(r.SenderGroups) > 0 {
		b = jsonappend.Array(append(b, `,"senderGroups":`...), len(r.SenderGroups), func(b []byte, i int) []byte {
			return jsonappend.String(b, r.SenderGroups[i], jsonappend.JSONNoHTML)
		})
	}
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
	if r.Ask != nil {
		b = appendDecision(append(b, `,"ask":`...), r.Ask)
	}
	if a := r.Approval; a != nil {
		b = jsonappend.String(append(b, `,"approval":{"name":`...), a.Name, jsonappend.JSONNoHTML)
		b = jsonappend.String(append(b, `,"state":`...), string(a.State), jsonappend.JSONNoHTML)
		b = appendOptional(b, `,"decidedBy":`, a.DecidedBy)
		b = appendOptional(b, `,"reason":`, a.Reason)
		b = append(b, '}')
	}
	if r.Withheld != nil {
		b = appendDecision(append(b, `,"withheld":`...), r.Withheld)
	}
	if len(r.Filtering) > 0 {
		b = jsonappend.Array(append(b, `,"filtering":`...), len(r.Filtering), func(b []byte, i int) []byte {
			return appendFiltering(b, &r.Filtering[i])
		})
	}
	b = append(b, `,"durationMs":`...)
	b = jsonappend.Float(b, float64(r.Duration)/float64(time.Millisecond))
	b = append(b, `,"argumentLength":`...)
	b = strconv.AppendInt(b, int64(r.ArgumentLength), 10)
	b = append(b, `,"resultLength":`...)
	b = strconv.AppendInt(b, int64(r.ResultLength), 10)
	if x := r.Arguments; x != nil {
		if x.JSON != "" {
			// Canonical text from encoding/json: compact, as slog writes it.
			b = append(append(b, `,"arguments":`...), x.JSON...)
		}
		if len(x.Masked) > 0 {
			b = jsonappend.Array(append(b, `,"maskedArguments":`...), len(x.Masked), func(b []byte, i int) []byte {
				return jsonappend.String(b, x.Masked[i], jsonappend.JSONNoHTML)
			})
		}
		if x.Omitted != "" {
			b = jsonappend.String(append(b, `,"argumentsOmitted":`...), x.Omitted, jsonappend.Slog)
		}
	}
	return append(b, "}\n"...), true
}

// appendDecision appends d as encoding/json marshals a hooks.Decision (its
// field tags: omitempty, and omitzero for the policy).
func appendDecision(b []byte, d *hooks.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = appendOptional(b, `,"hook":`, d.Hook)
	b = appendPolicy(b, &d.Policy)
	b = appendOptional(b, `,"rule":`, d.Rule)
	b = appendOptional(b, `,"reason":`, d.Reason)
	b = appendOptional(b, `,"enforcementAction":`, string(d.Action))
	b = appendOptional(b, `,"layer":`, string(d.Layer))
	return append(b, '}')
}

// appendPolicy appends p as the "policy" member of an object (omitzero),
// after a first member.
func appendPolicy(b []byte, p *hooks.PolicyRef) []byte {
	if *p == (hooks.PolicyRef{}) {
		return b
	}
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
	return b
}

// appendFiltering appends f as encoding/json marshals a hooks.ResultFiltering.
func appendFiltering(b []byte, f *hooks.ResultFiltering) []byte {
	b = jsonappend.String(append(b, `{"hook":`...), f.Hook, jsonappend.JSONNoHTML)
	b = appendPolicy(b, &f.Policy)
	if f.Warn {
		b = append(b, `,"warn":true`...)
	}
	if len(f.Findings) > 0 {
		b = jsonappend.Array(append(b, `,"findings":`...), len(f.Findings), func(b []byte, i int) []byte {
			x := &f.Findings[i]
			b = jsonappend.String(append(b, `{"rule":`...), x.Rule, jsonappend.JSONNoHTML)
			b = jsonappend.String(append(b, `,"action":`...), x.Action, jsonappend.JSONNoHTML)
			b = strconv.AppendInt(append(b, `,"count":`...), int64(x.Count), 10)
			b = strconv.AppendInt(append(b, `,"bytes":`...), int64(x.Bytes), 10)
			return append(b, '}')
		})
	}
	return append(b, '}')
}

// appendOptional appends key and s as encoding/json does for an omitempty string field.
func appendOptional(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return jsonappend.String(append(b, key...), s, jsonappend.JSONNoHTML)
}
