package gateway

import (
	"encoding/json"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// ToolCallRequest is the body of POST /v1/tool-calls and POST /v1/decisions.
//
// Arguments is one JSON object, or absent or null for none. It is handed to
// the executor as raw text, so that the executor's strict parser (one object,
// valid UTF-8, no duplicate keys) is the one authority and the hooks and the
// tool see the same parsed value. A JSON string is taken as the arguments'
// JSON text (the form of OpenAI-style function calls). Any other value (an
// array, a number) is not rejected here but denied by the executor (hook
// "arguments", rule InvalidArguments), so that the attempt is audited and
// counted like every other denial.
type ToolCallRequest struct {
	SessionID string `json:"sessionId"`
	ChannelID string `json:"channelId"`
	// SenderID, when given, must be the authenticated caller's username
	// (the call's sender is always that caller); another name is answered 400.
	SenderID      string          `json:"senderId"`
	CorrelationID string          `json:"correlationId"`
	Tool          string          `json:"tool"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	Streaming     bool            `json:"streaming"`
}

// call converts the request into the executor's Call.
func (r *ToolCallRequest) call() *hooks.Call {
	args := string(r.Arguments)
	switch {
	case args == "null":
		args = ""
	case len(args) > 0 && args[0] == '"':
		var s string
		if err := json.Unmarshal(r.Arguments, &s); err == nil {
			args = s
		}
	}
	c := hooks.NewCall(r.Tool, args)
	c.SessionID, c.ChannelID, c.SenderID, c.CorrelationID = r.SessionID, r.ChannelID, r.SenderID, r.CorrelationID
	c.Streaming = r.Streaming
	return c
}

// PolicyRef names the policy object behind a denial.
type PolicyRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Denial explains a denial or a warn-mode would-deny.
type Denial struct {
	// Hook is the deciding hook's name (as in the seed's denial text).
	Hook string `json:"hook"`
	// Policy is the object the hook was compiled from; absent for the
	// gateway's own denials (hooks "gateway", "arguments", "context") and
	// for native hooks' (Options.Native).
	Policy *PolicyRef `json:"policy,omitempty"`
	// Rule is the machine-readable rule that decided.
	Rule string `json:"rule"`
	// Reason is a human explanation.
	Reason string `json:"reason"`
	// EnforcementAction is Deny or Warn.
	EnforcementAction string `json:"enforcementAction,omitempty"`
}

// ToolCallResponse is the answer of POST /v1/tool-calls.
type ToolCallResponse struct {
	// Status is succeeded, failed, denied, timed_out or unknown_tool.
	Status string `json:"status"`
	// Result is the text for the LLM: the tool's output or a seed text
	// ("Tool execution denied by hook: <hook>", "Error: ...").
	Result string `json:"result"`
	// Denial explains a denied call.
	Denial *Denial `json:"denial,omitempty"`
	// Warnings are would-be denials of hooks in warn mode.
	Warnings []Denial `json:"warnings,omitempty"`
	// DurationMs is how long the tool ran, in milliseconds.
	DurationMs float64 `json:"durationMs"`
}

// DecisionResponse is the answer of POST /v1/decisions.
type DecisionResponse struct {
	Allowed  bool     `json:"allowed"`
	Denial   *Denial  `json:"denial,omitempty"`
	Warnings []Denial `json:"warnings,omitempty"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// ReadyResponse is the body of /readyz.
type ReadyResponse struct {
	Ready    bool   `json:"ready"`
	Revision string `json:"revision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Sandbox describes how the processes tools start are confined, e.g.
	// "landlock ABI 7, network denied (no TCP bind or connect)", "off: ..."
	// or "unavailable: ..." (tools refused).
	Sandbox string `json:"sandbox,omitempty"`
	// AnonymousCallers is true when callers without a token are accepted
	// (as system:anonymous).
	AnonymousCallers bool `json:"anonymousCallers,omitempty"`
}

func denialOf(d *hooks.Decision) *Denial {
	if d == nil {
		return nil
	}
	out := &Denial{Hook: d.Hook, Rule: d.Rule, Reason: d.Reason, EnforcementAction: string(d.Action)}
	if d.Policy.Kind != "" || d.Policy.Name != "" {
		out.Policy = &PolicyRef{Kind: d.Policy.Kind, Namespace: d.Policy.Namespace, Name: d.Policy.Name}
	}
	return out
}

func warningsOf(ws []hooks.Decision) []Denial {
	if len(ws) == 0 {
		return nil
	}
	out := make([]Denial, len(ws))
	for i := range ws {
		out[i] = *denialOf(&ws[i])
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
