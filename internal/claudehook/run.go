package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Exit codes of the Claude Code hook protocol.
const (
	// ExitAllow lets the call go on to Claude Code's own permission checks.
	ExitAllow = 0
	// ExitDeny blocks the call; stderr is the reason shown to the model.
	ExitDeny = 2
)

// Channel is the channel id of every call the adapter sends.
const Channel = "claude-code"

// OnError values: what a gateway that cannot answer means.
const (
	OnErrorDeny  = "deny"
	OnErrorAllow = "allow"
)

// Ask values: how a call that a policy asks a person to approve is answered
// while nobody has approved it in the cluster.
const (
	// AskPrompt answers Claude Code's own "ask" permission decision: the
	// person at the terminal is prompted, with the ToolCallApproval named.
	AskPrompt = "prompt"
	// AskDeny denies the call until its ToolCallApproval is approved, so
	// that only a cluster approver can admit it.
	AskDeny = "deny"
)

// DefaultTimeout bounds one decision request.
const DefaultTimeout = 10 * time.Second

// maxResponseBytes bounds the gateway's answer.
const maxResponseBytes = 1 << 20

// Options configure Run.
type Options struct {
	// Gateway is the gateway's base URL (http or https).
	Gateway string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// Sender, when set, is sent as the calls' sender id, which the gateway
	// requires to be the token's verified identity; empty leaves it to the gateway.
	Sender string
	// OnError is OnErrorDeny (the default when empty) or OnErrorAllow.
	OnError string
	// Ask is AskPrompt (the default when empty) or AskDeny.
	Ask string
	// Timeout bounds the decision request (default DefaultTimeout).
	Timeout time.Duration
	// HTTPClient sends the request (default: a client with no redirects followed).
	HTTPClient *http.Client
	// GatewayMCPServers are the Claude Code MCP server names that are the
	// toolhooks gateway's own /mcp endpoint: the gateway gates their calls
	// itself, so asking it here too would count each call twice (budgets,
	// rate limits). Their tools exit ExitAllow without a request.
	GatewayMCPServers []string
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Gateway == "" {
		return errors.New("--gateway URL is required (or TOOLHOOKS_GATEWAY)")
	}
	u, err := url.Parse(o.Gateway)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--gateway %q is not an http(s) URL", o.Gateway)
	}
	switch o.OnError {
	case "", OnErrorDeny, OnErrorAllow:
	default:
		return fmt.Errorf("--on-error %q (want deny or allow)", o.OnError)
	}
	switch o.Ask {
	case "", AskPrompt, AskDeny:
	default:
		return fmt.Errorf("--ask %q (want prompt or deny)", o.Ask)
	}
	return nil
}

// Run handles one hook event read from stdin and returns the exit code.
// Denials, bad input and bad options are explained on stderr and exit
// ExitDeny; a gateway that cannot be reached or answers with an error does
// too, unless OnError is OnErrorAllow, which exits ExitAllow after saying
// so on stderr. A call a policy asks a person to approve, and that nobody
// has approved yet, is answered on stdout with Claude Code's "ask"
// permission decision and exit ExitAllow (or denied, with Ask AskDeny);
// nothing else is written to stdout.
func Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, o Options) int {
	if err := o.Validate(); err != nil {
		return deny(stderr, "toolhooks claude-hook: %v; denying", err)
	}
	in, err := ReadInput(stdin)
	if err != nil {
		return deny(stderr, "toolhooks claude-hook: %v; denying", err)
	}
	switch in.HookEventName {
	case EventPreToolUse:
	case EventPostToolUse:
		// The gateway audits the call when it decides it (PreToolUse) and
		// has no endpoint for results of tools it did not run: nothing to do.
		return ExitAllow
	default:
		return deny(stderr, "toolhooks claude-hook: hook event %q is not supported (PreToolUse and PostToolUse are); denying", in.HookEventName)
	}
	if server, ok := mcpServer(in.ToolName); ok && slices.Contains(o.GatewayMCPServers, server) {
		return ExitAllow
	}
	call, err := MapTool(in)
	if err != nil {
		return deny(stderr, "toolhooks claude-hook: %v; denying", err)
	}
	d, err := Decide(ctx, o, in, call)
	if err != nil {
		if o.OnError == OnErrorAllow {
			_, _ = fmt.Fprintf(stderr, "toolhooks claude-hook: WARNING: %v; ALLOWING %s without a policy decision (--on-error=allow)\n",
				err, in.ToolName)
			return ExitAllow
		}
		return deny(stderr, "toolhooks claude-hook: %v; denying %s (--on-error=deny)", err, in.ToolName)
	}
	for _, w := range d.Warnings {
		_, _ = fmt.Fprintf(stderr, "toolhooks: warning: %s would deny (rule %s): %s\n", w.Hook, w.Rule, w.Reason)
	}
	if d.Allowed {
		return ExitAllow
	}
	if d.Decision == wire.DecisionAsk {
		return ask(stdout, stderr, o, d)
	}
	if d.Denial == nil {
		return deny(stderr, "Tool execution denied by the toolhooks gateway (no reason given)")
	}
	return deny(stderr, "%s", DenialText(d.Denial))
}

