package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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

// maxResponseBytes bounds the gateway's answer (a result the gateway
// scanned may be longer than the input it came from).
const maxResponseBytes = 2 * MaxInputBytes

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
		return postToolUse(ctx, stdout, stderr, o, in)
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

// postToolUse has the gateway's result policies scan a tool's response
// (POST /v1/results). A clean one exits ExitAllow with nothing on stdout.
// One a policy redacted or withheld is answered on stdout: for an MCP tool
// with Claude Code's updatedMCPToolOutput, which replaces what the model
// sees; for Claude Code's own tools, whose output a hook cannot replace,
// with decision "block" and a reason telling the model the result is
// withheld and why. A gateway that cannot scan it is a withheld result too,
// unless OnError is OnErrorAllow.
func postToolUse(ctx context.Context, stdout, stderr io.Writer, o Options, in *Input) int {
	if server, ok := mcpServer(in.ToolName); ok && slices.Contains(o.GatewayMCPServers, server) {
		return ExitAllow // the gateway scanned it when it served the call
	}
	r, err := scanResult(ctx, o, in)
	if err != nil {
		if o.OnError == OnErrorAllow {
			_, _ = fmt.Fprintf(stderr, "toolhooks claude-hook: WARNING: %v; the result of %s was NOT scanned (--on-error=allow)\n",
				err, in.ToolName)
			return ExitAllow
		}
		return block(stdout, stderr, fmt.Sprintf("toolhooks could not scan the result of %s (%v), so it is withheld: "+
			"do not use or repeat anything from it.", in.ToolName, err))
	}
	changed := r.Status == "withheld"
	var rules []string
	for _, x := range r.Redactions {
		if x.Action != "Warn" {
			changed = true
			rules = append(rules, x.Rule)
		}
	}
	if !changed {
		return ExitAllow
	}
	if _, ok := mcpServer(in.ToolName); ok {
		return answer(stdout, stderr, map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName": EventPostToolUse, "updatedMCPToolOutput": r.Result}})
	}
	reason := fmt.Sprintf("toolhooks: the result of %s is withheld", in.ToolName)
	if r.Withheld != nil {
		reason += " by " + r.Withheld.Hook + ": " + r.Withheld.Reason
	} else {
		reason += fmt.Sprintf(": a result policy found %s in it. Do not use or repeat any value from it. "+
			"What may be shown of it:\n%s", strings.Join(slices.Compact(rules), ", "), r.Result)
	}
	return block(stdout, stderr, reason)
}

// block answers a PostToolUse event with Claude Code's decision "block".
func block(stdout, stderr io.Writer, reason string) int {
	return answer(stdout, stderr, map[string]any{"decision": "block", "reason": reason})
}

// answer writes v as the hook's JSON answer and exits ExitAllow.
func answer(stdout, stderr io.Writer, v any) int {
	out, err := json.Marshal(v)
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", out)
	}
	if err != nil {
		return deny(stderr, "toolhooks claude-hook: writing the answer: %v", err)
	}
	return ExitAllow
}

// scanResult posts in's tool response to the gateway's POST /v1/results.
func scanResult(ctx context.Context, o Options, in *Input) (*wire.ResultResponse, error) {
	call, err := MapTool(in)
	if err != nil {
		return nil, err
	}
	args, err := strictjson.Marshal(call.Args)
	if err != nil {
		return nil, fmt.Errorf("encoding the arguments: %w", err)
	}
	text, err := ResponseText(in.ToolResponse)
	if err != nil {
		return nil, err
	}
	var r wire.ResultResponse
	if err := postJSON(ctx, o, "/v1/results", wire.ResultRequest{SessionID: in.SessionID, ChannelID: Channel, SenderID: o.Sender,
		CorrelationID: in.ToolUseID, Tool: call.Tool, Arguments: args, Result: text}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ResponseText is the text a result policy scans of a tool response: a
// string as it is; any other JSON value as every member name and string in
// it, one per line, so that nothing of it goes unscanned.
func ResponseText(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "", nil
	}
	v, err := strictjson.Parse("{\"v\":" + string(raw) + "}")
	if err != nil {
		return "", fmt.Errorf("%w: tool_response: %w", ErrBadInput, err)
	}
	if s, ok := v["v"].(string); ok {
		return s, nil
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteByte('\n')
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			keys := slices.Sorted(maps.Keys(v))
			for _, k := range keys {
				b.WriteString(k)
				b.WriteByte('\n')
				walk(v[k])
			}
		}
	}
	walk(v["v"])
	return b.String(), nil
}

// Decide asks the gateway's POST /v1/decisions about call. Any answer but a
// 200 with a decision is an error.
func Decide(ctx context.Context, o Options, in *Input, call Call) (*wire.DecisionResponse, error) {
	args, err := strictjson.Marshal(call.Args)
	if err != nil {
		return nil, fmt.Errorf("encoding the arguments: %w", err)
	}
	var d wire.DecisionResponse
	if err := postJSON(ctx, o, "/v1/decisions", wire.DecisionRequest{
		SessionID: in.SessionID, ChannelID: Channel, SenderID: o.Sender, CorrelationID: in.ToolUseID,
		Tool: call.Tool, Arguments: args,
	}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// postJSON posts body to the gateway's path and decodes its 200 answer into
// out; any other answer is an error.
func postJSON(ctx context.Context, o Options, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	endpoint := strings.TrimRight(o.Gateway, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("gateway request: %w", err)
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
		return fmt.Errorf("gateway %s unreachable: %w", o.Gateway, err)
	}
	defer func() { _ = resp.Body.Close() }()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorResponse
		if strictjson.UnmarshalOpen(rb, &e) == nil && e.Error != "" {
			return fmt.Errorf("gateway answered %s: %s", resp.Status, e.Error)
		}
		return fmt.Errorf("gateway answered %s", resp.Status)
	}
	if err := strictjson.UnmarshalOpen(rb, out); err != nil {
		return fmt.Errorf("gateway answer to %s is not a decision or result: %w", path, err)
	}
	return nil
}
