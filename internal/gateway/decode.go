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
// sender is that caller, answering 4xx itself when it cannot. A body over
// MaxBodyBytes is answered 413 and audited as a denied call of api (see
// RefuseTooLarge).
func (s *Server) decodeCall(w http.ResponseWriter, r *http.Request, api string) (*hooks.Call, bool) {
	id, ok := s.identify(w, r)
	if !ok {
		return nil, false
	}
	call, ok := s.decodeBodyCall(w, r)
	if !ok {
		if call != nil { // too large: refused unread
			call.SenderID, call.Caller = id.Username, id
			s.refuseTooLarge(r.Context(), api, call)
		}
		return nil, false
	}
	if !bindCaller(w, call, id) {
		return nil, false
	}
	return call, true
}

// refuseTooLarge runs call, whose ArgsErr wraps hooks.ErrTooLarge, through
// the before phase, which denies it without running a hook or a tool, and
// the after phase, which audits it; and counts it under api.
func (s *Server) refuseTooLarge(ctx context.Context, api string, call *hooks.Call) {
	start := time.Now()
	res := s.cur.Load().exec.Evaluate(ctx, call)
	s.record(api, call, &res, time.Since(start))
}

func tooLargeErr(limit int64) error {
	return fmt.Errorf("%w: the request body is larger than %d bytes", hooks.ErrTooLarge, limit)
}

// decodeBodyCall reads a ToolCallRequest of at most MaxBodyBytes,
// answering 4xx itself when it cannot; for a body over the limit it also
// returns the call that was refused unread (ArgsErr wraps hooks.ErrTooLarge).
func (s *Server) decodeBodyCall(w http.ResponseWriter, r *http.Request) (*hooks.Call, bool) {
	if status, err := checkContentType(r); err != nil {
		writeError(w, status, err.Error())
		return nil, false
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
		writeError(w, http.StatusBadRequest, "malformed JSON body: reading the body: "+err.Error())
		return nil, false
	case len(bytes.TrimLeft(body, " \t\r\n")) == 0:
		writeError(w, http.StatusBadRequest, "request body is empty; send a JSON object")
		return nil, false
	}
	req, err := parseToolCall(body)
	if errors.Is(err, strictjson.ErrTrailingData) {
		err = errors.New("unexpected data after the JSON object")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON body: "+err.Error())
		return nil, false
	}
	if req.Tool == "" {
		writeError(w, http.StatusBadRequest, "tool is required")
		return nil, false
	}
	return callOf(req), true
}
