// Command kubectl-toolhooks is the toolhooks kubectl plugin. It evaluates
// tool calls against policy files offline, through the same compile path and
// executor as the gateway (check), and runs PolicyTest suites (test), so
// platform teams can test their policies in CI without a cluster. It also
// lists the denials gateways recorded as Events on policies (denials),
// lists and decides ToolCallApprovals (approvals, approve, deny) and gates
// Claude Code's tool calls through a gateway (claude-hook, whose exit codes
// follow Claude Code's hook protocol: 0 allowed, 2 denied).
//
// Exit codes: 0 allowed / all cases passed, 1 denied / a case failed,
// 2 bad input (unreadable or invalid files, policies that do not compile,
// malformed arguments, unknown flags).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolhooks/toolhooks/internal/cli"
)

// Exit codes.
const (
	exitOK       = 0
	exitDenied   = 1
	exitBadInput = 2
	// exitAsk: a policy asks a person to approve the call.
	exitAsk = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitError ends a command with code, printing err (when set) on stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// run executes the plugin with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runIO(args, os.Stdin, stdout, stderr)
}

// runIO is run with stdin (read by claude-hook).
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is runIO until ctx ends (what ends approvals --watch in tests).
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitBadInput
	if ee, ok := errors.AsType[*exitError](err); ok {
		code = ee.code
		err = ee.err
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "Error:", err)
	}
	return code
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-toolhooks",
		Short: "Check and test toolhooks policies, list their denials, decide approvals, gate Claude Code",
		Long: "kubectl-toolhooks evaluates tool calls against AutonomyPolicy, ContractPolicy and PluginHook files\n" +
			"through the same compile path and executor as the toolhooks gateway, without a cluster (check, test),\n" +
			"lists the denials gateways recorded as Events (denials), lists and decides ToolCallApprovals\n" +
			"(approvals, approve, deny), replays decision logs against changed policies (replay) and gates\n" +
			"Claude Code's tool calls (claude-hook).\n\n" +
			"Exit codes: 0 allowed (or every case passed), 1 denied (or a case failed), 2 bad input.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl toolhooks"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newCheckCmd(), newTestCmd(), newVersionCmd(), newClaudeHookCmd(), newDenialsCmd(),
		newApproveCmd(), newDenyCmd(), newApprovalsCmd(), newReplayCmd())
	return root
}

// badInput wraps err as a bad-input exit.
func badInput(err error) error { return &exitError{code: exitBadInput, err: err} }

// workingDir is the default workspace.
func workingDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: working directory: %w", cli.ErrBadInput, err)
	}
	return wd, nil
}

// gatewayFlags say which gateway offline evaluation stands in for: its
// labels and a directory standing in for its workspace.
type gatewayFlags struct {
	labels             map[string]string
	workspace          string
	keepWorkspaceRoots bool
}

func (g *gatewayFlags) bind(fl *pflag.FlagSet) {
	fl.StringToStringVar(&g.labels, "labels", nil, "gateway labels matched by gatewaySelectors, as k=v,...")
	fl.StringVar(&g.workspace, "workspace", "", "directory standing in for the gateway's workspace (default: current directory)")
	fl.BoolVar(&g.keepWorkspaceRoots, "keep-workspace-roots", false, "use the policies' workspace roots as written")
}

// options returns the evaluator's options for a gateway of namespace (""
// lets the evaluator choose), the workspace defaulting to the working
// directory.
func (g *gatewayFlags) options(namespace string) (cli.Options, error) {
	ws := g.workspace
	if ws == "" {
		wd, err := workingDir()
		if err != nil {
			return cli.Options{}, err
		}
		ws = wd
	}
	return cli.Options{Namespace: namespace, Labels: g.labels, Workspace: ws, KeepWorkspaceRoots: g.keepWorkspaceRoots}, nil
}
