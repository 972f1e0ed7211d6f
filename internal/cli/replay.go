package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// LoggedCall is one call read from a decision log: the gateway's audit
// records of calls (message audit.Message) written with the decision log on.
type LoggedCall struct {
	// Source is "file:line".
	Source  string `json:"source"`
	Tool    string `json:"tool"`
	Session string `json:"sessionId,omitempty"`
	Channel string `json:"channelId,omitempty"`
	Sender  string `json:"senderId,omitempty"`
	// Arguments is the masked canonical arguments text ("" when omitted).
	Arguments string `json:"arguments,omitempty"`
	// Masked are the JSON Pointers of the arguments masked in the log.
	Masked []string `json:"maskedArguments,omitempty"`

	senderUID    string
	senderGroups []string
	omitted      string
	recorded     Outcome
	approved     bool // a person approved the call and it ran
}

// Outcome is a call's decision on one side of a replay.
type Outcome struct {
	// Decision is "allowed", "denied" or "ask".
	Decision string          `json:"decision"`
	Hook     string          `json:"hook,omitempty"`
	Policy   *wire.PolicyRef `json:"policy,omitempty"`
	Rule     string          `json:"rule,omitempty"`
	Reason   string          `json:"reason,omitempty"`
}

// Decisions of an Outcome.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	DecisionAsk     = "ask"
)

// auditRecord is the part of a JSON audit record replay reads.
type auditRecord struct {
	Msg          string          `json:"msg"`
	Tool         string          `json:"tool"`
	SessionID    string          `json:"sessionId"`
	ChannelID    string          `json:"channelId"`
	SenderID     string          `json:"senderId"`
	SenderUID    string          `json:"senderUid"`
	SenderGroups []string        `json:"senderGroups"`
	Outcome      string          `json:"outcome"`
	Denial       *hooks.Decision `json:"denial"`
	Ask          *hooks.Decision `json:"ask"`
	Approval     *hooks.Approval `json:"approval"`
	Arguments    json.RawMessage `json:"arguments"`
	Masked       []string        `json:"maskedArguments"`
	Omitted      string          `json:"argumentsOmitted"`
}

// ReadDecisionLog reads the calls of one decision log (JSON lines, as the
// gateway writes its audit records), in order. Lines that are not audit
// records of calls (decision records, the gateway's own log lines) are
// skipped; a call recorded without arguments (the decision log was off) is
// returned with the reason, and replay reports it as not evaluated. name
// names r in Source.
func ReadDecisionLog(r io.Reader, name string) ([]LoggedCall, error) {
	var out []LoggedCall
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		if len(text) == 0 || text[0] != '{' {
			continue
		}
		var rec auditRecord
		if err := json.Unmarshal(text, &rec); err != nil || rec.Msg != audit.Message || rec.Tool == "" {
			continue
		}
		c := LoggedCall{Source: fmt.Sprintf("%s:%d", name, line), Tool: rec.Tool, Session: rec.SessionID,
			Channel: rec.ChannelID, Sender: rec.SenderID, Masked: rec.Masked, senderUID: rec.SenderUID,
			senderGroups: rec.SenderGroups, omitted: rec.Omitted, recorded: recordedOutcome(&rec)}
		switch {
		case len(rec.Arguments) > 0:
			c.Arguments = string(rec.Arguments)
		case c.omitted == "":
			c.omitted = "not recorded (the gateway's decision log was off)"
		}
		c.approved = rec.Ask != nil && rec.Approval != nil &&
			rec.Approval.State == hooks.ApprovalApproved && rec.Outcome != string(hooks.StatusDenied)
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return out, nil
}

// recordedOutcome is the decision a record shows.
func recordedOutcome(r *auditRecord) Outcome {
	switch {
	case r.Ask != nil:
		return outcomeOf(DecisionAsk, r.Ask)
	case r.Outcome == string(hooks.StatusDenied):
		return outcomeOf(DecisionDenied, r.Denial)
	}
	return Outcome{Decision: DecisionAllowed}
}

func outcomeOf(decision string, d *hooks.Decision) Outcome {
	o := Outcome{Decision: decision}
	if d != nil {
		o.Hook, o.Rule, o.Reason = d.Hook, d.Rule, d.Reason
		if d.Policy.Kind != "" {
			o.Policy = &wire.PolicyRef{Kind: d.Policy.Kind, Namespace: d.Policy.Namespace, Name: d.Policy.Name}
		}
	}
	return o
}

// gatewayStateRules are denials that came from the gateway's state at the
// time, not from a policy: replay cannot reproduce them.
var gatewayStateRules = map[string]bool{
	hooks.RuleAuditFailed: true, contract.RuleStateStore: true, hooks.RuleCancelled: true,
	hooks.RuleApprovalUnavailable: true, hooks.RuleHookError: true, hooks.RuleHookPanic: true,
}

// ReplayedCall is one call's recorded and replayed outcomes.
type ReplayedCall struct {
	LoggedCall
	Recorded Outcome  `json:"recorded"`
	Replayed *Outcome `json:"replayed,omitempty"`
	// Inexact says why the replayed outcome may differ from what the
	// gateway would decide on the real call: masked values, paths that are
	// not in the workspace now, a recorded denial by the gateway's state.
	Inexact []string `json:"inexact,omitempty"`
	// NotEvaluated says why the call was not evaluated at all.
	NotEvaluated string `json:"notEvaluated,omitempty"`
}

