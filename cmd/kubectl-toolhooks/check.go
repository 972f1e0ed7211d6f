package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolhooks/toolhooks/internal/cli"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Output formats of check.
const (
	outputText = "text"
	outputJSON = "json"
)

type checkFlags struct {
	files     []string
	tool      string
	args      string
	session   string
	channel   string
	sender    string
	as        string
	asGroups  []string
	namespace string
	gateway   gatewayFlags
	output    string
	strict    bool
	result    string
}

func newCheckCmd() *cobra.Command {
	f := &checkFlags{}
	cmd := &cobra.Command{
		Use:   "check -f FILE_OR_DIR... --tool NAME --args JSON",
		Short: "Evaluate one tool call against policy files",
		Long: `Evaluate one tool call offline, through the same compile path and executor as the gateway.

Every policy in the files must compile, whatever its namespace, or check exits 2 naming
the file, the policy and the reason. Directories contribute their policy files (not
subdirectories), skipping kustomization files and *.test.yaml suites.

--workspace (default: the current directory) stands in for the gateway's workspace:
relative call paths resolve against it, every AutonomyPolicy's workspace root is replaced
by it, and ContractPolicy allowed paths under such a root move under it. Pass
--keep-workspace-roots to use the roots as written (each must then exist here).

PluginHooks are not called offline: their failurePolicy decides the calls they handle.

-o json prints {"allowed":bool,"ask":bool,"hook":...,"policy":{"kind","namespace","name"},"rule":...,"reason":...,"layer":"static"};
"allowed" is always present, the others only on a denial or an ask ("policy" only when a policy
object decided). "ask" means a policy asks a person to approve the call: a gateway would create a
ToolCallApproval and run the call only once it is approved.
The call is made as the verified caller --as (a username) with the groups --as-group
(repeatable), as kubectl's impersonation flags; policies' subjects.callers match it.
Without --as (or the older --sender) it is made as the anonymous caller, which no
callers entry binds; stderr says whom the call was evaluated as.

Warn-mode would-be denials are printed on stderr, and so are policy warnings: shell
allow-list entries that let an agent run arbitrary programs (python *, make *, bash *,
npm run *, ...). --strict turns those warnings into errors (exit 2).

--result FILE (- for stdin) is what the tool returned: when the call is allowed, the
ResultPolicies run on it as the gateway runs them, and check prints what the caller would
see, with each rule that fired (never the values). -o json adds
"result":{"withheld":bool,"output":...,"findings":[{"hook","rule","action","count","bytes"}]}.

Exit codes: 0 allowed, 1 denied (or, with --result, the result withheld), 2 bad input,
3 ask (needs approval).`,
		Example: `  kubectl toolhooks check -f config/samples --tool read_file --args '{"path":"config/.env"}'
  kubectl toolhooks check -f policies/ --tool shell --args '{"command":"git status"}' -o json
  kubectl toolhooks check -f policies/ --tool write_file --args '{"path":"a"}' \
      --as system:serviceaccount:agents:coder --as-group system:serviceaccounts:agents
  kubectl toolhooks check -f policies/ --tool read_file --args '{"path":".env"}' --result testdata/env.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "filename", "f", nil, "policy files or directories (repeatable, comma-separated)")
	fl.StringVar(&f.tool, "tool", "", "tool name (required)")
	fl.StringVar(&f.args, "args", "", "tool arguments as one JSON object (default {})")
	fl.StringVar(&f.session, "session", "", "session id of the call")
	fl.StringVar(&f.channel, "channel", "", "channel id of the call")
	fl.StringVar(&f.sender, "sender", "", "sender id of the call: the caller's username (prefer --as)")
	fl.StringVar(&f.as, "as", "", "username of the verified caller the call is made as (default: --sender, or the anonymous caller)")
	fl.StringArrayVar(&f.asGroups, "as-group", nil, "a group of the caller (repeatable; needs --as)")
	fl.StringVarP(&f.namespace, "namespace", "n", "", `gateway namespace (default: the policies' namespace, or "default")`)
	f.gateway.bind(fl)
	fl.StringVarP(&f.output, "output", "o", outputText, "output format: text or json")
	fl.StringVar(&f.result, "result", "", "file holding what the tool returned (- for stdin): the ResultPolicies run on it")
	fl.BoolVar(&f.strict, "strict", false, "treat policy warnings (allow-list entries that run arbitrary programs) as errors (exit 2)")
	return cmd
}

func (f *checkFlags) run(cmd *cobra.Command) error {
	if f.output != outputText && f.output != outputJSON {
		return badInput(fmt.Errorf("%w: --output %q (want text or json)", cli.ErrBadInput, f.output))
	}
	if f.tool == "" {
		return badInput(fmt.Errorf("%w: --tool is required", cli.ErrBadInput))
	}
	if len(f.files) == 0 {
		return badInput(fmt.Errorf("%w: -f FILE_OR_DIR is required", cli.ErrBadInput))
	}
	opts, err := f.gateway.options(f.namespace)
	if err != nil {
		return badInput(err)
	}
	l, err := cli.LoadPolicies(f.files)
	if err != nil {
		return badInput(err)
	}
	if l.Count() == 0 {
		return badInput(fmt.Errorf("%w: no policies found in %v", cli.ErrBadInput, f.files))
	}
	lint := l.Lint()
	for _, w := range lint {
		_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
	}
	if f.strict && len(lint) > 0 {
		return badInput(fmt.Errorf("%w: --strict: %d policy warning(s)", cli.ErrBadInput, len(lint)))
	}
	ev, err := cli.NewEvaluator(l, opts)
	if err != nil {
		return badInput(err)
	}
	call := cli.Call{Tool: f.tool, Args: f.args, Session: f.session, Channel: f.channel, Sender: f.sender}
	if f.as != "" {
		call.Caller = &hooks.Identity{Username: f.as, Groups: f.asGroups}
	} else if len(f.asGroups) > 0 {
		return badInput(fmt.Errorf("%w: --as-group needs --as", cli.ErrBadInput))
	}
	id, err := call.CallerOf()
	if err != nil {
		return badInput(err)
	}
	if f.result != "" {
		out, err := readResult(cmd.InOrStdin(), f.result)
		if err != nil {
			return badInput(err)
		}
		call.Result = &out
	}
	d, err := ev.Evaluate(cmd.Context(), call)
	if err != nil {
		return badInput(err)
	}
	stderr := cmd.ErrOrStderr()
	_, _ = fmt.Fprintln(stderr, "Note:", callerNote(id, f.as == "" && f.sender == ""))
	for _, n := range ev.Notes {
		_, _ = fmt.Fprintln(stderr, "Note:", n)
	}
	for _, w := range d.Warnings {
		_, _ = fmt.Fprintf(stderr, "Warning: %s would deny (enforcementAction Warn), rule %s: %s\n", w.Hook, w.Rule, w.Reason)
	}
	if err := printDecision(cmd.OutOrStdout(), f.output, d); err != nil {
		return &exitError{code: exitBadInput, err: fmt.Errorf("writing the decision: %w", err)}
	}
	if d.Ask {
		return &exitError{code: exitAsk}
	}
	if !d.Allowed || (d.Result != nil && d.Result.Withheld) {
		return &exitError{code: exitDenied}
	}
	return nil
}

// readResult reads the tool output --result names: a file, or stdin for "-".
func readResult(stdin io.Reader, name string) (string, error) {
	var (
		b   []byte
		err error
	)
	if name == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", fmt.Errorf("%w: --result: %w", cli.ErrBadInput, err)
	}
	return string(b), nil
}

// callerNote says whom the call was evaluated as.
func callerNote(id *hooks.Identity, anonymous bool) string {
	groups := "no groups"
	if len(id.Groups) > 0 {
		groups = "groups " + strings.Join(id.Groups, ", ")
	}
	if anonymous {
		return fmt.Sprintf("evaluated as the anonymous caller %s (%s); state the caller with --as and --as-group", id.Username, groups)
	}
	return fmt.Sprintf("evaluated as %s (%s)", id.Username, groups)
}

// printDecision writes d in the output format.
func printDecision(w io.Writer, format string, d cli.Decision) error {
	if format == outputJSON {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if d.Allowed {
		if _, err := fmt.Fprintln(w, "allowed"); err != nil || d.Result == nil {
			return err
		}
		return printResult(w, d.Result)
	}
	policy := "-"
	if p := d.Policy; p != nil {
		policy = p.Kind + " " + p.Namespace + "/" + p.Name
	}
	outcome := "denied"
	if d.Ask {
		outcome = "ask (a person must approve it)"
	}
	_, err := fmt.Fprintf(w, "%s\n  hook:   %s\n  policy: %s\n  rule:   %s\n  reason: %s\n", outcome, d.Hook, policy, d.Rule, d.Reason)
	return err
}

// printResult writes what the result policies made of a tool's output.
func printResult(w io.Writer, r *cli.ResultDecision) error {
	var b strings.Builder
	switch {
	case r.Withheld:
		fmt.Fprintf(&b, "result withheld\n  hook:   %s\n  rule:   %s\n  reason: %s\n", r.Hook, r.Rule, r.Reason)
	case len(r.Findings) == 0:
		b.WriteString("result passed on unchanged\n")
	default:
		b.WriteString("result filtered\n")
	}
	for _, f := range r.Findings {
		mode := ""
		if f.Warn {
			mode = " (Warn mode: not applied)"
		}
		fmt.Fprintf(&b, "  %s: rule %s, %s, %d match(es), %d bytes%s\n", f.Hook, f.Rule, f.Action, f.Count, f.Bytes, mode)
	}
	if !r.Withheld {
		b.WriteString("--- what the caller sees ---\n")
		b.WriteString(r.Output)
		if !strings.HasSuffix(r.Output, "\n") {
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
