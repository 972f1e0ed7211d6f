package hooks_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]any
		wantErr string // substring of the error; empty means success
	}{
		{name: "absent arguments are an empty object", in: "", want: map[string]any{}},
		{name: "whitespace-only arguments are an empty object", in: " \t\r\n ", want: map[string]any{}},
		{name: "an empty object is an empty object", in: "{}", want: map[string]any{}},
		{
			name: "an object with nested values is parsed",
			in:   `{"path":"a/b","n":1,"ok":true,"none":null,"list":["x",{"y":[]}]}`,
			want: map[string]any{
				"path": "a/b", "n": json.Number("1"), "ok": true, "none": nil,
				"list": []any{"x", map[string]any{"y": []any{}}},
			},
		},
		{
			name: "numbers keep every digit",
			in:   `{"big":12345678901234567890123,"f":0.1000000000000000055511151231257827}`,
			want: map[string]any{
				"big": json.Number("12345678901234567890123"),
				"f":   json.Number("0.1000000000000000055511151231257827"),
			},
		},
		{name: "surrounding whitespace is allowed", in: "\n {\"a\":\"b\"} \n", want: map[string]any{"a": "b"}},
		{name: "escaped keys are decoded", in: `{"p\u0061th":"x"}`, want: map[string]any{"path": "x"}},
		{name: "the same key in different objects is not a duplicate", in: `{"a":{"a":1},"b":{"a":2}}`,
			want: map[string]any{"a": map[string]any{"a": json.Number("1")}, "b": map[string]any{"a": json.Number("2")}}},
		{name: "an array is rejected", in: `["ls"]`, wantErr: "got an array"},
		{name: "a string is rejected", in: `"ls -la"`, wantErr: "got a string"},
		{name: "a number is rejected", in: `42`, wantErr: "got a number"},
		{name: "a boolean is rejected", in: `true`, wantErr: "got a boolean"},
		{name: "null is rejected", in: `null`, wantErr: "got null"},
		{name: "invalid JSON is rejected", in: `{path: "x"}`, wantErr: "invalid character"},
		{name: "a truncated object is rejected", in: `{"path":"x"`, wantErr: "unexpected EOF"},
		{name: "a truncated value is rejected", in: `{"path":`, wantErr: "unexpected EOF"},
		{name: "a trailing comma is rejected", in: `{"a":1,}`, wantErr: "invalid character"},
		{name: "a second object after the first is rejected", in: `{"a":1}{"a":2}`, wantErr: "after the object"},
		{name: "trailing garbage is rejected", in: `{"a":1} rm -rf /`, wantErr: "after the object"},
		{name: "a stray closing brace is rejected", in: `{"a":1}}`, wantErr: "after the object"},
		{name: "a duplicate key is rejected", in: `{"path":"/workspace/a","path":"/etc/passwd"}`, wantErr: "duplicate object key"},
		{name: "a duplicate key spelled with an escape is rejected", in: `{"path":"a","p\u0061th":"/etc"}`, wantErr: "duplicate object key"},
		{name: "a duplicate key in a nested object is rejected", in: `{"o":{"k":1,"k":2}}`, wantErr: "duplicate object key"},
		{name: "a duplicate key in an object inside an array is rejected", in: `{"l":[{"k":1,"k":2}]}`, wantErr: "duplicate object key"},
		{name: "invalid UTF-8 is rejected", in: "{\"path\":\"\xff\"}", wantErr: "UTF-8"},
		{name: "an escaped lone surrogate is rejected", in: `{"path":"\ud800"}`, wantErr: "lone surrogate"},
		{name: "an escaped lone low surrogate in a nested key is rejected", in: `{"o":{"k\udc00":1}}`, wantErr: "lone surrogate"},
		{name: "a surrogate pair is decoded", in: `{"s":"\ud83d\ude00"}`, want: map[string]any{"s": "\U0001F600"}},
		{name: "a byte-order mark is rejected", in: "\ufeff{}", wantErr: "invalid character"},
		{name: "non-JSON whitespace alone is rejected", in: "\u00a0", wantErr: "invalid character"},
		{name: "nesting beyond the limit is rejected", in: `{"a":` + strings.Repeat("[", 20000), wantErr: "nested more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hooks.ParseArgs(tt.in)
			if got == nil {
				t.Fatal("ParseArgs returned a nil map")
			}
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseArgs(%q) = %v, want an error containing %q", tt.in, got, tt.wantErr)
				}
				if !errors.Is(err, hooks.ErrInvalidArguments) {
					t.Errorf("error %v does not wrap ErrInvalidArguments", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not contain %q", err, tt.wantErr)
				}
				if len(got) != 0 {
					t.Errorf("arguments on error = %v, want empty", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseArgs(%q) failed: %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseArgs(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseArgsErrorsDoNotQuoteArguments(t *testing.T) {
	const secret = "hunter2-SECRET"
	for _, in := range []string{
		`{"` + secret + `":1,"` + secret + `":2}`,
		`{"a":"` + secret + `"} trailing ` + secret,
		`"` + secret + `"`,
		`{"a": ` + secret + `}`,
		"{\"" + secret + "\xff\":1}",
	} {
		_, err := hooks.ParseArgs(in)
		if err == nil {
			t.Fatalf("ParseArgs(%q) succeeded, want an error", in)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "hunter") {
			t.Errorf("error for %q quotes the arguments: %v", in, err)
		}
	}
}

func TestNewCall(t *testing.T) {
	tests := []struct {
		name     string
		args     string
		wantArgs map[string]any
		wantErr  bool
	}{
		{name: "valid arguments are parsed and kept as sent", args: ` {"path":"x"} `, wantArgs: map[string]any{"path": "x"}},
		{name: "absent arguments become an empty object", args: "", wantArgs: map[string]any{}},
		{name: "non-object arguments set ArgsErr and leave Args empty", args: `["x"]`, wantArgs: map[string]any{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hooks.NewCall("read_file", tt.args)
			if c.Tool != "read_file" || c.ArgsJSON != tt.args {
				t.Errorf("NewCall kept tool %q and arguments %q, want %q and %q", c.Tool, c.ArgsJSON, "read_file", tt.args)
			}
			if (c.ArgsErr != nil) != tt.wantErr {
				t.Errorf("ArgsErr = %v, want error: %v", c.ArgsErr, tt.wantErr)
			}
			if c.Args == nil || !reflect.DeepEqual(c.Args, tt.wantArgs) {
				t.Errorf("Args = %#v, want %#v", c.Args, tt.wantArgs)
			}
		})
	}
}

// FuzzParseArgs checks that whatever ParseArgs accepts, encoding/json decodes
// to exactly the same value, so hooks and tools can never disagree with a
// standard parser about an accepted argument object, and that every rejection
// is reported as ErrInvalidArguments.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"path":"a"}`, `{"a":[1,2,{"b":null}]}`, `[]`, `"x"`, `{"a":1}{"a":2}`,
		`{"a":1,"a":2}`, `{"a":1e400}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":-0.0}`,
	} {
		f.Add(s)
	}
	for _, s := range argsSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := hooks.ParseArgs(in)
		if got == nil {
			t.Fatal("ParseArgs returned a nil map")
		}
		if err != nil {
			if !errors.Is(err, hooks.ErrInvalidArguments) {
				t.Fatalf("error %v does not wrap ErrInvalidArguments", err)
			}
			if len(got) != 0 {
				t.Fatalf("arguments on error = %v, want empty", got)
			}
			return
		}
		if strings.TrimLeft(in, " \t\r\n") == "" {
			return
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("ParseArgs accepted invalid JSON %q", in)
		}
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		var want map[string]any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json rejects accepted arguments %q: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseArgs(%q) = %#v, encoding/json gives %#v", in, got, want)
		}
	})
}

