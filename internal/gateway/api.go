package gateway

import (
	"encoding/json"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// callOf converts a request into the executor's Call.
func callOf(r *wire.ToolCallRequest) *hooks.Call {
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

func denialOf(d *hooks.Decision) *wire.Denial {
	if d == nil {
		return nil
	}
	out := &wire.Denial{Hook: d.Hook, Rule: d.Rule, Reason: d.Reason, EnforcementAction: string(d.Action), Layer: string(d.Layer)}
	if d.Policy.Kind != "" || d.Policy.Name != "" {
		out.Policy = &wire.PolicyRef{Kind: d.Policy.Kind, Namespace: d.Policy.Namespace, Name: d.Policy.Name}
	}
	return out
}

// approvalOf is the wire form of a call's request for approval.
func approvalOf(a *hooks.Approval) *wire.Approval {
	if a == nil {
		return nil
	}
	return &wire.Approval{Name: a.Name, State: string(a.State), DecidedBy: a.DecidedBy, Reason: a.Reason}
}

// decisionOf is allow, deny or ask for res.
func decisionOf(res *hooks.Result) string {
	switch res.Status {
	case hooks.StatusAllowed:
		return wire.DecisionAllow
	case hooks.StatusAsk:
		return wire.DecisionAsk
	}
	return wire.DecisionDeny
}

// decisionResponse is the answer of POST /v1/decisions for res.
func decisionResponse(res *hooks.Result) wire.DecisionResponse {
	return wire.DecisionResponse{
		Allowed:  res.Status == hooks.StatusAllowed,
		Decision: decisionOf(res),
		Denial:   denialOf(res.Denial),
		Ask:      denialOf(res.Ask),
		Approval: approvalOf(res.Approval),
		Warnings: warningsOf(res.Warnings),
	}
}

func warningsOf(ws []hooks.Decision) []wire.Denial {
	if len(ws) == 0 {
		return nil
	}
	out := make([]wire.Denial, len(ws))
	for i := range ws {
		out[i] = *denialOf(&ws[i])
	}
	return out
}

// redactionsOf lists what the result filters found, rule by rule.
func redactionsOf(fs []hooks.ResultFiltering) []wire.Redaction {
	var out []wire.Redaction
	for _, f := range fs {
		for _, x := range f.Findings {
			action := x.Action
			if f.Warn {
				action = string(hooks.ActionWarn)
			}
			out = append(out, wire.Redaction{Hook: f.Hook, Rule: x.Rule, Action: action, Count: x.Count, Bytes: x.Bytes})
		}
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
