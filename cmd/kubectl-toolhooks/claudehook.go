package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/toolhooks/toolhooks/internal/claudehook"
)

// Environment variables claude-hook reads when the flags are not given.
const (
	envGateway      = "TOOLHOOKS_GATEWAY"
	envGatewayToken = "TOOLHOOKS_GATEWAY_TOKEN" //nolint:gosec // the variable's name, not a credential
)

func newClaudeHookCmd() *cobra.Command {
	o := claudehook.Options{}
	cmd := &cobra.Command{
		Use:   "claude-hook --gateway URL",
		Short: "Gate Claude Code's tool calls through a toolhooks gateway (a PreToolUse command hook)",
		Long: `Read one Claude Code hook event (PreToolUse or PostToolUse) on stdin, ask the gateway's
POST /v1/decisions about the tool call and answer in Claude Code's hook protocol:

  exit 0   allowed: Claude Code's own permission rules still apply (never bypassed)
  exit 2   denied: the reason (hook, policy, rule, reason) is on stderr, which Claude
           Code shows to the model; also every error (bad input, unknown event)

A call that a policy asks a person to approve (the gateway created a ToolCallApproval
and nobody has decided it) is answered with Claude Code's own "ask" permission decision
on stdout, naming the approval: the person at the terminal is prompted. With --ask=deny
it is denied instead until someone approves the ToolCallApproval in the cluster, so only
a cluster approver can admit it. Once it is approved, the same call is allowed once.

Tools map as: Bash -> shell {command, cwd}, Read -> read_file, Write -> write_file,
Edit/MultiEdit/NotebookEdit -> edit_file, Glob -> glob, Grep -> grep, LS -> list_dir,
WebFetch -> web_fetch, WebSearch -> web_search, mcp__<server>__<tool> -> <server>_<tool>;
any other tool keeps its Claude Code name (mutating for readonly mode). Tools of the MCP
servers named by --gateway-mcp-server (the gateway's own /mcp endpoint, which gates them
itself) pass without a request, so budgets do not count them twice.
The session id is Claude Code's session_id, the channel "claude-code".

A gateway that cannot be reached or answers with an error denies (--on-error=deny, the
default); --on-error=allow lets the call through with a warning on stderr.
PostToolUse events send the tool's response to the gateway's POST /v1/results, where its
ResultPolicies scan it: a clean result exits 0 silently; a redacted or withheld one is
answered on stdout (exit 0) with Claude Code's updatedMCPToolOutput for MCP tools, and with
decision "block" and the reason for Claude Code's own tools, whose output a hook cannot
replace. A result that cannot be scanned is withheld unless --on-error=allow.`,
		Example: `  # .claude/settings.json: {"hooks":{"PreToolUse":[{"matcher":"*","hooks":[
  #   {"type":"command","command":"kubectl-toolhooks claude-hook --gateway http://127.0.0.1:8080"}]}]}}
  echo '{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/w/.env"}}' |
    kubectl toolhooks claude-hook --gateway http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Gateway == "" {
				o.Gateway = os.Getenv(envGateway)
			}
			if o.Token == "" {
				o.Token = os.Getenv(envGatewayToken)
			}
			code := claudehook.Run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
			if code != claudehook.ExitAllow {
				return &exitError{code: code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Gateway, "gateway", "", "gateway base URL (default $"+envGateway+")")
	fl.StringVar(&o.Token, "token", "", "bearer token for the gateway (default $"+envGatewayToken+"; prefer the variable: flags show in ps)")
	fl.StringVar(&o.Sender, "sender", "",
		"sender id of the calls; the gateway refuses one that is not the token's identity "+
			"(default: none, the gateway uses the token's identity)")
	fl.StringVar(&o.OnError, "on-error", claudehook.OnErrorDeny, "when the gateway cannot decide: deny or allow")
	fl.StringVar(&o.Ask, "ask", claudehook.AskPrompt,
		"a call waiting for approval: prompt (Claude Code asks the person at the terminal) or deny (only a cluster approver admits it)")
	fl.DurationVar(&o.Timeout, "timeout", claudehook.DefaultTimeout, "timeout of one decision request")
	fl.StringSliceVar(&o.GatewayMCPServers, "gateway-mcp-server", nil,
		"Claude Code MCP server names that are this gateway's /mcp endpoint: their calls are gated there, not asked twice")
	return cmd
}
