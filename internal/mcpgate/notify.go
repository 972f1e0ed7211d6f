package mcpgate

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// methodToolListChanged is the notification telling a client to list the tools again.
const methodToolListChanged = "notifications/tools/list_changed"

// listWatch sends notifications/tools/list_changed to exactly the open
// sessions whose tools/list answer changed: after a configuration change
// (gateway.Server.WatchConfig) and after an upstream's tool list changed.
//
// It remembers, per session, what its last tools/list showed. A recheck
// recomputes each answer for the session's caller and marks the sessions
// whose answer differs. go-sdk v1.8.0 has no way to send one session a
// list_changed notification; it sends one to every session when the
// server's tools change. So a recheck that marked any re-adds a tool
// unchanged (which makes the SDK send its notification, debounced, to every
// session) and the sending middleware only lets through the notifications
// of marked sessions.
type listWatch struct {
	h    *Handler
	sent prometheus.Counter

	mu      sync.Mutex
	seen    map[*mcp.ServerSession]seenList
	pending map[*mcp.ServerSession]bool
	// pruneAt is the size of seen at which saw drops the sessions that
	// ended, so that it stays bounded without configuration changes too.
	pruneAt int
}

// seenList is what a session's last tools/list showed, and for whom.
type seenList struct {
	caller hooks.Call
	print  string
}

func newListWatch(h *Handler, reg prometheus.Registerer) (*listWatch, error) {
	lw := &listWatch{h: h, seen: map[*mcp.ServerSession]seenList{}, pending: map[*mcp.ServerSession]bool{},
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolhooks_mcp_tools_list_changed_total",
			Help: "notifications/tools/list_changed sent to MCP sessions whose tools/list answer changed.",
		})}
	if err := reg.Register(lw.sent); err != nil {
		return nil, err
	}
	return lw, nil
}

// fingerprint identifies a tools/list answer: the tools' names and
// descriptions (which carry the denial mark), in name order.
func fingerprint(tools []*mcp.Tool) string {
	lines := make([]string, len(tools))
	for i, t := range tools {
		lines[i] = t.Name + "\x00" + t.Description
	}
	slices.Sort(lines)
	return strings.Join(lines, "\x01")
}

// saw records the answer a session's tools/list got.
func (lw *listWatch) saw(ss *mcp.ServerSession, caller *hooks.Call, tools []*mcp.Tool) {
	if ss == nil {
		return
	}
	lw.mu.Lock()
	lw.seen[ss] = seenList{caller: *caller, print: fingerprint(tools)}
	prune := len(lw.seen) >= lw.pruneAt
	lw.mu.Unlock()
	if prune {
		live := lw.live()
		lw.mu.Lock()
		lw.forgetEnded(live)
		lw.pruneAt = 2*len(lw.seen) + 64
		lw.mu.Unlock()
	}
}

// live are the sessions open.
func (lw *listWatch) live() map[*mcp.ServerSession]bool {
	live := map[*mcp.ServerSession]bool{}
	for ss := range lw.h.server.Sessions() {
		live[ss] = true
	}
	return live
}

// forgetEnded drops the sessions not in live; lw.mu is held.
func (lw *listWatch) forgetEnded(live map[*mcp.ServerSession]bool) {
	for ss := range lw.seen {
		if !live[ss] {
			delete(lw.seen, ss)
			delete(lw.pending, ss)
		}
	}
}

// recheck marks the sessions whose tools/list answer changed and has the
// SDK notify them.
func (lw *listWatch) recheck() {
	live := lw.live()
	tools := lw.h.descriptors()
	lw.mu.Lock()
	lw.forgetEnded(live)
	marked := false
	for ss, s := range lw.seen {
		print := fingerprint(lw.h.visible(tools, &s.caller))
		if print != s.print {
			s.print = print
			lw.seen[ss] = s
			lw.pending[ss] = true
			marked = true
		}
	}
	lw.mu.Unlock()
	if marked && len(tools) > 0 {
		lw.h.server.AddTool(tools[0], lw.h.callTool) // unchanged: only to make the SDK notify
	}
}

// only is a sending middleware that drops the list_changed notifications
// of sessions recheck did not mark.
func (lw *listWatch) only(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodToolListChanged {
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		lw.mu.Lock()
		marked := lw.pending[ss]
		delete(lw.pending, ss)
		lw.mu.Unlock()
		if !marked {
			return nil, nil
		}
		lw.sent.Inc()
		return next(ctx, method, req)
	}
}

// upstreamToolsChanged takes an upstream's new tool list: its tools that
// the gateway serves are updated (a changed description or schema) or, when
// the upstream no longer offers them, no longer listed (their calls fail, see
// upstream.relist); then the sessions whose lists changed are notified.
func (h *Handler) upstreamToolsChanged(u *upstream, listed []*mcp.Tool) {
	h.descsMu.Lock()
	var gone []string
	for _, t := range u.listed {
		name := u.cfg.Name + "_" + t.Name
		i := slices.IndexFunc(h.descs, func(d *mcp.Tool) bool { return d.Name == name })
		j := slices.IndexFunc(listed, func(l *mcp.Tool) bool { return l.Name == t.Name })
		switch {
		case j < 0 && i >= 0:
			h.descs = slices.Delete(h.descs, i, i+1)
			gone = append(gone, name)
		case j >= 0:
			desc := *listed[j]
			desc.Name = name
			if i >= 0 {
				h.descs[i] = &desc
			} else {
				h.descs = append(h.descs, &desc)
			}
			h.server.AddTool(&desc, h.callTool)
		}
	}
	h.descsMu.Unlock()
	if len(gone) > 0 {
		h.server.RemoveTools(gone...)
	}
	h.lists.recheck()
}
