package jsonappend_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"testing"

	"github.com/toolhooks/toolhooks/internal/jsonappend"
)

// marshal is encoding/json's encoding of v, HTML-escaped or not.
func marshal(t *testing.T, v any, html bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// slogString is how log/slog's JSON handler writes the string value s.
func slogString(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "k" {
			return a
		}
		return slog.Attr{} // drop time, level and msg
	}})).Info("", "k", s)
	out := bytes.TrimSuffix(buf.Bytes(), []byte("}\n"))
	return bytes.TrimPrefix(out, []byte(`{"k":`))
}

// FuzzString compares String with encoding/json (with and without HTML
// escaping) and log/slog byte for byte, and checks encoding/json decodes it.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \back\slash/`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href='x'>&amp;</a>",
		"\u2028\u2029\u2027\u202a", "\xff\xfe\xc3", "é日本🎉", "\xed\xa0\x80", "x\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []struct {
			e    jsonappend.Escaping
			want []byte
		}{
			{jsonappend.JSON, marshal(t, s, true)},
			{jsonappend.JSONNoHTML, marshal(t, s, false)},
			{jsonappend.Slog, slogString(t, s)},
		} {
			got := jsonappend.String([]byte("prefix"), s, c.e)
			if !bytes.Equal(got[6:], c.want) || string(got[:6]) != "prefix" {
				t.Fatalf("String(%q, %d) = %s, want %s", s, c.e, got[6:], c.want)
			}
			var back string
			if err := json.Unmarshal(got[6:], &back); err != nil {
				t.Fatalf("String(%q, %d) = %s does not decode: %v", s, c.e, got[6:], err)
			}
		}
	})
}

// FuzzFloat compares Float with encoding/json byte for byte.
func FuzzFloat(f *testing.F) {
	for _, x := range []float64{0, 1, -1, 1.5, 1e-6, 9.99e-7, 1e21, 1e20, 123456789.125, -2.5e-10, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		if got, want := jsonappend.Float(nil, x), marshal(t, x, true); !bytes.Equal(got, want) {
			t.Fatalf("Float(%v) = %s, want %s", x, got, want)
		}
	})
}

func TestArray(t *testing.T) {
	for n, want := range []string{`[]`, `[0]`, `[0,1]`, `[0,1,2]`} {
		got := jsonappend.Array([]byte("x"), n, func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(i), 10) })
		if string(got) != "x"+want {
			t.Errorf("Array of %d = %s, want x%s", n, got, want)
		}
	}
}
