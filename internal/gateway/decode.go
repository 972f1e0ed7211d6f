package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/jsonscan"
	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Request bodies of tool calls are decoded in two ways. The strict decoder
// (strictjson.CheckObject, then decodeJSON into a ToolCallRequest) is the
// authority: keys spelled exactly as ToolCallRequest's JSON names and each
// at most once, valid UTF-8 throughout, no escaped lone surrogate in a
// top-level string, encoding/json with unknown fields disallowed and
// nothing after the object. In front of it,
// parseCallFast accepts only a plain subset of what the strict decoder
// accepts and yields exactly the same request for it, without reflection
// and with one allocation for all the strings; anything else, including
// every input the strict decoder rejects, goes to the strict decoder, which
// then gives the answer (FuzzParseCallFast checks both directions).

// toolCallKeys are ToolCallRequest's JSON names.
var toolCallKeys = []string{"sessionId", "channelId", "senderId", "correlationId", "tool", "arguments", "streaming"}

// maxFastBody is the largest body parseCallFast handles. Its strings share
// one allocation with the whole body, which a Call kept in the denial queue
// holds on to, so large bodies take the strict path.
const maxFastBody = 16 << 10

// maxFastArgsDepth is the deepest nesting of the arguments parseCallFast
// accepts (the strict decoder allows 10,000 levels for the whole body).
const maxFastArgsDepth = 64

// bodyBufs pools the buffers request bodies are read into.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// fastRequest is a ToolCallRequest decoded by parseCallFast: the strings
// are substrings of the body and Arguments is the raw object text, absent
// when empty.
type fastRequest struct {
	SessionID, ChannelID, SenderID, CorrelationID, Tool, Arguments string
	Streaming                                                      bool
	argsAt                                                         int // offset of Arguments in the body
}

// Bits of the fields parseCallFast has seen, to decline duplicates.
const (
	seenSession = 1 << iota
	seenChannel
	seenSender
	seenCorrelation
	seenTool
	seenArguments
	seenStreaming
)

// parseCallFast decodes text when it is one JSON object whose members are
// each at most once and spelled exactly as ToolCallRequest's JSON names,
// with string values without escapes, control characters or invalid UTF-8,
// a streaming value of true or false and an arguments object nested at
// most maxFastArgsDepth deep, followed by nothing but JSON whitespace, and
// a non-empty tool. ok is false for everything else (the strict decoder
// decides then). Its strings are substrings of text. The arguments are not
// validated here: see fastCall.
func parseCallFast(text string) (req fastRequest, ok bool) {
	i := jsonscan.SkipSpace(text, 0)
	if i >= len(text) || text[i] != '{' {
		return req, false
	}
	i = jsonscan.SkipSpace(text, i+1)
	var seen uint8
	for i < len(text) && text[i] == '"' {
		key, next, ok := jsonscan.PlainString(text, i)
		if !ok {
			return req, false
		}
		i = jsonscan.SkipSpace(text, next)
		if i >= len(text) || text[i] != ':' {
			return req, false
		}
		if i, ok = req.member(text, key, jsonscan.SkipSpace(text, i+1), &seen); !ok {
			return req, false
		}
		i = jsonscan.SkipSpace(text, i)
		if i >= len(text) || text[i] != ',' {
			break // the '}' is checked below
		}
		i = jsonscan.SkipSpace(text, i+1)
		if i >= len(text) || text[i] != '"' {
			return req, false
		}
	}
	if i >= len(text) || text[i] != '}' || !jsonscan.IsBlank(text[i+1:]) || req.Tool == "" {
		return req, false
	}
	return req, true
}

// member decodes the value of member key starting at text[i] into req,
// returning the index after it; it declines unknown and repeated keys (seen
// holds the keys so far) and values parseCallFast does not take.
func (req *fastRequest) member(text, key string, i int, seen *uint8) (int, bool) {
	var bit uint8
	var field *string
	switch key {
	case "sessionId":
		bit, field = seenSession, &req.SessionID
	case "channelId":
		bit, field = seenChannel, &req.ChannelID
	case "senderId":
		bit, field = seenSender, &req.SenderID
	case "correlationId":
		bit, field = seenCorrelation, &req.CorrelationID
	case "tool":
		bit, field = seenTool, &req.Tool
	case "arguments":
		bit = seenArguments
	case "streaming":
		bit = seenStreaming
	default:
		return i, false
	}
	if *seen&bit != 0 {
		return i, false
	}
	*seen |= bit
	switch {
	case field != nil:
		var ok bool
		*field, i, ok = jsonscan.PlainString(text, i)
		return i, ok
	case bit == seenStreaming:
		switch {
		case strings.HasPrefix(text[i:], "true"):
			req.Streaming = true
			return i + 4, true
		case strings.HasPrefix(text[i:], "false"):
			return i + 5, true
		}
		return i, false
	default: // arguments
		end, ok := objectEnd(text, i)
		if !ok {
			return i, false
		}
		req.Arguments, req.argsAt = text[i:end], i
		return end, true
	}
}

