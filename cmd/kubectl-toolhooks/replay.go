package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/cli"
)

type replayFlags struct {
	files        []string
	fromCluster  bool
	kube         kubeFlags
	gateway      gatewayFlags
	output       string
	failOnChange bool
}

func newReplayCmd() *cobra.Command {
	f := &replayFlags{}
	cmd := &cobra.Command{
		Use:   "replay DECISION_LOG... (-f FILE_OR_DIR... | --from-cluster)",
		Short: "Replay recorded calls against changed policies and print the calls whose outcome changes",
		Long: `Replay the calls a gateway recorded in its decision log (its audit records written with
--decision-log: JSON lines, or - for stdin) against a set of policies: files and directories
(-f), or the policies in the cluster (--from-cluster, the namespace of -n or the kubeconfig).
Every call is evaluated in order through the same compile path and executor as the gateway, as
one gateway would: calls share their sessions' budgets. A call a person approved is evaluated
as approved when a rule asks about it again.

replay prints each call whose outcome changes (allowed -> denied, denied -> allowed, to or from
an ask), with the rule and reason of both sides, then the calls it could not evaluate exactly:
values masked in the log, paths behind a symlink that is gone or in a directory that does not
exist in --workspace (a checkout standing in for the gateway's workspace), denials the
gateway's state made (audit or state-store failures). Calls recorded without arguments (the
decision log was off) are counted as not evaluated. -o json prints
{"changed":[...],"inexact":[...],"notEvaluated":[...],"summary":{...}}.

Exit codes: 0 done (1 with --fail-on-change when any call's outcome changes), 2 bad input.`,
		Example: `  kubectl toolhooks replay audit.log -f policies/ --workspace ~/src/project --fail-on-change
  kubectl logs deploy/toolhooks-gateway | kubectl toolhooks replay - --from-cluster -n agents -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "filename", "f", nil, "policy files or directories (repeatable, comma-separated)")
	fl.BoolVar(&f.fromCluster, "from-cluster", false, "evaluate against the policies in the cluster instead of files")
	f.kube.bind(fl)
	f.gateway.bind(fl)
	fl.StringVarP(&f.output, "output", "o", outputText, "output format: text or json")
	fl.BoolVar(&f.failOnChange, "fail-on-change", false, "exit 1 when any call's outcome changes")
	return cmd
}

func (f *replayFlags) run(cmd *cobra.Command, logs []string) error {
	if f.output != outputText && f.output != outputJSON {
		return badInput(fmt.Errorf("%w: --output %q (want text or json)", cli.ErrBadInput, f.output))
	}
	if (len(f.files) == 0) == !f.fromCluster {
		return badInput(fmt.Errorf("%w: give the policies with -f FILE_OR_DIR or --from-cluster (one of them)", cli.ErrBadInput))
	}
	var calls []cli.LoggedCall
	for _, name := range logs {
		r := cmd.InOrStdin()
		if name != "-" {
			file, err := os.Open(name)
			if err != nil {
				return badInput(fmt.Errorf("%w: decision log: %w", cli.ErrBadInput, err))
			}
			defer func() { _ = file.Close() }()
			r = file
		}
		got, err := cli.ReadDecisionLog(r, name)
		if err != nil {
			return badInput(fmt.Errorf("%w: %w", cli.ErrBadInput, err))
		}
		calls = append(calls, got...)
	}
	l, ns, err := f.policies(cmd)
	if err != nil {
		return err
	}
	opts, err := f.gateway.options(ns)
	if err != nil {
		return badInput(err)
	}
	ev, err := cli.NewEvaluator(l, opts)
	if err != nil {
		return badInput(err)
	}
	stderr := cmd.ErrOrStderr()
	_, _ = fmt.Fprintf(stderr, "Replaying %d recorded calls against %d policies of namespace %s\n", len(calls), l.Count(), ev.Namespace)
	rep := cli.Replay(cmd.Context(), ev, opts.Workspace, calls)
	for _, n := range rep.Notes {
		_, _ = fmt.Fprintln(stderr, "Note:", n)
	}
	out := cmd.OutOrStdout()
	if f.output == outputJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = printReplay(out, rep)
	}
	if err != nil {
		return &exitError{code: exitBadInput, err: fmt.Errorf("writing the report: %w", err)}
	}
	if f.failOnChange && rep.Summary.Changed > 0 {
		return &exitError{code: exitDenied}
	}
	return nil
}

// policies loads the policies replay evaluates against and the gateway
// namespace they are compiled for ("" lets the evaluator choose).
func (f *replayFlags) policies(cmd *cobra.Command) (*cli.Loaded, string, error) {
	if !f.fromCluster {
		l, err := cli.LoadPolicies(f.files)
		if err != nil {
			return nil, "", badInput(err)
		}
		return l, f.kube.overrides.Context.Namespace, nil
	}
	ns, cfg, err := f.kube.load()
	if err != nil {
		return nil, "", badInput(err)
	}
	s := runtime.NewScheme()
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, "", badInput(err)
	}
	l, err := cli.LoadFromCluster(cmd.Context(), c, ns)
	if err != nil {
		return nil, "", err
	}
	return l, ns, nil
}

// printReplay writes rep for a person: each changed call with both sides,
// the calls not evaluated exactly, then the summary.
func printReplay(w io.Writer, rep *cli.ReplayReport) error {
	var b strings.Builder
	for _, c := range rep.Changed {
		fmt.Fprintf(&b, "CHANGED %s: %s -> %s  %s (session %q, sender %q)\n", c.Source, c.Recorded.Decision, c.Replayed.Decision,
			c.Tool, c.Session, c.Sender)
		fmt.Fprintf(&b, "  arguments: %s\n", c.Arguments)
		fmt.Fprintf(&b, "  recorded:  %s\n", describeOutcome(c.Recorded))
		fmt.Fprintf(&b, "  replayed:  %s\n", describeOutcome(*c.Replayed))
		for _, why := range c.Inexact {
			fmt.Fprintf(&b, "  not exact: %s\n", why)
		}
	}
	for _, c := range rep.Inexact {
		fmt.Fprintf(&b, "NOT EXACT %s: %s (%s both times)\n", c.Source, c.Tool, c.Recorded.Decision)
		for _, why := range c.Inexact {
			fmt.Fprintf(&b, "  %s\n", why)
		}
	}
	for _, c := range rep.NotEvaluated {
		fmt.Fprintf(&b, "NOT EVALUATED %s: %s: %s\n", c.Source, c.Tool, c.NotEvaluated)
	}
	s := rep.Summary
	fmt.Fprintf(&b, "%d calls: %d changed (%d allowed -> denied, %d denied -> allowed, %d to or from ask), "+
		"%d not exact, %d not evaluated, %d unchanged and exact\n",
		s.Calls, s.Changed, s.AllowedToDeny, s.DeniedToAllow, s.ToOrFromAsk, s.Inexact, s.NotEvaluated, s.EvaluatedExact)
	_, err := io.WriteString(w, b.String())
	return err
}

func describeOutcome(o cli.Outcome) string {
	if o.Decision == cli.DecisionAllowed {
		return "allowed"
	}
	who := o.Hook
	if p := o.Policy; p != nil {
		who = p.Kind + "/" + p.Namespace + "/" + p.Name
	}
	return fmt.Sprintf("%s by %s rule=%s: %s", o.Decision, who, o.Rule, o.Reason)
}
