package plugins

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// Methods and event names of the plugin protocol.
const (
	methodBefore = "hook_before"
	methodAfter  = "hook_after"
	eventBefore  = "tool:before"
	eventAfter   = "tool:after"
)

// maxReplyBytes bounds one reply (a line over stdio, a body over HTTP).
const maxReplyBytes = 1 << 20

// maxReasonBytes bounds the reason a plugin gives for a denial.
const maxReasonBytes = 1024

// request is one protocol request. ID is a decimal string.
type request struct {
	Method string  `json:"method"`
	ID     string  `json:"id"`
	Params *params `json:"params"`
}

// params are the parameters of hook_before and hook_after (camelCase).
type params struct {
	EventName     string `json:"eventName"`
	ToolName      string `json:"toolName"`
	Arguments     string `json:"arguments"`
	SessionID     string `json:"sessionId"`
	ChannelID     string `json:"channelId"`
	SenderID      string `json:"senderId"`
	CorrelationID string `json:"correlationId"`
	// After only.
	Result     *string  `json:"result,omitempty"`
	DurationMs *float64 `json:"durationMs,omitempty"`
	Failed     *bool    `json:"failed,omitempty"`
}

// rpcError is the error member of a reply.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// reply is one protocol reply.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// encodeRequest returns the JSON text of a request (without a newline).
func encodeRequest(method string, id uint64, p *params) ([]byte, error) {
	return json.Marshal(request{Method: method, ID: strconv.FormatUint(id, 10), Params: p})
}

// parseID reads a reply id sent as a decimal string or number.
func parseID(raw json.RawMessage) (uint64, bool) {
	s := bytes.TrimSpace(raw)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	id, err := strconv.ParseUint(string(s), 10, 64)
	return id, err == nil
}

// outcome interprets a reply: its result, or a pluginError for an error reply.
func (r *reply) outcome() (json.RawMessage, error) {
	if r.Error != nil {
		return nil, fail(KindError, "the plugin replied with error %d: %s", r.Error.Code, clip(r.Error.Message, maxReasonBytes))
	}
	return r.Result, nil
}

// verdictReply is the object form of a hook_before result.
type verdictReply struct {
	Allow  *bool   `json:"allow"`
	Reason *string `json:"reason"`
}

// parseVerdict turns a hook_before result into a verdict. It accepts a bare
// boolean or {allow: boolean, reason?: string}; anything else is a
// pluginBadReply.
func parseVerdict(hook string, raw json.RawMessage) (hooks.Verdict, error) {
	s := bytes.TrimSpace(raw)
	var v verdictReply
	switch {
	case bytes.Equal(s, []byte("true")):
		return hooks.Allow, nil
	case bytes.Equal(s, []byte("false")):
		return deniedVerdict(hook, ""), nil
	case len(s) == 0:
		return hooks.Verdict{}, fail(KindBadReply, "the reply has no result")
	case s[0] != '{':
		return hooks.Verdict{}, fail(KindBadReply, "the result %s is neither a boolean nor an object", clip(string(s), 64))
	}
	if err := strictjson.UnmarshalOpen(s, &v); err != nil {
		return hooks.Verdict{}, fail(KindBadReply, "the result is not {allow: boolean, reason?: string}: %w", err)
	}
	if v.Allow == nil {
		return hooks.Verdict{}, fail(KindBadReply, "the result has no boolean allow")
	}
	if *v.Allow {
		return hooks.Allow, nil
	}
	reason := ""
	if v.Reason != nil {
		reason = *v.Reason
	}
	return deniedVerdict(hook, reason), nil
}

// deniedVerdict is the verdict of a plugin that denied, with its reason or a default one.
func deniedVerdict(hook, reason string) hooks.Verdict {
	if reason == "" {
		reason = "Plugin " + hook + " denied the call"
	}
	return hooks.Deny(RuleDenied, clip(reason, maxReasonBytes))
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
