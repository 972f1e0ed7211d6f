package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Request bodies of tool calls are read with strictjson, the parser the
// executor reads the arguments with: keys spelled exactly as
// ToolCallRequest's JSON names and each at most once, no unknown key, no
// top-level key twice, valid UTF-8 and no escaped lone surrogate
// throughout, and nothing after the object. The arguments may repeat a key
// here: the executor's ParseArgs rejects them, and the call is denied and
// audited (hook "arguments").

// toolCallOptions admit ToolCallRequest's JSON names only.
var toolCallOptions = strictjson.Options{
	Keys: []string{"sessionId", "channelId", "senderId", "correlationId", "tool", "arguments", "streaming"},
}

// maxPooledBody is the largest body buffer kept for reuse.
const maxPooledBody = 32 << 10

// bodyBufs pools the buffers request bodies are read into.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// parseToolCall reads body, one ToolCallRequest.
func parseToolCall(body []byte) (*wire.ToolCallRequest, error) {
	req := new(wire.ToolCallRequest)
	err := strictjson.DecodeLooseRaw(body, func(d *strictjson.Decoder) error {
		return d.Object(&toolCallOptions, func(key string) (err error) {
			switch key {
			case "sessionId":
				req.SessionID, err = d.String()
			case "channelId":
				req.ChannelID, err = d.String()
			case "senderId":
				req.SenderID, err = d.String()
			case "correlationId":
				req.CorrelationID, err = d.String()
			case "tool":
				req.Tool, err = d.String()
			case "streaming":
				req.Streaming, err = d.Bool()
			default: // arguments: the executor parses them
				var raw []byte
				raw, err = d.Raw()
				req.Arguments = bytes.Clone(raw)
			}
			return err
		})
	})
	return req, err
}

// readAll reads r to the end, appending to buf.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// decodeCall authenticates the caller and reads a ToolCallRequest whose
// sender is that caller, answering 4xx itself when it cannot; each refusal
// is audited and counted as a denied call of api (see refuseCall).
func (s *Server) decodeCall(w http.ResponseWriter, r *http.Request, api string) (*hooks.Call, bool) {
	id, ok := s.identify(w, r, api)
	if !ok {
		return nil, false
	}
	call, ok := s.decodeBodyCall(w, r)
	if !ok {
		call.SenderID, call.Caller = id.Username, id
		s.refuseCall(r.Context(), api, call)
		return nil, false
	}
	if !s.bindCaller(w, r, api, call, id) {
		return nil, false
	}
	return call, true
}

// refuseCall runs call, whose ArgsErr says why its request was refused (a
// *hooks.Refusal, or an error wrapping hooks.ErrTooLarge), through the
// before phase, which denies it without running a hook or a tool, and the
// after phase, which audits it; and counts it under api. So every request
// refused on an API that runs or decides calls leaves one audit record.
func (s *Server) refuseCall(ctx context.Context, api string, call *hooks.Call) {
	start := time.Now()
	res := s.cur.Load().exec.Evaluate(ctx, call)
	s.record(api, call, &res, time.Since(start))
}

// refused is the call of a request refused with rule for err, with nothing
// of the request read.
func refused(rule string, err error) *hooks.Call {
	return &hooks.Call{Args: map[string]any{}, ArgsErr: &hooks.Refusal{Rule: rule, Err: err}}
}

func tooLargeErr(limit int64) error {
	return fmt.Errorf("%w: the request body is larger than %d bytes", hooks.ErrTooLarge, limit)
}

// decodeBodyCall reads a ToolCallRequest of at most MaxBodyBytes. When it
// cannot, it answers 4xx itself and returns false with the refused call:
// its ArgsErr says why (a *hooks.Refusal, or hooks.ErrTooLarge for a body
// over the limit, refused unread).
func (s *Server) decodeBodyCall(w http.ResponseWriter, r *http.Request) (*hooks.Call, bool) {
	if status, err := checkContentType(r); err != nil {
		writeError(w, status, err.Error())
		return refused(hooks.RuleMalformedRequest, err), false
	}
	bp := bodyBufs.Get().(*[]byte)
	body, err := readAll(http.MaxBytesReader(w, readCloser{r.Body}, s.opts.MaxBodyBytes), (*bp)[:0])
	defer func() {
		if cap(body) <= maxPooledBody {
			*bp = body[:0]
			bodyBufs.Put(bp)
		}
	}()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit))
		return &hooks.Call{Args: map[string]any{}, ArgsErr: tooLargeErr(tooBig.Limit)}, false
	case err != nil:
		msg := "malformed JSON body: reading the body: " + err.Error()
		writeError(w, http.StatusBadRequest, msg)
		return refused(hooks.RuleMalformedRequest, errors.New(msg)), false
	case len(bytes.TrimLeft(body, " \t\r\n")) == 0:
		msg := "request body is empty; send a JSON object"
		writeError(w, http.StatusBadRequest, msg)
		return refused(hooks.RuleMalformedRequest, errors.New(msg)), false
	}
	req, err := parseToolCall(body)
	if errors.Is(err, strictjson.ErrTrailingData) {
		err = errors.New("unexpected data after the JSON object")
	}
	if err != nil {
		msg := "malformed JSON body: " + err.Error()
		writeError(w, http.StatusBadRequest, msg)
		return refused(hooks.RuleMalformedRequest, errors.New(msg)), false
	}
	if req.Tool == "" {
		msg := "tool is required"
		writeError(w, http.StatusBadRequest, msg)
		call := callOf(req)
		call.Args, call.ArgsErr = map[string]any{}, &hooks.Refusal{Rule: hooks.RuleMalformedRequest, Err: errors.New(msg)}
		return call, false
	}
	return callOf(req), true
}
