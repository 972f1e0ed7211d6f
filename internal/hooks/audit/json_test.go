package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// fuzzRecord builds a record from fuzzed values: every string of the record
// and of its decisions, the numbers, the time, and how many decisions.
func fuzzRecord(strs []string, nanos, dur, gen int64, lengths int32, streaming bool, decisions uint8) audit.Record {
	s := func(i int) string { return strs[i%len(strs)] }
	r := audit.Record{
		Tool: s(0), SessionID: s(1), ChannelID: s(2), SenderID: s(3), CorrelationID: s(4),
		Streaming: streaming, Outcome: hooks.Status(s(5)), Duration: time.Duration(dur),
		ArgumentLength: int(lengths), ResultLength: int(lengths) / 3,
		CallID: s(6) + s(9), Phase: audit.Phase(decisions % 2),
	}
	if decisions%3 != 0 {
		r.SenderUID, r.SenderGroups = s(15), []string{s(16), s(17)}[:int(decisions%3)]
	}
	if nanos != 0 {
		// RFC 3339 offsets are whole minutes.
		r.Time = time.Unix(0, nanos).In(time.FixedZone(s(6), int(gen%1000)*60))
	}
	for i := range int(decisions % 4) {
		d := hooks.Decision{Allowed: i%2 == 1, Hook: s(7 + i), Rule: s(8 + i), Reason: s(9 + i), Action: hooks.EnforcementAction(s(10 + i))}
		if i != 1 {
			d.Policy = hooks.PolicyRef{Kind: s(11 + i), Namespace: s(12 + i), Name: s(13), UID: s(14 + i), Generation: gen >> i}
		}
		if i == 0 {
			r.Denial = &d
		} else {
			r.Warnings = append(r.Warnings, d)
		}
	}
	if decisions%5 >= 3 {
		ask := hooks.Decision{Hook: s(7), Rule: s(8), Reason: s(9), Policy: hooks.PolicyRef{Kind: s(10), Name: s(11)}}
		r.Ask = &ask
		r.Approval = &hooks.Approval{Name: s(12), State: hooks.ApprovalState(s(13))}
		if decisions%5 == 4 {
			r.Approval.DecidedBy, r.Approval.Reason = s(14), s(15)
		}
	}
	if decisions%7 >= 4 {
		w := hooks.Decision{Hook: s(3), Rule: s(4), Reason: s(5), Policy: hooks.PolicyRef{Kind: s(6), UID: s(7), Generation: gen}}
		r.Withheld = &w
	}
	for i := range int(decisions % 3) {
		f := hooks.ResultFiltering{Hook: s(8 + i), Warn: i == 1}
		if i != 1 {
			f.Policy = hooks.PolicyRef{Kind: s(9), Namespace: s(10 + i), Name: s(11)}
		}
		for j := range i + 1 {
			f.Findings = append(f.Findings, hooks.ResultFinding{Rule: s(12 + j), Action: s(13), Count: int(lengths) + j, Bytes: int(dur % 1e6)})
		}
		r.Filtering = append(r.Filtering, f)
	}
	if decisions%13 >= 7 {
		r.TraceID = s(5) + s(0)
	}
	if decisions%11 >= 6 {
		text, _ := json.Marshal(map[string]any{s(0): s(1), "path": s(2), "n": []any{json.Number("1.50"), nil, true}})
		r.Arguments = &audit.Arguments{JSON: string(text), Masked: []string{"/" + s(3)}}
		if decisions%11 == 10 {
			r.Arguments = &audit.Arguments{Omitted: s(4)}
		}
	}
	return r
}

// emitBoth returns what JSONSink and a SlogSink over slog.JSONHandler write for r.
func emitBoth(t *testing.T, r audit.Record) (fast, slow []byte) {
	t.Helper()
	var a, b bytes.Buffer
	if err := audit.NewJSONSink(&a).Emit(context.Background(), r); err != nil {
		t.Fatalf("JSONSink: %v", err)
	}
	if err := audit.NewSlogSink(slog.NewJSONHandler(&b, nil)).Emit(context.Background(), r); err != nil {
		t.Fatalf("SlogSink: %v", err)
	}
	return a.Bytes(), b.Bytes()
}

