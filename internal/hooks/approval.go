package hooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Rules the executor puts into decisions about calls a hook asked a person
// to approve.
const (
	// RuleApprovalPending: the call waits for a decision that did not come in
	// time; retrying the same call gets the recorded decision.
	RuleApprovalPending = "approvalPending"
	// RuleApprovalDenied: a person denied the call.
	RuleApprovalDenied = "approvalDenied"
	// RuleApprovalExpired: nobody decided the call before its request expired.
	RuleApprovalExpired = "approvalExpired"
	// RuleApprovalUnavailable: a hook asked for approval and the approval
	// could not be requested or read (no approver configured, or its store
	// failed); the call is denied.
	RuleApprovalUnavailable = "approvalUnavailable"
)

// ApprovalHookName is the pseudo-hook an approval's outcome denies as when no
// asking hook can be named.
const ApprovalHookName = "approval"

// DefaultApprovalExpiry is how long a request for approval stays open when
// the asking rule does not say.
const DefaultApprovalExpiry = 10 * time.Minute

// MaxApprovalExpiry bounds every request's expiry.
const MaxApprovalExpiry = 24 * time.Hour

// ApprovalState is where a request for approval stands.
type ApprovalState string

// Approval states.
const (
	// ApprovalPending: nobody decided yet.
	ApprovalPending ApprovalState = "Pending"
	// ApprovalApproved: a person approved the call and this call used the
	// approval (it admits no other).
	ApprovalApproved ApprovalState = "Approved"
	// ApprovalDenied: a person denied the call.
	ApprovalDenied ApprovalState = "Denied"
	// ApprovalExpired: nobody decided in time.
	ApprovalExpired ApprovalState = "Expired"
)

// ApprovalRequest is a call a hook asked a person to approve.
type ApprovalRequest struct {
	Call *Call
	// Ask is the asking hook's decision (hook, policy, rule and reason).
	Ask Decision
	// Expiry is how long the request stays open (DefaultApprovalExpiry when zero).
	Expiry time.Duration
	// Wait says to wait for a decision (up to the approver's own bound) when
	// none is recorded; otherwise the approver answers at once.
	Wait bool
}

// Approval is the outcome of an ApprovalRequest.
type Approval struct {
	// Name identifies the request (a ToolCallApproval's name) so that the
	// caller can point a person at it and retry the same call.
	Name  string        `json:"name"`
	State ApprovalState `json:"state"`
	// DecidedBy is the person who approved or denied the call.
	DecidedBy string `json:"decidedBy,omitempty"`
	// Reason is the decider's reason.
	Reason string `json:"reason,omitempty"`
}

// Approver records requests for approval and their decisions. A grant is
// exact and single-use: RequestApproval returns ApprovalApproved for at most
// one call per approved request, and only for a call with the same sender,
// session, tool and ArgumentsDigest. An error denies the call.
type Approver interface {
	RequestApproval(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// WithApprover sets who decides calls a hook asks about. Without one, such
// calls are denied (rule approvalUnavailable).
func WithApprover(a Approver) Option {
	return func(e *Executor) { e.approver = a }
}

// AskFor returns a verdict asking a person to approve the call, for rule with
// a human reason; expiry bounds the request (zero: DefaultApprovalExpiry).
func AskFor(rule, reason string, expiry time.Duration) Verdict {
	return Verdict{Ask: true, Rule: rule, Reason: reason, Expiry: expiry}
}

// ArgumentsDigest is "sha256:" and the hex SHA-256 of the call's canonical
// arguments: its Args as JSON with sorted keys, so that the same arguments
// sent with other spacing or key order have the same digest.
func ArgumentsDigest(call *Call) string {
	b, err := json.Marshal(call.Args)
	if err != nil {
		// Args come from JSON and always marshal; hash the raw text otherwise.
		b = []byte(call.ArgsJSON)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
