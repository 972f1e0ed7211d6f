package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// decodeSeeds are request bodies the fast decoder must get right: plain
// ones it takes, and tricky ones it must leave to the strict decoder, or
// take with exactly the strict decoder's result.
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

// testServer is enough of a Server for decodeCall and decodeJSON.
func testServer(limit int64) *Server { return &Server{opts: Options{MaxBodyBytes: limit}} }

// strictCall is the strict decoder alone. It returns the call, or the status and the error body.
func strictCall(s *Server, body []byte) (*hooks.Call, int, string) {
	rec := httptest.NewRecorder()
	var req wire.ToolCallRequest
	var whole []byte
	if int64(len(body)) <= s.opts.MaxBodyBytes {
		whole = body
	}
	status, err := s.decodeStrict(rec, bytes.NewReader(body), whole, &req)
	switch {
	case err != nil:
		writeError(rec, status, err.Error())
	case req.Tool == "":
		writeError(rec, http.StatusBadRequest, "tool is required")
	default:
		return callOf(&req), 0, ""
	}
	return nil, rec.Code, rec.Body.String()
}

// decodedCall runs decodeBodyCall, with the fast decoder, on body.
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

// sameCall reports whether two calls carry the same request.
func sameCall(a, b *hooks.Call) bool {
	return a.Tool == b.Tool && a.SessionID == b.SessionID && a.ChannelID == b.ChannelID && a.SenderID == b.SenderID &&
		a.CorrelationID == b.CorrelationID && a.Streaming == b.Streaming && a.ArgsJSON == b.ArgsJSON &&
		(a.ArgsErr == nil) == (b.ArgsErr == nil) && reflect.DeepEqual(a.Args, b.Args)
}

// checkDecode checks the fast decoder against the strict one on body: what
// fastCall accepts the strict decoder accepts with the same request,
// and decodeCall as a whole answers exactly as the strict decoder alone,
// with a large and a small body limit.
func checkDecode(t *testing.T, body []byte) {
	t.Helper()
	big := testServer(1 << 20)
	if got, ok := fastCall(body); ok {
		want, status, msg := strictCall(big, body)
		if want == nil {
			t.Fatalf("fast decoder accepted %q, the strict decoder answers %d %s", body, status, msg)
		}
		if !sameCall(got, want) {
			t.Fatalf("fast decoder on %q: %+v, strict decoder: %+v", body, got, want)
		}
	}
	for _, s := range []*Server{big, testServer(64)} {
		want, wantStatus, wantMsg := strictCall(s, body)
		got, status, msg := decodedCall(s, body)
		if (got == nil) != (want == nil) || status != wantStatus || msg != wantMsg || (got != nil && !sameCall(got, want)) {
			t.Fatalf("limit %d, body %q: decodeCall gave %+v %d %q, the strict decoder %+v %d %q",
				s.opts.MaxBodyBytes, body, got, status, msg, want, wantStatus, wantMsg)
		}
	}
}

func TestParseCallFastTakesPlainBodies(t *testing.T) {
	for _, body := range decodeSeeds[:4] {
		if _, ok := fastCall([]byte(body)); !ok {
			t.Errorf("fast decoder declined the plain body %q", body)
		}
	}
	for _, body := range decodeSeeds {
		checkDecode(t, []byte(body))
	}
}

// FuzzParseCallFast is the differential test of the fast request decoder
// against the strict one (see checkDecode).
func FuzzParseCallFast(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, body)
	})
}
