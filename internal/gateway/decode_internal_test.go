package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// decodeSeeds are request bodies around the edges of the request decoder:
// plain ones it takes, and tricky ones (escapes, case variants, repeated
// keys, invalid UTF-8, lone surrogates, nulls, trailing data, deep nesting).
var decodeSeeds = []string{
	`{"sessionId":"s-1","senderId":"agent","tool":"read_file","arguments":{"path":"src/main.go"}}`,
	` {"tool":"shell","arguments":{"command":"go test ./...","cwd":"src"},"streaming":true} ` + "\n\t\r",
	`{"tool":"t","channelId":"c","correlationId":"id","streaming":false,"arguments":{}}`,
	`{"tool":"t"}`,
	`{"tool":""}`,
	`{}`,
	``,
	`   `,
	`null`,
	`[]`,
	`{"tool":"t","tool":"u"}`,
	`{"tool":"t","Tool":"u"}`,
	`{"Tool":"t"}`,
	`{"TOOL":"t"}`,
	`{"tool":"t","sessionid":"s"}`,
	`{"too\u006c":"t"}`,
	`{"tool":"\u0074"}`,
	`{"tool":"a\"b"}`,
	`{"tool":"t\ud800"}`,
	"{\"tool\":\"t\xff\"}",
	"{\"tool\":\"t\x01\"}",
	`{"tool":"日本"}`,
	`{"tool":"t"} {"tool":"u"}`,
	`{"tool":"t"}x`,
	`{"tool":"t",}`,
	`{,"tool":"t"}`,
	`{"tool":"t" "sessionId":"s"}`,
	`{"tool":null}`,
	`{"tool":"t","sessionId":null}`,
	`{"tool":"t","arguments":null}`,
	`{"tool":"t","arguments":"{\"path\":\"x\"}"}`,
	`{"tool":"t","arguments":[1,2]}`,
	`{"tool":"t","arguments":3}`,
	`{"tool":"t","arguments":{"a":1,"a":2}}`,
	`{"tool":"t","arguments":{"a":"}"}}`,
	`{"tool":"t","arguments":{"a":"\"}"}}`,
	`{"tool":"t","arguments":{"a":[}]}}`,
	`{"tool":"t","arguments":{"a":01}}`,
	`{"tool":"t","arguments":{"a":1}`,
	`{"tool":"t","arguments":{"a":{"b":{"c":[[[[]]]]}}}}`,
	`{"tool":"t","arguments":{"a":"\xff"}}`,
	"{\"tool\":\"t\",\"arguments\":{\"a\":\"\xff\"}}",
	`{"tool":"t","arguments":{"a":1,"a":[}}`,
	`{"tool":"t","arguments":{"a":1,"a":2,"b":[1,]}}`,
	`{"tool":"t","arguments":{"a":"x","a":"y"}}`,
	`{"tool":3}`,
	`{"tool":"t","streaming":"true"}`,
	`{"tool":"t","streaming":1}`,
	`{"tool":"t","streaming":tru}`,
	`{"tool":"t","streaming":truex}`,
	`{"tool":"t","streaming":null}`,
	`{"tool":"t","extra":1}`,
	"\ufeff{\"tool\":\"t\"}",
	`{"tool":"t","arguments":{"path":"` + strings.Repeat("x", 300) + `"}}`,
	`{"tool":"t","arguments":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`,
}

// testServer is enough of a Server for decodeBodyCall.
func testServer(limit int64) *Server { return &Server{opts: Options{MaxBodyBytes: limit}} }

// decodedCall runs decodeBodyCall on body.
func decodedCall(s *Server, body []byte) (*hooks.Call, int, string) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/decisions", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	call, ok := s.decodeBodyCall(rec, r)
	if !ok {
		return nil, rec.Code, rec.Body.String()
	}
	return call, 0, ""
}

// lenientCall decodes body with encoding/json as the gateway's decoder
// reads it, but without the strict rules: keys match ignoring case, the
// last of a repeated key wins, invalid UTF-8 and lone surrogates become
// U+FFFD. It returns false where encoding/json rejects the body.
func lenientCall(body []byte) (*wire.ToolCallRequest, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req wire.ToolCallRequest
	if dec.Decode(&req) != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return &req, true
}

// breaksStrictRules reports whether body breaks one of the rules that
// strictjson adds to encoding/json: a key in another case or twice at the
// top level, a key twice in a nested object, invalid UTF-8, an escaped
// surrogate (even a valid pair counts here).
func breaksStrictRules(body []byte) bool {
	if !utf8.Valid(body) || surrogateEscape.Match(body) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next string is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string)
			if top.keys[k] || (len(stack) == 1 && !slices.Contains(toolCallOptions.Keys, k)) {
				return true
			}
			top.keys[k], top.key = true, false
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// surrogateEscape matches a \u escape of a UTF-16 surrogate.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

// checkDecode is the differential test of the request decoder: what it
// accepts encoding/json reads as the same request, and the call's
// arguments are exactly what ParseArgs gives for its arguments text (the
// view of every hook and tool); what it rejects and encoding/json accepts
// breaks one of the strict rules.
func checkDecode(t *testing.T, body []byte) {
	t.Helper()
	got, status, msg := decodedCall(testServer(1<<20), body)
	want, ok := lenientCall(body)
	if got == nil {
		if ok && want.Tool != "" && !breaksStrictRules(body) {
			t.Fatalf("%q rejected (%d %s), but encoding/json reads %+v and it keeps the strict rules", body, status, msg, want)
		}
		return
	}
	if !ok {
		t.Fatalf("%q accepted as %+v, encoding/json rejects it", body, got)
	}
	if w := callOf(want); !sameCall(got, w) {
		t.Fatalf("%q: the decoder gives %+v, encoding/json %+v", body, got, w)
	}
	args, err := hooks.ParseArgs(got.ArgsJSON)
	if (err == nil) != (got.ArgsErr == nil) || !reflect.DeepEqual(args, got.Args) {
		t.Fatalf("%q: the call's arguments %#v (%v), ParseArgs of its text %#v (%v)", body, got.Args, got.ArgsErr, args, err)
	}
}

// sameCall reports whether two calls carry the same request.
func sameCall(a, b *hooks.Call) bool {
	return a.Tool == b.Tool && a.SessionID == b.SessionID && a.ChannelID == b.ChannelID && a.SenderID == b.SenderID &&
		a.CorrelationID == b.CorrelationID && a.Streaming == b.Streaming && a.ArgsJSON == b.ArgsJSON &&
		(a.ArgsErr == nil) == (b.ArgsErr == nil) && reflect.DeepEqual(a.Args, b.Args)
}

func TestDecodeSeeds(t *testing.T) {
	for _, body := range decodeSeeds[:4] {
		if call, status, msg := decodedCall(testServer(1<<20), []byte(body)); call == nil {
			t.Errorf("the plain body %q was rejected: %d %s", body, status, msg)
		}
	}
	for _, body := range decodeSeeds {
		checkDecode(t, []byte(body))
	}
}

func TestDecodeLimit(t *testing.T) {
	body := []byte(decodeSeeds[0])
	if _, status, msg := decodedCall(testServer(int64(len(body)-1)), body); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit answered %d %s", status, msg)
	}
	if call, status, msg := decodedCall(testServer(int64(len(body))), body); call == nil {
		t.Errorf("a body at the limit answered %d %s", status, msg)
	}
}

// FuzzDecodeCall is the differential test of the request decoder (see
// checkDecode).
func FuzzDecodeCall(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, body)
	})
}
