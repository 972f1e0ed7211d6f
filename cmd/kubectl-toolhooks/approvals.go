package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/cli"
)

// approvalClient returns a client for ToolCallApprovals.
func approvalClient(cfg *rest.Config) (client.WithWatch, error) {
	s := runtime.NewScheme()
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: s})
}

type decideFlags struct {
	kube    kubeFlags
	approve bool
	reason  string
}

func newApproveCmd() *cobra.Command { return newDecideCmd(true) }

func newDenyCmd() *cobra.Command { return newDecideCmd(false) }

func newDecideCmd(approve bool) *cobra.Command {
	f := &decideFlags{approve: approve}
	verb, reasonHelp := "approve", "why you approve (default: \"approved by <you>\")"
	if !approve {
		verb, reasonHelp = "deny", "why you deny (required)"
	}
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a pending ToolCallApproval",
		Long: strings.ToUpper(verb[:1]) + verb[1:] + ` the tool call a Pending ToolCallApproval describes, as the user the API
server knows you as: its status gets state, decidedBy (you) and the condition with
--reason as its message. The API server admits the decision only from a user holding
the "approve" verb on toolcallapprovals (the toolhooks-approver ClusterRole) who is
not the call's sender. A decision is final.

Exit codes: 0 decided, 1 refused (not Pending, forbidden, or changed meanwhile),
2 bad input or an API error.`,
		Example: "  kubectl toolhooks " + verb + " tca-7f3k2 -n agents --reason 'expected deploy change'",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return f.run(cmd, args[0]) },
	}
	cmd.Flags().StringVar(&f.reason, "reason", "", reasonHelp)
	f.kube.bind(cmd.Flags())
	return cmd
}