// ReplaySummary counts a replay's calls.
type ReplaySummary struct {
	Calls          int `json:"calls"`
	Changed        int `json:"changed"`
	AllowedToDeny  int `json:"allowedToDenied"`
	DeniedToAllow  int `json:"deniedToAllowed"`
	ToOrFromAsk    int `json:"toOrFromAsk"`
	Inexact        int `json:"inexact"`
	NotEvaluated   int `json:"notEvaluated"`
	EvaluatedExact int `json:"evaluatedExactly"`
}

// ReplayReport is what a replay found: the calls whose outcome changes,
// those it could not evaluate exactly or at all, and the counts.
type ReplayReport struct {
	Changed      []ReplayedCall `json:"changed"`
	Inexact      []ReplayedCall `json:"inexact"`
	NotEvaluated []ReplayedCall `json:"notEvaluated"`
	Summary      ReplaySummary  `json:"summary"`
	// Notes are the evaluator's notes (policies left out, plugins not called).
	Notes []string `json:"notes,omitempty"`
}

// Replay evaluates calls, in order, against the policies of e (one gateway:
// the calls share its sessions' budgets) and compares each outcome with the
// recorded one. A call a person approved is evaluated as approved when a
// rule asks about it again, so that it counts as it did.
func Replay(ctx context.Context, e *Evaluator, workspace string, calls []LoggedCall) *ReplayReport {
	rep := &ReplayReport{Changed: []ReplayedCall{}, Inexact: []ReplayedCall{}, NotEvaluated: []ReplayedCall{}, Notes: e.Notes}
	for _, c := range calls {
		rc := ReplayedCall{LoggedCall: c, Recorded: c.recorded}
		rep.Summary.Calls++
		if c.Arguments == "" {
			rc.NotEvaluated = "arguments " + c.omitted
			rep.NotEvaluated = append(rep.NotEvaluated, rc)
			rep.Summary.NotEvaluated++
			continue
		}
		// A call nobody approved did not run: an ask refused does not count.
		call := Call{Tool: c.Tool, Args: c.Arguments, Session: c.Session, Channel: c.Channel, Sender: c.Sender,
			Approval: hooks.ApprovalDenied}
		if c.approved {
			call.Approval = hooks.ApprovalApproved
		}
		if c.Sender != "" {
			call.Caller = &hooks.Identity{Username: c.Sender, UID: c.senderUID, Groups: c.senderGroups}
		}
		d, err := e.Evaluate(ctx, call)
		if err != nil {
			rc.NotEvaluated = err.Error()
			rep.NotEvaluated = append(rep.NotEvaluated, rc)
			rep.Summary.NotEvaluated++
			continue
		}
		rc.Replayed = replayedOutcome(d)
		rc.Inexact = inexact(c, workspace)
		if r := c.recorded; r.Decision == DecisionDenied && gatewayStateRules[r.Rule] {
			rc.Inexact = append(rc.Inexact, fmt.Sprintf("the recorded denial (rule %s) came from the gateway's state at the time, "+
				"not from a policy", r.Rule))
		}
		if len(rc.Inexact) > 0 {
			rep.Summary.Inexact++
		}
		if rc.Replayed.Decision == c.recorded.Decision || gatewayStateRules[c.recorded.Rule] {
			if len(rc.Inexact) > 0 {
				rep.Inexact = append(rep.Inexact, rc)
			} else {
				rep.Summary.EvaluatedExact++
			}
			continue
		}
		rep.Changed = append(rep.Changed, rc)
		rep.Summary.Changed++
		switch {
		case c.recorded.Decision == DecisionAllowed && rc.Replayed.Decision == DecisionDenied:
			rep.Summary.AllowedToDeny++
		case c.recorded.Decision == DecisionDenied && rc.Replayed.Decision == DecisionAllowed:
			rep.Summary.DeniedToAllow++
		default:
			rep.Summary.ToOrFromAsk++
		}
	}
	return rep
}

func replayedOutcome(d Decision) *Outcome {
	o := &Outcome{Decision: DecisionDenied, Hook: d.Hook, Policy: d.Policy, Rule: d.Rule, Reason: d.Reason}
	switch {
	case d.Ask:
		o.Decision = DecisionAsk
	case d.Allowed:
		o.Decision = DecisionAllowed
	}
	return o
}

// inexact says what of c the replay could not see as the gateway saw it:
// masked or shortened values, and paths that are not in the workspace now
// (a symlink that is gone no longer leads where it led).
func inexact(c LoggedCall, workspace string) []string {
	var out []string
	for _, p := range c.Masked {
		out = append(out, fmt.Sprintf("argument %s was masked in the log; rules saw the masked value", p))
	}
	args, err := hooks.ParseArgs(c.Arguments)
	if err != nil {
		return out
	}
	paths, err := pathguard.Extract(c.Tool, args, nil)
	if err != nil {
		return out
	}
	for _, p := range paths {
		full := p
		if !filepath.IsAbs(full) {
			full = filepath.Join(workspace, full)
		}
		if why := missing(filepath.Clean(full)); why != "" {
			out = append(out, fmt.Sprintf("path %q: %s; path rules saw the name only", p, why))
		}
	}
	return out
}

// missing says what of path is not there to resolve as the gateway did: a
// symlink along it whose target is gone, or a parent directory that does
// not exist. A missing last name in an existing directory (a file the call
// created) is not reported.
func missing(path string) string {
	for dir := path; ; dir = filepath.Dir(dir) {
		if fi, err := os.Lstat(dir); err == nil {
			if fi.Mode()&os.ModeSymlink != 0 {
				if _, err := os.Stat(dir); err != nil {
					return fmt.Sprintf("%s is a symlink whose target no longer exists", dir)
				}
			}
			if dir != path {
				return ""
			}
		} else if dir != path && errors.Is(err, os.ErrNotExist) {
			return fmt.Sprintf("directory %s does not exist", dir)
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}
