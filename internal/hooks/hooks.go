// Package hooks is the toolhooks enforcement core: the executor that runs an
// ordered list of hooks before and after every tool call, and the types the
// built-in hooks share. It has no Kubernetes imports; the gateway, the
// controller's validation and the offline CLI all use it.
package hooks

import (
	"context"
	"time"
)

// DenialText is the exact text the caller (the LLM) receives when a hook denies
// a call. Agents and plugins match on it, so it never changes.
const DenialText = "Tool execution denied by hook: "

// Texts returned to the caller in place of a tool's output.
const (
	UnknownToolText = "Error: Unknown tool"
	TimedOutText    = "Error: Tool execution timed out."
	FailedText      = "Error: Tool execution failed."
	CancelledText   = "Error: Tool execution cancelled by the caller."
)

// ToolError is the error of a tool call that failed in a way the caller can
// act on (a missing file, a bad argument, an upstream tool's error result):
// the executor records the call as StatusFailed and returns Text, the
// tool's own explanation, to the caller instead of FailedText.
type ToolError struct {
	// Text is what the caller receives, conventionally starting with "Error:".
	Text string
}

func (e *ToolError) Error() string { return e.Text }

// DefaultToolTimeout is the tool timeout used when none is configured.
const DefaultToolTimeout = 30 * time.Second

// EnforcementAction says what happens when a hook decides to deny.
type EnforcementAction string

const (
	// ActionDeny stops the call (the default).
	ActionDeny EnforcementAction = "Deny"
	// ActionWarn records and reports the would-be denial and lets the call proceed (dry-run).
	ActionWarn EnforcementAction = "Warn"
)

// PolicyRef names the object a hook was compiled from, so a denial can name its policy.
// The zero value means a hook that no policy object configured (a test's hook, say).
type PolicyRef struct {
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	UID        string `json:"uid,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// Call is one tool call and the hooks' context. Args is the one canonical
// parsed argument object: hooks decide on it and the tool receives it.
type Call struct {
	SessionID string
	ChannelID string
	// SenderID is the caller's username (Caller.Username) when the caller
	// was authenticated.
	SenderID      string
	CorrelationID string
	// Caller is the verified identity of whoever made the call; nil when the
	// call did not come through an authenticated API (tests, the CLI's eval).
	Caller *Identity
	Tool   string
	// Args is the parsed argument object (never nil after NewCall; {} when absent).
	Args map[string]any
	// ArgsJSON is the raw argument text as received (sent to plugins, and its length audited).
	ArgsJSON string
	// ArgsErr is set when ArgsJSON was not one JSON object; Args is then empty.
	ArgsErr error
	// Streaming is true when the agent's turn is streamed.
	Streaming bool
}

// Verdict is what a hook's before-callback returns. The executor completes it
// into a Decision with the hook's name, policy and enforcement action.
type Verdict struct {
	Allowed bool
	// Ask (with Allowed false) asks a person to approve the call instead of
	// denying it: the call runs only once an Approver grants it. Deny wins
	// over ask and ask over allow.
	Ask bool
	// Expiry bounds an Ask's request for approval (zero: the default).
	Expiry time.Duration
	// Rule is a short machine-readable name of the rule that decided (e.g. "forbiddenPathGlobs").
	Rule string
	// Reason is a human sentence explaining the decision.
	Reason string
}

// Allow is the verdict of a hook that lets a call through.
var Allow = Verdict{Allowed: true}

// Deny returns a denying verdict for rule with a human reason.
func Deny(rule, reason string) Verdict { return Verdict{Rule: rule, Reason: reason} }

// Decision is the structured outcome of the before phase, or of one hook in it.
type Decision struct {
	Allowed bool              `json:"allowed"`
	Hook    string            `json:"hook,omitempty"`
	Policy  PolicyRef         `json:"policy,omitzero"`
	Rule    string            `json:"rule,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	Action  EnforcementAction `json:"enforcementAction,omitempty"`
	// Layer is the enforcement layer that decided (see Layer).
	Layer Layer `json:"layer,omitempty"`
}

// Layer names the enforcement layer a decision came from.
type Layer string

// Layers.
const (
	// LayerStatic is the before phase: the hooks decided on the call's
	// arguments before its tool ran (the only layer for calls the agent
	// runs itself after POST /v1/decisions).
	LayerStatic Layer = "static"
	// LayerRuntime is a tool's runtime guard, at the moment it was about
	// to start a program or open a file (see RuntimeGuard).
	LayerRuntime Layer = "runtime"
	// LayerKernel is the kernel's confinement of the programs a tool
	// started (a refused open, exec or connect).
	LayerKernel Layer = "kernel"
)

// Status is the outcome of a call, as audited.
type Status string

// Call outcomes.
const (
	StatusAllowed     Status = "allowed" // before phase allowed; the caller executes the tool (Evaluate)
	StatusAsk         Status = "ask"     // a hook asked for approval and none is recorded yet (Evaluate)
	StatusDenied      Status = "denied"
	StatusSucceeded   Status = "succeeded"
	StatusFailed      Status = "failed"
	StatusTimedOut    Status = "timed_out"
	StatusCancelled   Status = "cancelled" // the caller cancelled the call while the tool ran
	StatusUnknownTool Status = "unknown_tool"
	StatusWithheld    Status = "withheld" // the tool ran; a result filter withheld its result
)

// Result is what a call produced. Hooks' after-callbacks receive it.
type Result struct {
	Status Status
	// Output is the text returned to the caller (tool output, or one of the error and denial texts above).
	Output string
	// Failed is true when the tool errored (a *ToolError included), timed
	// out or was cancelled (not when it was denied or unknown).
	Failed bool
	// Duration measures the tool only, not the hooks.
	Duration time.Duration
	// Denial is the deciding denial when Status is StatusDenied.
	Denial *Decision
	// Warnings are the would-be denials of hooks running in warn (dry-run) mode.
	Warnings []Decision
	// Ask is the decision of the hook that asked for approval, when one did.
	Ask *Decision
	// Approval is the outcome of the request for approval, when a hook asked.
	Approval *Approval
	// Withheld is the decision of the result filter that withheld the
	// tool's result when Status is StatusWithheld.
	Withheld *Decision
	// Filtering records what the result filters found in the tool's result.
	Filtering []ResultFiltering

	askExpiry time.Duration // the asking verdict's Expiry
}

// Hook is a context-aware hook. Before decides; After observes every call that
// reached the hook list (including denied ones: check res.Status). Both must be
// safe for concurrent use. A Before that returns an error or panics denies the
// call unless the hook's Entry is fail-open.
type Hook interface {
	Name() string
	Before(ctx context.Context, call *Call) (Verdict, error)
	After(ctx context.Context, call *Call, res *Result)
}

// Tool is something the executor can run. It receives the same parsed
// arguments the hooks decided on.
type Tool interface {
	Name() string
	Execute(ctx context.Context, args map[string]any) (string, error)
}

// Entry is one hook in an ordered hook list, with how it was configured.
type Entry struct {
	Hook Hook
	// Policy is the object the hook was compiled from.
	Policy PolicyRef
	// Action is Deny (default when empty) or Warn.
	Action EnforcementAction
	// FailOpen lets the call through when Before errors, panics or times out.
	FailOpen bool
}
