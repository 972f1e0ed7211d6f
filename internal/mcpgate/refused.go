package mcpgate

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/tracing"
)

// auditUnknownTools runs a tools/call of a tool the endpoint does not serve
// through the gateway's executor, as POST /v1/tool-calls does: nothing runs,
// and the call is audited and counted as unknown_tool. The answer stays the
// go-sdk's JSON-RPC error (-32602, `unknown tool "<name>"`), the protocol
// error MCP specifies for an unknown tool, which clients report with the
// tool's name rather than as the tool's own failure. Before any
// configuration the executor denies every call, and the denial is answered
// like any other.
func (h *Handler) auditUnknownTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		creq, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || creq.Params == nil || h.serves(creq.Params.Name) {
			return next(ctx, method, req)
		}
		res := h.gw.ExecuteMCP(ctx, callOf(creq))
		if res.Status != hooks.StatusUnknownTool {
			return toResult(&res, nil, false), nil
		}
		return next(ctx, method, req)
	}
}

// refusal is what the middlewares of the endpoint that refused a request
// note of it for auditRefusals: why (nil: said by the answer's status) and
// the verified caller, when authentication got that far.
type refusal struct {
	why    error
	caller *hooks.Identity
	// noCall is set when the body was read and holds no tools/call.
	noCall bool
}

type refusalKey struct{}

// noteRefusal says why r is refused, for auditRefusals.
func noteRefusal(r *http.Request, why error) {
	if n, ok := r.Context().Value(refusalKey{}).(*refusal); ok && n.why == nil {
		n.why = why
	}
}

// noteNoCall records that r's body holds no tools/call, for auditRefusals.
func noteNoCall(r *http.Request) {
	if n, ok := r.Context().Value(refusalKey{}).(*refusal); ok {
		n.noCall = true
	}
}

// noteCaller records r's verified caller, for auditRefusals.
func noteCaller(r *http.Request, id *hooks.Identity) {
	if n, ok := r.Context().Value(refusalKey{}).(*refusal); ok {
		n.caller = id
	}
}

// maxRefusalText bounds how much of a refusal's answer its audit record keeps.
const maxRefusalText = 300

// auditRefusals audits every POST the endpoint answers with an HTTP error
// status (a foreign origin, no or an invalid token, a body over the limit or
// not one JSON-RPC message, no or an unknown session, ...), whatever refused
// it (this package's middlewares or the MCP SDK), as one denied call (hook
// "request", or "arguments" for a body over the limit) of the caller if it
// was verified, in the request's session: nothing was read as a call, so it
// names no tool. Not audited, since they are no calls: other methods (the
// GET of a session's stream, DELETE, preflights) and a POST whose body was
// read and holds methods other than tools/call alone (initialize, whose
// protocol version the client negotiates with a 400, ping,
// notifications). Calls the endpoint reads (answered with a JSON-RPC
// result or error) are audited by the executor instead.
func (h *Handler) auditRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		note := &refusal{}
		rw := &refusalWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), refusalKey{}, note)))
		if rw.status < http.StatusBadRequest || note.noCall {
			return
		}
		why := note.why
		if why == nil {
			text := strings.TrimSpace(rw.text.String())
			if len(text) > maxRefusalText {
				text = text[:maxRefusalText] + "…"
			}
			why = &hooks.Refusal{Rule: refusalRule(rw.status),
				Err: fmt.Errorf("the MCP endpoint answered %d %s: %s", rw.status, http.StatusText(rw.status), text)}
		}
		call := &hooks.Call{Args: map[string]any{}, SessionID: r.Header.Get("Mcp-Session-Id"), ChannelID: ChannelID}
		if note.caller != nil {
			call.Caller, call.SenderID = note.caller, note.caller.Username
		}
		h.gw.RefuseMCP(tracing.Extract(r.Context(), r.Header), call, why)
	})
}

// refusalRule is the rule of a refusal known only by its answer's status.
func refusalRule(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return hooks.RuleUnauthenticated
	case http.StatusForbidden:
		return hooks.RuleForbidden
	default:
		return hooks.RuleMalformedRequest
	}
}

// refusalWriter records the status of an answer and the start of an
// error answer's text.
type refusalWriter struct {
	http.ResponseWriter
	status int
	text   bytes.Buffer
}

func (w *refusalWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusalWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= http.StatusBadRequest && w.text.Len() <= maxRefusalText {
		w.text.Write(b[:min(len(b), maxRefusalText+1)])
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the answer (server-sent events).
func (w *refusalWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