// DenialText is the reason shown to the model: the gateway's denial text
// ("Tool execution denied by hook: <hook>") with the rule, the reason and
// the policy when the hook's name does not already say it.
func DenialText(d *wire.Denial) string {
	text := "Tool execution denied by hook: " + d.Hook
	var parts []string
	if p := d.Policy; p != nil && d.Hook != p.Kind+"/"+p.Namespace+"/"+p.Name {
		parts = append(parts, "policy "+p.Kind+" "+p.Namespace+"/"+p.Name)
	}
	if d.Rule != "" {
		parts = append(parts, "rule "+d.Rule)
	}
	if len(parts) > 0 {
		text += " (" + strings.Join(parts, ", ") + ")"
	}
	if d.Reason != "" {
		text += ": " + d.Reason
	}
	return text
}

// AskText is the reason shown when a policy asks a person to approve a
// call: the asking rule and the ToolCallApproval to approve.
func AskText(d *wire.DecisionResponse) string {
	text := "toolhooks: a policy asks a person to approve this call"
	if d.Ask != nil {
		text = strings.Replace(DenialText(d.Ask), "Tool execution denied by hook:", "toolhooks: approval required by hook", 1)
	}
	if a := d.Approval; a != nil && a.Name != "" {
		text += "; ToolCallApproval " + a.Name + " waits for a decision (kubectl toolhooks approve " + a.Name +
			"), then retry the same call"
	}
	return text
}

// ask answers a call that waits for approval: Claude Code's own "ask"
// permission decision on stdout, or a denial when o.Ask is AskDeny.
func ask(stdout, stderr io.Writer, o Options, d *wire.DecisionResponse) int {
	reason := AskText(d)
	if o.Ask == AskDeny {
		return deny(stderr, "%s", reason)
	}
	out, err := json.Marshal(map[string]any{"hookSpecificOutput": map[string]string{
		"hookEventName":            EventPreToolUse,
		"permissionDecision":       "ask",
		"permissionDecisionReason": reason,
	}})
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", out)
	}
	if err != nil {
		return deny(stderr, "toolhooks claude-hook: writing the ask answer: %v; denying", err)
	}
	return ExitAllow
}

func deny(stderr io.Writer, format string, a ...any) int {
	_, _ = fmt.Fprintf(stderr, format+"\n", a...)
	return ExitDeny
}

// Decide asks the gateway's POST /v1/decisions about call. Any answer but a
// 200 with a decision is an error.
func Decide(ctx context.Context, o Options, in *Input, call Call) (*wire.DecisionResponse, error) {
	args, err := strictjson.Marshal(call.Args)
	if err != nil {
		return nil, fmt.Errorf("encoding the arguments: %w", err)
	}
	body, err := json.Marshal(wire.DecisionRequest{
		SessionID: in.SessionID, ChannelID: Channel, SenderID: o.Sender, CorrelationID: in.ToolUseID,
		Tool: call.Tool, Arguments: args,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	endpoint := strings.TrimRight(o.Gateway, "/") + "/v1/decisions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("gateway request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gateway %s unreachable: %w", o.Gateway, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorResponse
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("gateway answered %s: %s", resp.Status, e.Error)
		}
		return nil, fmt.Errorf("gateway answered %s", resp.Status)
	}
	var d wire.DecisionResponse
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("gateway answer is not a decision: %w", err)
	}
	return &d, nil
}
