// Package wire declares the JSON bodies of the gateway's HTTP API and the
// reasons of the Kubernetes Events the gateway emits. It imports only the
// standard library, so that clients (the CLI, the controller, the Claude
// Code hook) share the gateway's declarations without linking the gateway.
package wire

import "encoding/json"

// ToolCallRequest is the body of POST /v1/tool-calls and POST /v1/decisions.
//
// Arguments is one JSON object, or absent or null for none. The gateway
// hands it to its executor as raw text, whose strict parser is the one
// authority. A JSON string is taken as the arguments' JSON text (the form
// of OpenAI-style function calls). Any other value (an array, a number) is
// not rejected by the decoder but denied by the executor (hook "arguments",
// rule InvalidArguments), so that the attempt is audited like every denial.
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

// DecisionRequest is a POST /v1/decisions body without the streaming flag:
// a ToolCallRequest whose Streaming is false, with the same members.
type DecisionRequest struct {
	SessionID     string          `json:"sessionId"`
	ChannelID     string          `json:"channelId"`
	SenderID      string          `json:"senderId"`
	CorrelationID string          `json:"correlationId"`
	Tool          string          `json:"tool"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
}

// ResultRequest is a POST /v1/results body: the result of a tool the caller
// ran itself (after POST /v1/decisions allowed it), to be scanned by the
// gateway's result policies before the model sees it.
type ResultRequest struct {
	SessionID string `json:"sessionId"`
	ChannelID string `json:"channelId"`
	// SenderID, when given, must be the authenticated caller's username.
	SenderID      string          `json:"senderId"`
	CorrelationID string          `json:"correlationId"`
	Tool          string          `json:"tool"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	// Result is the tool's output text.
	Result string `json:"result"`
	// Failed is true when the tool failed (Result is its error text).
	Failed bool `json:"failed,omitempty"`
}

// ResultResponse answers POST /v1/results.
type ResultResponse struct {
	// Status is succeeded or failed (as the request said), or withheld.
	Status string `json:"status"`
	// Result is what the model may see: the result with the result
	// policies' redactions, or the withheld text.
	Result string `json:"result"`
	// Withheld explains a withheld result.
	Withheld *Denial `json:"withheld,omitempty"`
	// Redactions are what each rule found (never the values).
	Redactions []Redaction `json:"redactions,omitempty"`
}

// PolicyRef names the policy object behind a denial.
type PolicyRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Denial explains a denial or a warn-mode would-deny.
type Denial struct {
	// Hook is the deciding hook's name, as in the denial text.
	Hook string `json:"hook"`
	// Policy is the object the hook was compiled from; absent for the
	// gateway's own denials (hooks "gateway", "arguments", "context").
	Policy *PolicyRef `json:"policy,omitempty"`
	// Rule is the machine-readable rule that decided.
	Rule string `json:"rule"`
	// Reason is a human explanation.
	Reason string `json:"reason"`
	// EnforcementAction is Deny or Warn.
	EnforcementAction string `json:"enforcementAction,omitempty"`
	// Layer is the enforcement layer that decided: static (the policies,
	// on the call's arguments, before the tool ran), runtime (the tool's
	// check of a program it was about to start or a file it was about to
	// open) or kernel (the confinement of the programs the tool started).
	Layer string `json:"layer,omitempty"`
}

// ToolCallResponse is the answer of POST /v1/tool-calls.
type ToolCallResponse struct {
	// Status is succeeded, failed, denied, timed_out, cancelled, withheld or
	// unknown_tool.
	Status string `json:"status"`
	// Result is the text for the model: the tool's output or the gateway's
	// own text ("Tool execution denied by hook: <hook>", "Error: ...").
	Result string `json:"result"`
	// Denial explains a denied call.
	Denial *Denial `json:"denial,omitempty"`
	// Warnings are would-be denials of hooks in warn mode.
	Warnings []Denial `json:"warnings,omitempty"`
	// Approval is the request for approval a policy made for the call, when
	// one did: its name (to retry the call once decided), state and decider.
	Approval *Approval `json:"approval,omitempty"`
	// Withheld explains a result a result policy withheld (status withheld).
	Withheld *Denial `json:"withheld,omitempty"`
	// Redactions are the rules of the result policies that matched the
	// result, how often and how many bytes (never the values).
	Redactions []Redaction `json:"redactions,omitempty"`
	// DurationMs is how long the tool ran, in milliseconds.
	DurationMs float64 `json:"durationMs"`
}

// Redaction is what one rule of a result policy found in a result.
type Redaction struct {
	// Hook is the result policy's hook name.
	Hook string `json:"hook"`
	// Rule is the rule that matched.
	Rule string `json:"rule"`
	// Action is what the rule did: Redact, Withhold or Warn (recorded only).
	Action string `json:"action"`
	// Count is how many matches; Bytes how many bytes they held.
	Count int `json:"count"`
	Bytes int `json:"bytes"`
}