// argsSeeds are argument texts around the edges of the grammar and of the
// strict rules.
var argsSeeds = []string{
	`{}`, ` { } `, `{"path":"src/main.go"}`, `{"command":"go test ./...","cwd":"src"}`, `{"a":1,"b":-0.5e+10,"c":true,"d":false,"e":null}`,
	`{"a":1,"a":2}`, `{"a":"x","a":"x"}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":1E+}`, `{"a":-0}`, `{"a":1e400}`,
	`{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":"\n"}`, "{\"a\":\"x\ty\"}", `{"a":[1]}`, `{"a":{}}`, `{"a":1,}`, `{,}`, `{"a" 1}`,
	`{"a":1}x`, `{"a":1} {"b":2}`, `{"a":1`, `{"a":"é日本"}`, `{"a\u0062":1}`, `{"":""}`, `{"a":1 "b":2}`, `[]`, `"x"`, `1`, `{"a":"x}`,
	`null`, `{"a":1} x`, `{"a":1}}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"x":1},{"x":1,"x":2}]}`, `{"a:b":1,"c":"d:e"}`, `{"a\":":1}`,
	`{"A":1,"a":2}`, `{"a":"\\"}`, `{"a":[[[[[[[[[[]]]]]]]]]]}`, `{"a":"\ud83d\ude00"}`, `{"a":"\udc00"}`, `{"a":"\ud800\u0041"}`,
}

// BenchmarkParseArgsPaths measures ParseArgs on a typical shell call's
// arguments, which nest an object.
func BenchmarkParseArgsPaths(b *testing.B) {
	const args = `{"command":"git log --oneline | grep fix | head -n 5","cwd":"src","timeout":30,"env":{"A":"1"}}`
	b.Run("ParseArgs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := hooks.ParseArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
