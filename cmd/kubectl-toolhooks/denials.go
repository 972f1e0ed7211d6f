package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/toolhooks/toolhooks/internal/cli"
)

// outputTable is the default output of denials.
const outputTable = "table"

type denialsFlags struct {
	kube   kubeFlags
	since  time.Duration
	limit  int
	output string
}

func newDenialsCmd() *cobra.Command {
	f := &denialsFlags{}
	cmd := &cobra.Command{
		Use:     "denials [KIND[/NAME] | KIND NAME]",
		Aliases: []string{"describe-denials"},
		Short:   "List recent tool-call denials of policies, from the gateway's Events",
		Long: `List the denials (and warn-mode would-denies) the toolhooks gateways recorded as Events
on a policy, most recent first: when, how many, which gateway pod, tool, session, sender,
rule and reason. Without a name, the denials of every policy (of KIND) in the namespace.

KIND is autonomypolicy (ap), contractpolicy (ctp), pluginhook (ph) or resultpolicy (rp), as kubectl spells it.
A named policy must exist. The cluster is reached as kubectl does (--kubeconfig, --context,
-n and the other kubeconfig flags; $KUBECONFIG).

Gateways aggregate repeated denials of one policy through client-go's event series: a row with
COUNT > 1 stands for that many denials and shows the tool, session, sender and reason of its
first one.

Exit codes: 0 listed (also when there are none), 2 bad input or an API error.`,
		Example: `  kubectl toolhooks denials autonomypolicy/coding-agent -n agents --since 1h
  kubectl toolhooks denials ap coding-agent -o json --limit 20
  kubectl toolhooks denials -n agents`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.since, "since", 0, "only denials seen within this duration (e.g. 1h; default all)")
	fl.IntVar(&f.limit, "limit", 50, "at most this many rows, most recent first (0: all)")
	fl.StringVarP(&f.output, "output", "o", outputTable, "output format: table or json")
	f.kube.bind(fl)
	return cmd
}

func (f *denialsFlags) run(cmd *cobra.Command, args []string) error {
	if f.output != outputTable && f.output != outputJSON {
		return badInput(fmt.Errorf("%w: --output %q (want table or json)", cli.ErrBadInput, f.output))
	}
	if f.since < 0 || f.limit < 0 {
		return badInput(fmt.Errorf("%w: --since and --limit must not be negative", cli.ErrBadInput))
	}
	q := cli.DenialQuery{Since: f.since, Limit: f.limit}
	var kindArg string
	switch len(args) {
	case 1:
		kindArg, q.Name, _ = strings.Cut(args[0], "/")
		if strings.Contains(args[0], "/") && q.Name == "" {
			return badInput(fmt.Errorf("%w: %q names no policy (want KIND/NAME)", cli.ErrBadInput, args[0]))
		}
	case 2:
		if strings.Contains(args[0], "/") {
			return badInput(fmt.Errorf("%w: give KIND/NAME or KIND NAME, not both", cli.ErrBadInput))
		}
		kindArg, q.Name = args[0], args[1]
	}
	if kindArg != "" {
		k, err := cli.ParsePolicyKind(kindArg)
		if err != nil {
			return badInput(err)
		}
		q.Kind = &k
	}
	ns, cfg, err := f.kube.load()
	if err != nil {
		return badInput(err)
	}
	q.Namespace = ns
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return badInput(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return badInput(err)
	}
	recs, err := cli.ListDenials(cmd.Context(), cs, dyn, q)
	if err != nil {
		return badInput(err)
	}
	if f.output == outputJSON {
		if recs == nil {
			recs = []cli.DenialRecord{}
		}
		b, err := json.MarshalIndent(recs, "", "  ")
		if err != nil {
			return badInput(err)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
		return err
	}
	if len(recs) == 0 {
		what := "policies"
		if q.Kind != nil {
			what = strings.ToLower(q.Kind.Kind)
			if q.Name != "" {
				what += "/" + q.Name
			}
		}
		since := ""
		if f.since > 0 {
			since = " within " + f.since.String()
		}
		_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No denials found for %s in namespace %s%s.\n", what, ns, since)
		return err
	}
	return printDenials(cmd.OutOrStdout(), recs, time.Now())
}

// printDenials writes recs as a table, with ages relative to now.
func printDenials(w io.Writer, recs []cli.DenialRecord, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "LAST SEEN\tCOUNT\tACTION\tPOLICY\tGATEWAY\tTOOL\tSESSION\tSENDER\tRULE\tREASON")
	for _, r := range recs {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			duration.HumanDuration(now.Sub(r.LastSeen)), r.Count, r.Action,
			strings.ToLower(r.Policy.Kind)+"/"+r.Policy.Name,
			dash(r.Gateway), dash(r.Tool), dash(r.Session), dash(r.Sender), dash(r.Rule), oneLine(r.Reason))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return oneLine(s)
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", " ").Replace(s)
}