// Approval is a request for a person's approval of a call (a ToolCallApproval).
type Approval struct {
	// Name is the ToolCallApproval's name, in the gateway's namespace.
	Name string `json:"name"`
	// State is Pending, Approved, Denied or Expired.
	State string `json:"state"`
	// DecidedBy is who approved or denied the call.
	DecidedBy string `json:"decidedBy,omitempty"`
	// Reason is the decider's reason.
	Reason string `json:"reason,omitempty"`
}

// Decisions of a DecisionResponse.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	DecisionAsk   = "ask"
)

// DecisionResponse is the answer of POST /v1/decisions.
type DecisionResponse struct {
	// Allowed says whether the call may run.
	Allowed bool `json:"allowed"`
	// Decision is allow, deny or ask: ask means a policy asked a person to
	// approve the call and nobody has decided yet (see Approval); the call
	// must not run until a retry of the same call is allowed.
	Decision string `json:"decision"`
	// Denial explains a denied call.
	Denial *Denial `json:"denial,omitempty"`
	// Ask names the policy and rule that asked for approval.
	Ask *Denial `json:"ask,omitempty"`
	// Approval is the request for approval, when a policy asked.
	Approval *Approval `json:"approval,omitempty"`
	// Warnings are would-be denials of hooks in warn mode.
	Warnings []Denial `json:"warnings,omitempty"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// ReadyResponse is the body of GET /readyz.
type ReadyResponse struct {
	// Ready is true when a configuration holding a policy is in force, the
	// audit sink is writing and the state store (if any) answers.
	Ready bool `json:"ready"`
	// Revision is the configuration in force.
	Revision string `json:"revision,omitempty"`
	// Reason says why the gateway is not ready.
	Reason string `json:"reason,omitempty"`
	// Sandbox describes how the processes tools start are confined, e.g.
	// "landlock ABI 7, network denied (no TCP bind or connect)", "off: ..."
	// or "unavailable: ..." (tools refused).
	Sandbox string `json:"sandbox,omitempty"`
	// AnonymousCallers is true when callers without a token are accepted
	// (as system:anonymous).
	AnonymousCallers bool `json:"anonymousCallers,omitempty"`
	// StateStore describes where the contracts' counters live and whether
	// that store answers, e.g. "redis redis://10.0.0.7:6379/0: ready" or
	// "in-process (exact within this gateway only)".
	StateStore string `json:"stateStore,omitempty"`
}

// ConfigStatus describes the configuration in force: the body of
// GET /v1/config, which the controller reads to decide whether to push.
type ConfigStatus struct {
	// Revision is the configuration's content hash; empty before the first one.
	Revision string `json:"revision"`
	// IssuedAt is when its pusher issued it (Unix nanoseconds).
	IssuedAt int64 `json:"issuedAt"`
	// Hooks is the length of its hook list.
	Hooks int `json:"hooks"`
	// Degraded names the plugin hooks currently not being called after
	// repeated failures; the controller reports them on the PluginHooks'
	// Degraded condition.
	Degraded []string `json:"degraded,omitempty"`
}

// Reasons of the Events the gateway records on the policy object that
// decided a call.
const (
	// ReasonToolCallDenied marks a denial (a Warning Event).
	ReasonToolCallDenied = "ToolCallDenied"
	// ReasonToolCallWarned marks a warn-mode would-deny (a Normal Event).
	ReasonToolCallWarned = "ToolCallWarned"
	// ReasonToolResultRedacted marks a result a ResultPolicy redacted (a
	// Normal Event naming the rules, counts and bytes, never the values).
	ReasonToolResultRedacted = "ToolResultRedacted"
	// ReasonToolResultWithheld marks a result a ResultPolicy withheld (a
	// Warning Event).
	ReasonToolResultWithheld = "ToolResultWithheld"
	// ReasonToolResultWarned marks findings a ResultPolicy only recorded (its
	// rules' action Warn, or the policy in warn mode; a Normal Event).
	ReasonToolResultWarned = "ToolResultWarned"
	// ReasonToolCallApprovalRequested marks a gateway's request for a
	// person's approval of a call (a Normal Event on the ToolCallApproval and
	// on the asking policy).
	ReasonToolCallApprovalRequested = "ToolCallApprovalRequested"
)

// Reasons of the Events the controller records on a ToolCallApproval and on
// the policy that asked for it, once per decision.
const (
	// ReasonToolCallApprovalApproved marks an approval (a Normal Event).
	ReasonToolCallApprovalApproved = "ToolCallApprovalApproved"
	// ReasonToolCallApprovalDenied marks a denial by a person (a Warning Event).
	ReasonToolCallApprovalDenied = "ToolCallApprovalDenied"
	// ReasonToolCallApprovalExpired marks a request nobody decided in time (a Warning Event).
	ReasonToolCallApprovalExpired = "ToolCallApprovalExpired"
)