// checkDecoded decodes line with encoding/json and compares every field with r.
func checkDecoded(t *testing.T, line []byte, r audit.Record) {
	t.Helper()
	var got struct {
		Time           *string                 `json:"time"`
		Level          string                  `json:"level"`
		Msg            string                  `json:"msg"`
		CallID         string                  `json:"callId"`
		Tool           string                  `json:"tool"`
		SessionID      string                  `json:"sessionId"`
		ChannelID      string                  `json:"channelId"`
		SenderID       string                  `json:"senderId"`
		CorrelationID  string                  `json:"correlationId"`
		SenderUID      string                  `json:"senderUid"`
		SenderGroups   []string                `json:"senderGroups"`
		Streaming      bool                    `json:"streaming"`
		Outcome        string                  `json:"outcome"`
		Denial         *hooks.Decision         `json:"denial"`
		Warnings       []hooks.Decision        `json:"warnings"`
		Ask            *hooks.Decision         `json:"ask"`
		Approval       *hooks.Approval         `json:"approval"`
		Withheld       *hooks.Decision         `json:"withheld"`
		Filtering      []hooks.ResultFiltering `json:"filtering"`
		DurationMs     float64                 `json:"durationMs"`
		ArgumentLength int                     `json:"argumentLength"`
		ResultLength   int                     `json:"resultLength"`
		TraceID        string                  `json:"traceId"`
		Arguments      json.RawMessage         `json:"arguments"`
		Masked         []string                `json:"maskedArguments"`
		Omitted        string                  `json:"argumentsOmitted"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the record is not one JSON object of the documented fields: %v\n%s", err, line)
	}
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("the record is not one line: %q", line)
	}
	eq := func(field, got, want string) {
		if got != fixUTF8(want) {
			t.Errorf("%s = %q, want %q", field, got, fixUTF8(want))
		}
	}
	if r.Time.IsZero() != (got.Time == nil) {
		t.Errorf("time = %v for a record time %v", got.Time, r.Time)
	} else if got.Time != nil {
		if tm, err := time.Parse(time.RFC3339Nano, *got.Time); err != nil || !tm.Equal(r.Time) {
			t.Errorf("time = %q (%v), want %v", *got.Time, err, r.Time)
		}
	}
	eq("tool", got.Tool, r.Tool)
	eq("sessionId", got.SessionID, r.SessionID)
	eq("channelId", got.ChannelID, r.ChannelID)
	eq("senderId", got.SenderID, r.SenderID)
	eq("correlationId", got.CorrelationID, r.CorrelationID)
	eq("senderUid", got.SenderUID, r.SenderUID)
	if len(got.SenderGroups) != len(r.SenderGroups) {
		t.Errorf("senderGroups = %q, want %q", got.SenderGroups, r.SenderGroups)
	}
	for i := range min(len(got.SenderGroups), len(r.SenderGroups)) {
		eq("senderGroups", got.SenderGroups[i], r.SenderGroups[i])
	}
	eq("outcome", got.Outcome, string(r.Outcome))
	wantMsg := audit.Message
	if r.Phase == audit.PhaseStarted {
		wantMsg = audit.MessageStarted
	}
	if got.Streaming != r.Streaming || got.ArgumentLength != r.ArgumentLength || got.ResultLength != r.ResultLength ||
		got.DurationMs != float64(r.Duration)/float64(time.Millisecond) || got.Level != "INFO" || got.Msg != wantMsg || got.CallID != fixUTF8(r.CallID) {
		t.Errorf("decoded %+v from a record %+v", got, r)
	}
	decisionEq := func(what string, got, want *hooks.Decision) {
		w := *want
		for _, p := range []*string{&w.Hook, &w.Rule, &w.Reason, (*string)(&w.Action), &w.Policy.Kind, &w.Policy.Namespace,
			&w.Policy.Name, &w.Policy.UID} {
			*p = fixUTF8(*p)
		}
		if *got != w {
			t.Errorf("%s = %+v, want %+v", what, *got, w)
		}
	}
	if (got.Denial == nil) != (r.Denial == nil) || len(got.Warnings) != len(r.Warnings) {
		t.Fatalf("decoded denial %v and %d warnings, want %v and %d", got.Denial, len(got.Warnings), r.Denial, len(r.Warnings))
	}
	if r.Denial != nil {
		decisionEq("denial", got.Denial, r.Denial)
	}
	for i := range r.Warnings {
		decisionEq("warning", &got.Warnings[i], &r.Warnings[i])
	}
	if (got.Ask == nil) != (r.Ask == nil) || (got.Approval == nil) != (r.Approval == nil) {
		t.Fatalf("decoded ask %v and approval %v, want %v and %v", got.Ask, got.Approval, r.Ask, r.Approval)
	}
	if r.Ask != nil {
		decisionEq("ask", got.Ask, r.Ask)
	}
	if (got.Withheld == nil) != (r.Withheld == nil) || len(got.Filtering) != len(r.Filtering) {
		t.Fatalf("decoded withheld %v and %d filterings, want %v and %d", got.Withheld, len(got.Filtering), r.Withheld, len(r.Filtering))
	}
	if r.Withheld != nil {
		decisionEq("withheld", got.Withheld, r.Withheld)
	}
	for i, f := range r.Filtering {
		g := got.Filtering[i]
		d := hooks.Decision{Hook: f.Hook, Policy: f.Policy}
		decisionEq("filtering", &hooks.Decision{Hook: g.Hook, Policy: g.Policy}, &d)
		if g.Warn != f.Warn || len(g.Findings) != len(f.Findings) {
			t.Fatalf("filtering = %+v, want %+v", g, f)
		}
		for j, x := range f.Findings {
			x.Rule, x.Action = fixUTF8(x.Rule), fixUTF8(x.Action)
			if g.Findings[j] != x {
				t.Errorf("finding = %+v, want %+v", g.Findings[j], x)
			}
		}
	}
	eq("traceId", got.TraceID, r.TraceID)
	if x := r.Arguments; x != nil {
		if string(got.Arguments) != x.JSON || !slices.Equal(got.Masked, fixAll(x.Masked)) || got.Omitted != fixUTF8(x.Omitted) {
			t.Errorf("arguments = %s %q %q, want %+v", got.Arguments, got.Masked, got.Omitted, *x)
		}
	} else if got.Arguments != nil || got.Masked != nil || got.Omitted != "" {
		t.Errorf("a record without the decision log has arguments %s %q %q", got.Arguments, got.Masked, got.Omitted)
	}
	if a := r.Approval; a != nil {
		want := hooks.Approval{Name: fixUTF8(a.Name), State: hooks.ApprovalState(fixUTF8(string(a.State))),
			DecidedBy: fixUTF8(a.DecidedBy), Reason: fixUTF8(a.Reason)}
		if *got.Approval != want {
			t.Errorf("approval = %+v, want %+v", *got.Approval, want)
		}
	}
}

// fixAll is fixUTF8 of each of ss.
func fixAll(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fixUTF8(s))
	}
	return out
}

// fixUTF8 is what encoding/json decodes from an encoded s: every byte of
// invalid UTF-8 becomes U+FFFD.
func fixUTF8(s string) string {
	var b strings.Builder
	for _, r := range s { // ranging yields U+FFFD for each invalid byte
		b.WriteRune(r)
	}
	return b.String()
}

// FuzzJSONSinkMatchesSlog checks that JSONSink writes byte for byte what the
// slog JSON handler writes for the same record, and that encoding/json
// decodes every field back (strings with invalid UTF-8 as U+FFFD).
func FuzzJSONSinkMatchesSlog(f *testing.F) {
	f.Add("read_file", "sess\"ion\\1", "ch\n\r\t\b\f\x00\x1f", "<alice&bob>", "\u2028\u2029", "denied", "UTC",
		"AutonomyPolicy/ns/n", "forbiddenPathGlobs", "Path \"/etc/passwd\" is outside", int64(1772600767890000000),
		int64(1500000), int64(7), int32(42), true, uint8(3))
	f.Add("", "\xff\xfe", "é\xc3", "日本", "\x7f", "allowed", "", "", "", "", int64(0), int64(0), int64(0), int32(0), false, uint8(0))
	f.Add("t", "s", "c", "u", "id", "succeeded", "+05:30", "h", "r", "why", int64(-1), int64(1), int64(-1), int32(-5), false, uint8(2))
	f.Add("t", "s", "c", "u", "id", "timed_out", "X", "h", "r", "why", int64(1<<62), int64(1<<62), int64(1<<40), int32(1<<30), true, uint8(1))
	f.Add("k<&>", "v\u2028\xff", "/a/b", "p~/q", "tooLarge", "denied", "", "", "", "", int64(5), int64(0), int64(0), int32(2), false, uint8(7))
	f.Add("k", "v", "p", "q", "tooLarge", "allowed", "", "", "", "", int64(5), int64(0), int64(0), int32(2), false, uint8(10))
	f.Fuzz(func(t *testing.T, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9 string, nanos, dur, gen int64, lengths int32,
		streaming bool, decisions uint8) {
		r := fuzzRecord([]string{s0, s1, s2, s3, s4, s5, s6, s7, s8, s9}, nanos, dur, gen, lengths, streaming, decisions)
		fast, slow := emitBoth(t, r)
		if !bytes.Equal(fast, slow) {
			t.Fatalf("JSONSink wrote\n%s\nslog wrote\n%s", fast, slow)
		}
		if y := r.Time.Year(); !r.Time.IsZero() && (y < 0 || y >= 10000) {
			return // slog writes an error value as the time; the test above covers it
		}
		checkDecoded(t, fast, r)
	})
}

func TestJSONSinkYearOutOfRangeLikeSlog(t *testing.T) {
	r := audit.Record{Time: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), Tool: "t", Outcome: hooks.StatusAllowed}
	fast, slow := emitBoth(t, r)
	if !bytes.Equal(fast, slow) || !bytes.Contains(fast, []byte("!ERROR")) {
		t.Fatalf("JSONSink wrote %s, slog wrote %s", fast, slow)
	}
}

// countingWriter counts Write calls and fails when told to.
type countingWriter struct {
	writes int
	err    error
	buf    bytes.Buffer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.err != nil {
		return 0, w.err
	}
	return w.buf.Write(p)
}

func TestJSONSinkWritesEachRecordOnceAndReturnsWriteErrors(t *testing.T) {
	w := &countingWriter{}
	sink := audit.NewJSONSink(w)
	long := strings.Repeat("x", 40<<10) // larger than the pooled buffers
	for i, reason := range []string{"short", long, "short again"} {
		r := audit.Record{Tool: "t", Outcome: hooks.StatusDenied, Denial: &hooks.Decision{Hook: "h", Reason: reason}}
		if err := sink.Emit(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if w.writes != i+1 {
			t.Fatalf("%d writes after %d records, want one each", w.writes, i+1)
		}
	}
	recs := records(t, w.buf.String())
	if len(recs) != 3 || recs[1]["denial"].(map[string]any)["reason"] != long || recs[2]["denial"].(map[string]any)["reason"] != "short again" {
		t.Fatalf("records do not round-trip: %d records", len(recs))
	}
	w.err = errors.New("disk full")
	if err := sink.Emit(context.Background(), audit.Record{Tool: "t"}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Emit = %v, want the writer's error", err)
	}
}

func BenchmarkJSONSink(b *testing.B) {
	r := audit.Record{Time: time.Now(), Tool: "read_file", SessionID: "session-12", SenderID: "agent",
		Outcome: hooks.StatusDenied, Denial: &hooks.Decision{Hook: "AutonomyPolicy/default/coding-agent",
			Policy: hooks.PolicyRef{Kind: "AutonomyPolicy", Namespace: "default", Name: "coding-agent"},
			Rule:   "forbiddenPathGlobs", Reason: `Path "config/.env" (real path "/w/config/.env") matches the forbidden path glob "**/.env".`,
			Action: hooks.ActionDeny}, Duration: 0, ArgumentLength: 23}
	for _, sink := range []struct {
		name string
		s    audit.Sink
	}{{"JSONSink", audit.NewJSONSink(io.Discard)}, {"SlogSink", audit.NewSlogSink(slog.NewJSONHandler(io.Discard, nil))}} {
		b.Run(sink.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := sink.s.Emit(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