// objectEnd returns the index after the object starting at s[i] ('{'),
// matching brackets outside strings, or false when it does not end or nests
// deeper than maxFastArgsDepth. It does not validate: fastCall proves the
// result valid JSON, so the brackets were matched as a JSON parser matches
// them.
func objectEnd(s string, i int) (int, bool) {
	if i >= len(s) || s[i] != '{' {
		return 0, false
	}
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = jsonscan.StringEnd(s, i)
		case '{', '[':
			if depth++; depth > maxFastArgsDepth {
				return 0, false
			}
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// fastCall decodes body with parseCallFast into a Call, or returns false
// for the strict decoder to decide. The arguments must be valid JSON, as
// the strict decoder requires of the whole body: arguments ParseArgs
// accepted are (every parser behind it accepts only valid JSON), others are
// checked with json.Valid.
func fastCall(body []byte) (*hooks.Call, bool) {
	if !utf8.Valid(body) {
		return nil, false // the strict decoder rejects it
	}
	req, ok := parseCallFast(string(body))
	if !ok {
		return nil, false
	}
	call := req.call()
	if call.ArgsErr != nil && req.Arguments != "" && !json.Valid(body[req.argsAt:req.argsAt+len(req.Arguments)]) {
		return nil, false
	}
	return call, true
}

// call converts the request into the executor's Call.
func (r *fastRequest) call() *hooks.Call {
	c := hooks.NewCall(r.Tool, r.Arguments)
	c.SessionID, c.ChannelID, c.SenderID, c.CorrelationID = r.SessionID, r.ChannelID, r.SenderID, r.CorrelationID
	c.Streaming = r.Streaming
	return c
}

// readBody reads r's body into buf, up to limit+1 bytes, and reports
// whether it read all of it (done; err is then nil). When done is false the
// body continues in rest: the bytes read, then the read error or the rest of
// the body, so the strict decoder sees exactly the byte stream (and error)
// it would have read itself.
func readBody(body io.Reader, buf []byte, limit int64) (read []byte, rest io.Reader, done bool) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			if int64(len(buf)) <= limit {
				return buf, nil, true
			}
			return buf, io.MultiReader(bytes.NewReader(buf), body), false
		case err != nil:
			return buf, io.MultiReader(bytes.NewReader(buf), errReader{err}), false
		case int64(len(buf)) > limit:
			return buf, io.MultiReader(bytes.NewReader(buf), body), false
		}
	}
}

// errReader returns err from every Read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// decodeCall authenticates the caller and reads a ToolCallRequest whose
// sender is that caller, answering 4xx itself when it cannot.
func (s *Server) decodeCall(w http.ResponseWriter, r *http.Request) (*hooks.Call, bool) {
	id, ok := s.identify(w, r)
	if !ok {
		return nil, false
	}
	call, ok := s.decodeBodyCall(w, r)
	if !ok || !bindCaller(w, call, id) {
		return nil, false
	}
	return call, true
}

// decodeBodyCall reads a ToolCallRequest, answering 4xx itself when it cannot.
func (s *Server) decodeBodyCall(w http.ResponseWriter, r *http.Request) (*hooks.Call, bool) {
	if status, err := checkContentType(r); err != nil {
		writeError(w, status, err.Error())
		return nil, false
	}
	bp := bodyBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 2*maxFastBody {
			bodyBufs.Put(bp)
		}
	}()
	body, rest, done := readBody(r.Body, (*bp)[:0], s.opts.MaxBodyBytes)
	*bp = body[:0]
	if done && len(body) <= maxFastBody {
		if call, ok := fastCall(body); ok {
			return call, true
		}
	}
	var whole []byte
	if rest == nil {
		whole, rest = body, bytes.NewReader(body)
	}
	var req wire.ToolCallRequest
	if status, err := s.decodeStrict(w, rest, whole, &req); err != nil {
		writeError(w, status, err.Error())
		return nil, false
	}
	if req.Tool == "" {
		writeError(w, http.StatusBadRequest, "tool is required")
		return nil, false
	}
	return callOf(&req), true
}

// decodeStrict is the strict decoder of a ToolCallRequest: when the whole
// body is in hand (whole is not nil, the body is within the limit), its top
// level is checked with strictjson first (keys spelled exactly and once,
// valid UTF-8 throughout, no escaped lone surrogate); then decodeJSON.
func (s *Server) decodeStrict(w http.ResponseWriter, rest io.Reader, whole []byte, req *wire.ToolCallRequest) (int, error) {
	if whole != nil && json.Valid(whole) { // invalid JSON: decodeJSON says why
		if _, err := strictjson.CheckObject(whole, strictjson.Options{Keys: toolCallKeys}); err != nil {
			return http.StatusBadRequest, fmt.Errorf("malformed JSON body: %w", err)
		}
	}
	return s.decodeJSON(w, rest, req)
}
