package mcpgate

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
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

// refuseTooLarge audits and counts a request strictMessages refused unread
// for its size as a denied call of the caller in its session.
func (h *Handler) refuseTooLarge(r *http.Request, limit int64) {
	call := &hooks.Call{Args: map[string]any{}, SessionID: r.Header.Get("Mcp-Session-Id"), ChannelID: ChannelID}
	call.Caller = callerOf(auth.TokenInfoFromContext(r.Context()))
	call.SenderID = call.Caller.Username
	h.gw.RefuseTooLargeMCP(tracing.Extract(r.Context(), r.Header), call, limit)
}