func (f *decideFlags) run(cmd *cobra.Command, name string) error {
	if !f.approve && strings.TrimSpace(f.reason) == "" {
		return badInput(fmt.Errorf("%w: deny needs --reason", cli.ErrBadInput))
	}
	ns, cfg, err := f.kube.load()
	if err != nil {
		return badInput(err)
	}
	c, err := approvalClient(cfg)
	if err != nil {
		return badInput(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return badInput(err)
	}
	ctx := cmd.Context()
	user, err := cli.CurrentUser(ctx, cs)
	if err != nil {
		return badInput(err)
	}
	a, err := cli.Decide(ctx, c, client.ObjectKey{Namespace: ns, Name: name}, user, cli.ApprovalDecision{Approve: f.approve, Reason: f.reason})
	if err != nil {
		if errors.Is(err, cli.ErrNotPending) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return &exitError{code: exitDenied, err: err}
		}
		return badInput(err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "toolcallapproval %s/%s %s by %s (%s %s by %s)\n",
		a.Namespace, a.Name, strings.ToLower(string(a.Status.State)), user.Username,
		a.Spec.Tool, oneLine(previewArgs(a, 60)), a.Spec.Sender.Username)
	return err
}

type approvalsFlags struct {
	kube          kubeFlags
	all           bool
	allNamespaces bool
	watch         bool
	output        string
}

func newApprovalsCmd() *cobra.Command {
	f := &approvalsFlags{}
	cmd := &cobra.Command{
		Use:     "approvals",
		Aliases: []string{"approval", "tca"},
		Short:   "List ToolCallApprovals waiting for a decision",
		Long: `List the ToolCallApprovals of the namespace, oldest first: the Pending ones, or every
one with --all. --watch prints the list and then every change until interrupted (with
-o json, one object per line).

Exit codes: 0 listed (also when there are none), 2 bad input or an API error.`,
		Example: `  kubectl toolhooks approvals -n agents
  kubectl toolhooks approvals -A --all -o json
  kubectl toolhooks approvals -n agents --watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "every approval, whatever its state (default: Pending only)")
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "the approvals of every namespace")
	fl.BoolVarP(&f.watch, "watch", "w", false, "after the list, print every change until interrupted")
	fl.StringVarP(&f.output, "output", "o", outputTable, "output format: table or json")
	f.kube.bind(fl)
	return cmd
}

func (f *approvalsFlags) run(cmd *cobra.Command) error {
	if f.output != outputTable && f.output != outputJSON {
		return badInput(fmt.Errorf("%w: --output %q (want table or json)", cli.ErrBadInput, f.output))
	}
	ns, cfg, err := f.kube.load()
	if err != nil {
		return badInput(err)
	}
	if f.allNamespaces {
		ns = ""
	}
	c, err := approvalClient(cfg)
	if err != nil {
		return badInput(err)
	}
	ctx := cmd.Context()
	items, rv, err := cli.ListApprovals(ctx, c, ns, f.all)
	if err != nil {
		return badInput(err)
	}
	p := &approvalPrinter{w: cmd.OutOrStdout(), json: f.output == outputJSON, namespaces: f.allNamespaces, lines: f.watch}
	if len(items) == 0 && !f.watch && !p.json {
		where := "namespace " + ns
		if f.allNamespaces {
			where = "any namespace"
		}
		what := "pending approvals"
		if f.all {
			what = "approvals"
		}
		_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No %s in %s.\n", what, where)
		return err
	}
	if err := p.print(items, true); err != nil {
		return err
	}
	if !f.watch {
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := f.watchChanges(ctx, c, ns, rv, p); err != nil && ctx.Err() == nil {
		return badInput(err)
	}
	return nil
}

// watchChanges prints the approvals that change after resourceVersion rv:
// without --all, the Pending ones and every later change of one printed
// before (so a decision shows). It watches again when the server ends a watch.
func (f *approvalsFlags) watchChanges(ctx context.Context, c client.WithWatch, ns, rv string, p *approvalPrinter) error {
	shown := map[string]bool{}
	for {
		w, err := c.Watch(ctx, &policyv1alpha1.ToolCallApprovalList{}, client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			return fmt.Errorf("watching toolcallapprovals: %w", err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				return fmt.Errorf("watching toolcallapprovals: %w", apierrors.FromObject(ev.Object))
			}
			a, ok := ev.Object.(*policyv1alpha1.ToolCallApproval)
			if !ok {
				continue
			}
			rv = a.ResourceVersion
			if ev.Type == watch.Bookmark || ev.Type == watch.Deleted {
				continue
			}
			if !f.all && a.CurrentState() != policyv1alpha1.ApprovalPending && !shown[string(a.UID)] {
				continue
			}
			shown[string(a.UID)] = true
			if err := p.print([]policyv1alpha1.ToolCallApproval{*a}, false); err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// approvalPrinter writes approvals as table rows or JSON.
type approvalPrinter struct {
	w          io.Writer
	json       bool
	namespaces bool
	// lines writes JSON one object per line (for --watch).
	lines bool
	// headed is set once the table header was written.
	headed bool
}

func (p *approvalPrinter) print(items []policyv1alpha1.ToolCallApproval, first bool) error {
	for i := range items {
		items[i].APIVersion, items[i].Kind = policyv1alpha1.GroupVersion.String(), "ToolCallApproval"
	}
	if p.json {
		if p.lines {
			for _, a := range items {
				b, err := json.Marshal(a)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(p.w, "%s\n", b); err != nil {
					return err
				}
			}
			return nil
		}
		if items == nil {
			items = []policyv1alpha1.ToolCallApproval{}
		}
		b, err := json.MarshalIndent(items, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	if !p.headed && (first || len(items) > 0) {
		p.headed = true
		if p.namespaces {
			_, _ = fmt.Fprint(tw, "NAMESPACE\t")
		}
		_, _ = fmt.Fprintln(tw, "NAME\tTOOL\tSENDER\tPOLICY\tRULE\tSTATE\tAGE\tEXPIRES\tARGUMENTS")
	}
	for i := range items {
		a := &items[i]
		if p.namespaces {
			_, _ = fmt.Fprintf(tw, "%s\t", a.Namespace)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.Name, dash(a.Spec.Tool), dash(a.Spec.Sender.Username),
			strings.ToLower(a.Spec.Policy.Kind)+"/"+a.Spec.Policy.Name, dash(a.Spec.Policy.Rule),
			a.CurrentState(), duration.HumanDuration(now.Sub(a.CreationTimestamp.Time)), expires(a.Spec.ExpiresAt.Time, now),
			dash(previewArgs(a, 60)))
	}
	return tw.Flush()
}

// expires says when t is, relative to now.
func expires(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.After(now) {
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

// previewArgs joins the argument previews as name=value, shortened to max runes.
func previewArgs(a *policyv1alpha1.ToolCallApproval, maxRunes int) string {
	parts := make([]string, 0, len(a.Spec.Arguments))
	for _, arg := range a.Spec.Arguments {
		parts = append(parts, arg.Name+"="+arg.Value)
	}
	s := []rune(oneLine(strings.Join(parts, " ")))
	if len(s) > maxRunes {
		return string(s[:maxRunes-1]) + "…"
	}
	return string(s)
}
