package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodCallTool is MCP's tools/call.
const methodCallTool = "tools/call"

// serverMethods are the client-to-server methods and notifications go-sdk
// v1.8.0's server handles (its serverMethodInfos); any other is unknown.
var serverMethods = []string{
	"completion/complete", "server/discover", "initialize", "ping",
	"prompts/list", "prompts/get", "tools/list", methodCallTool,
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"logging/setLevel", "subscriptions/listen",
	"notifications/cancelled", "notifications/initialized", "notifications/roots/list_changed", "notifications/progress",
}

// sessionlessMethods may come without an Mcp-Session-Id: initialize opens a
// session, and go-sdk clients probe with server/discover before it.
var sessionlessMethods = []string{"initialize", "server/discover"}

// protocolVersions are the protocol versions the endpoint negotiates: the
// SDK's, without those (2026-07-28 and later) that only its stateless
// transport serves. Handing them to the server makes the SDK's answer to an
// unsupported MCP-Protocol-Version header and server/discover list the same
// versions.
func protocolVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026-07-28" })
}

// integerID is the text of a JSON number that is an integer.
var integerID = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// peeked is what protocolEdges reads of a POSTed message.
type peeked struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// protocolEdges answers, in front of the SDK, the requests go-sdk v1.8.0
// answers in ways clients trip over, and ends cancelled calls without an
// answer:
//   - a body that is not JSON: HTTP 400, JSON-RPC -32700 (the SDK: text);
//   - a batch: HTTP 400, -32600, whatever the MCP-Protocol-Version header
//     says (the SDK accepts batches when the header is absent; every version
//     it negotiates but 2025-03-26 forbids them, and no client sends them);
//   - an id that is neither a string nor an integer (1.5, 1e3, null, true):
//     HTTP 400, -32600 (the SDK truncated 1.5 and answered it as 1);
//   - an unknown method: JSON-RPC -32601 for a request, HTTP 202 and no
//     answer for a notification (the SDK: HTTP 400 text);
//   - a request other than initialize and server/discover without an
//     Mcp-Session-Id: HTTP 400, -32600 (the SDK opened a session for it and
//     answered with error code 0).
//
// A tools/call's POST stays registered while it runs: a
// notifications/cancelled naming it ends that POST with HTTP 202 and no
// JSON-RPC response (the SDK writes one for every cancelled request), before
// the SDK cancels the call's context, so the executor audits it cancelled.
func (c *cancellations) protocolEdges(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v < "2026-07-28" && !slices.Contains(c.versions, v) {
			next.ServeHTTP(w, r) // the SDK refuses it first, listing the versions it negotiates
			return
		}
		body, err := io.ReadAll(r.Body) // strictMessages bounded it
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if len(trimmed) > 0 && trimmed[0] == '[' {
			rpcError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				"JSON-RPC batches are not supported: send one message per request")
			return
		}
		var m peeked
		if err := json.Unmarshal(body, &m); err != nil {
			rpcError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "the body is not one JSON-RPC message: "+err.Error())
			return
		}
		if m.Method == "" { // a response to a request of the server's
			next.ServeHTTP(w, r)
			return
		}
		isCall := len(m.ID) > 0
		id, ok := validID(m.ID)
		if isCall && !ok {
			rpcError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				"invalid request id "+string(m.ID)+": an id is a string or an integer")
			return
		}
		sid := r.Header.Get("Mcp-Session-Id")
		switch {
		case !slices.Contains(serverMethods, m.Method):
			if !isCall {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			rpcError(w, http.StatusOK, id, jsonrpc.CodeMethodNotFound, "method not found: "+m.Method)
			return
		case sid == "" && !slices.Contains(sessionlessMethods, m.Method):
			rpcError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest,
				"Bad Request: no Mcp-Session-Id header: send initialize first and then the session id it returns")
			return
		case m.Method == "notifications/cancelled" && sid != "":
			c.cancel(sid, m.Params.RequestID)
		case m.Method == methodCallTool && sid != "" && isCall:
			c.serveCall(w, r, next, callKey{session: sid, id: string(compact(m.ID))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxExactID is the largest integer id the SDK, which reads numeric ids as
// float64, keeps apart from its neighbours (2^53-1): a larger one could be
// answered, or cancelled, as another request.
const maxExactID = 1<<53 - 1

// validID reports whether raw, a request's id, is a string or an integer
// within ±maxExactID.
func validID(raw json.RawMessage) (jsonrpc.ID, bool) {
	if len(raw) == 0 {
		return jsonrpc.ID{}, false
	}
	var v any
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return jsonrpc.ID{}, false
		}
		v = s
	default:
		if !integerID.Match(raw) {
			return jsonrpc.ID{}, false
		}
		var n int64
		if json.Unmarshal(raw, &n) != nil || n > maxExactID || n < -maxExactID {
			return jsonrpc.ID{}, false
		}
		v = float64(n) // how the SDK reads a numeric id
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// rpcError answers with a JSON-RPC error.
func rpcError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	writeRPCError(w, status, id, &jsonrpc.Error{Code: code, Message: msg})
}

// writeRPCError answers with the JSON-RPC error e.
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	if err != nil {
		http.Error(w, e.Message, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// callKey names a tools/call in flight: its session and its id's JSON text.
type callKey struct{ session, id string }

// cancellations are the tools/call POSTs in flight, by session and id.
type cancellations struct {
	versions []string // protocolVersions

	mu    sync.Mutex
	calls map[callKey]*cancellableWriter
}

func newCancellations() *cancellations {
	return &cancellations{versions: protocolVersions(), calls: map[callKey]*cancellableWriter{}}
}

// serveCall serves a tools/call's POST, registered under k while it runs.
func (c *cancellations) serveCall(w http.ResponseWriter, r *http.Request, next http.Handler, k callKey) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cw := &cancellableWriter{ResponseWriter: w, cancel: cancel}
	c.mu.Lock()
	if _, dup := c.calls[k]; dup { // the SDK refuses a duplicate id in flight itself
		c.mu.Unlock()
		next.ServeHTTP(w, r)
		return
	}
	c.calls[k] = cw
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, k)
		c.mu.Unlock()
	}()
	next.ServeHTTP(cw, r.WithContext(ctx))
	cw.finish()
}

// cancel ends the POST of the call requestID of session sid, if it is in
// flight and has not begun to answer.
func (c *cancellations) cancel(sid string, requestID json.RawMessage) {
	if len(requestID) == 0 {
		return
	}
	c.mu.Lock()
	cw := c.calls[callKey{session: sid, id: string(compact(requestID))}]
	c.mu.Unlock()
	if cw != nil {
		cw.cancelCall()
	}
}

// cancellableWriter is the response of a tools/call's POST. Once the call
// is cancelled (before anything was written), everything written is dropped
// and the POST ends with HTTP 202 and no body.
type cancellableWriter struct {
	http.ResponseWriter
	cancel context.CancelFunc

	mu        sync.Mutex
	started   bool // something was written
	cancelled bool
}

func (cw *cancellableWriter) cancelCall() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.started || cw.cancelled {
		return
	}
	cw.cancelled = true
	cw.cancel() // ends the SDK's wait for the response
}

func (cw *cancellableWriter) WriteHeader(code int) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.cancelled {
		return
	}
	cw.started = true
	cw.ResponseWriter.WriteHeader(code)
}

func (cw *cancellableWriter) Write(b []byte) (int, error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.cancelled {
		return len(b), nil
	}
	cw.started = true
	return cw.ResponseWriter.Write(b)
}

func (cw *cancellableWriter) Flush() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.cancelled {
		return
	}
	if f, ok := cw.ResponseWriter.(http.Flusher); ok {
		cw.started = true
		f.Flush()
	}
}

func (cw *cancellableWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// finish ends a cancelled call's POST: 202, no body.
func (cw *cancellableWriter) finish() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.cancelled {
		h := cw.Header()
		h.Del("Content-Type")
		h.Del("Mcp-Session-Id")
		cw.ResponseWriter.WriteHeader(http.StatusAccepted)
	}
}
