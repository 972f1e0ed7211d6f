package claudehook

import "encoding/json"

// The gateway's /v1/decisions wire format (internal/gateway's
// ToolCallRequest, DecisionResponse, Denial and ErrorResponse), declared
// here so that the plugin does not link the gateway server and its metrics
// into every hook process. The tests run against the real gateway, whose
// request decoding rejects unknown fields, so a drift fails them.

// decisionRequest is the body of POST /v1/decisions.
type decisionRequest struct {
	SessionID     string          `json:"sessionId"`
	ChannelID     string          `json:"channelId"`
	SenderID      string          `json:"senderId"`
	CorrelationID string          `json:"correlationId"`
	Tool          string          `json:"tool"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
}

// Decision is the gateway's answer.
type Decision struct {
	Allowed  bool     `json:"allowed"`
	Denial   *Denial  `json:"denial,omitempty"`
	Warnings []Denial `json:"warnings,omitempty"`
}

// Denial explains a denial or a warn-mode would-deny.
type Denial struct {
	Hook   string     `json:"hook"`
	Policy *PolicyRef `json:"policy,omitempty"`
	Rule   string     `json:"rule"`
	Reason string     `json:"reason"`
}

// PolicyRef names the policy object behind a denial.
type PolicyRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// errorResponse is the body of the gateway's 4xx and 5xx answers.
type errorResponse struct {
	Error string `json:"error"`
}
