package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Options say which gateway the policies are evaluated for.
type Options struct {
	// Namespace is the gateway's namespace. Empty means the namespace of the
	// loaded policies when they all share one, or "default" when none is loaded.
	Namespace string
	// Labels are the gateway's labels, matched by the policies' gatewaySelectors.
	Labels map[string]string
	// Workspace is the directory standing in for the gateway's workspace; it
	// must exist. Relative call paths resolve against it.
	Workspace string
	// KeepWorkspaceRoots uses the policies' workspace roots as written.
	// Otherwise every AutonomyPolicy's spec.workspace.root is replaced by
	// Workspace, and ContractPolicy allowed paths under one of those roots are
	// moved under Workspace (/workspace/out becomes Workspace/out), so
	// policies written for the gateway's mount can be tested anywhere.
	KeepWorkspaceRoots bool
}

// Call is one tool call to evaluate.
type Call struct {
	Tool string
	// Args is the arguments' JSON text: one object, or empty for none.
	Args    string
	Session string
	Channel string
	// Sender is the sender id. As on the gateway it is the caller's
	// username: given without Caller, it names a caller of that username
	// without groups; given with Caller, it must be Caller's username.
	Sender string
	// Caller is the verified identity the call is evaluated as (policies'
	// subjects match it). Nil without Sender means the anonymous caller.
	Caller *hooks.Identity
	// Result is what the tool returned: when set and the call is allowed,
	// the result policies run on it as the gateway runs them on a tool's
	// output. Nil skips them.
	Result *string
	// Approval answers a rule that asks about the call as a person did when
	// it ran (replay): ApprovalApproved grants it (the decision is allowed,
	// with Ask set), ApprovalDenied refuses it (denied, with Ask set; the
	// call does not count against budgets). Empty asks nobody: the decision
	// is an ask.
	Approval hooks.ApprovalState
}

// CallerOf returns the identity c is evaluated as: Caller, else the user
// Sender names, else the anonymous caller.
func (c Call) CallerOf() (*hooks.Identity, error) {
	switch {
	case c.Caller == nil && c.Sender == "":
		return authn.Anonymous, nil
	case c.Caller == nil:
		return &hooks.Identity{Username: c.Sender}, nil
	case c.Caller.Username == "":
		return nil, BadInput("the caller has no username")
	case c.Sender != "" && c.Sender != c.Caller.Username:
		return nil, BadInput("the sender %q is not the caller's username %q: a gateway's sender id is its caller's username",
			c.Sender, c.Caller.Username)
	}
	return c.Caller, nil
}

// Decision is the outcome of one call, as `check -o json` prints it: allowed
// is always present; hook, rule and reason only on a denial, and policy only
// when the denying hook was compiled from a policy object.
type Decision struct {
	Allowed bool `json:"allowed"`
	// Ask is true when a policy would ask a person to approve the call (a
	// gateway then creates a ToolCallApproval); hook, policy, rule and
	// reason name the rule that asks.
	Ask    bool            `json:"ask,omitempty"`
	Hook   string          `json:"hook,omitempty"`
	Policy *wire.PolicyRef `json:"policy,omitempty"`
	Rule   string          `json:"rule,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// Layer is the enforcement layer that decided (static offline: the
	// policies on the call's arguments).
	Layer string `json:"layer,omitempty"`
	// Result is what the caller would see of Call.Result: set when the call
	// was allowed and had a result.
	Result *ResultDecision `json:"result,omitempty"`
	// Warnings are the would-be denials of policies in Warn mode.
	Warnings []hooks.Decision `json:"-"`
}

// ResultDecision is what the result policies made of a tool's output.
type ResultDecision struct {
	// Withheld is true when the caller would see none of the output; hook,
	// rule and reason then say why.
	Withheld bool   `json:"withheld"`
	Hook     string `json:"hook,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Output is what the caller would see: the output with its redactions,
	// or the withheld notice.
	Output string `json:"output"`
	// Findings are what each rule found (never the values), by hook.
	Findings []ResultFinding `json:"findings,omitempty"`

	warnings []hooks.Decision // would-be withholdings of warn-mode policies
}

// ResultFinding is what one rule of one result policy found.
type ResultFinding struct {
	Hook string `json:"hook"`
	// Warn is true for a policy in Warn mode, whose changes were not applied.
	Warn bool `json:"warn,omitempty"`
	hooks.ResultFinding
}

// Evaluator evaluates calls through the gateway's executor, built from one
// set of policies. Calls share its state (sessions' budgets), as they would
// on one gateway.
type Evaluator struct {
	exec *hooks.Executor
	// Namespace is the gateway namespace the policies were compiled for.
	Namespace string
	// Notes explain what the evaluation leaves out: policies of other
	// namespaces or not selecting the gateway, and fail-open plugins, which
	// are not called offline and so allow the calls they handle.
	Notes []string
}

// NewEvaluator compiles l for the gateway o describes, through the same
// compile path as the controller, and builds the gateway's executor. Every
// loaded policy is compiled, whatever its namespace; any that does not
// compile is an error naming its file, the policy and the reason, because
// the gateway would reject the whole set. l is not modified.
func NewEvaluator(l *Loaded, o Options) (*Evaluator, error) {
	ws, err := workspaceDir(o.Workspace)
	if err != nil {
		return nil, err
	}
	ns, err := namespace(l, o.Namespace)
	if err != nil {
		return nil, err
	}
	policies := l.Policies.DeepCopy() // rewriting roots leaves the caller's alone
	if !o.KeepWorkspaceRoots {
		replaceRoots(&policies, ws)
	}
	var (
		errs     []error
		cfg      *gatewayconfig.Config
		outcomes []compile.Outcome
	)
	for _, each := range l.Namespaces() {
		c, outs := compile.Compile(compile.Gateway{Namespace: each, Labels: o.Labels}, policies)
		for _, out := range outs {
			if out.Err != nil {
				r := out.Policy
				errs = append(errs, fmt.Errorf("%s: %s %s/%s does not compile (%s): %w",
					l.Source(r.Kind, r.Namespace, r.Name), r.Kind, r.Namespace, r.Name, compile.Reason(out.Err), out.Err))
			}
		}
		if each == ns {
			cfg, outcomes = c, outs
		}
	}
	if len(errs) > 0 {
		return nil, BadInput("%w", errors.Join(errs...))
	}
	if cfg == nil {
		cfg, outcomes = compile.Compile(compile.Gateway{Namespace: ns, Labels: o.Labels}, policies)
	}
	discard := audit.SinkFunc(func(context.Context, audit.Record) error { return nil })
	entries, err := gatewayconfig.Build(cfg, gatewayconfig.BuildOptions{
		Workspace: ws, Audit: discard, Runtime: []any{contract.NewState(contract.BudgetConfig{})},
	})
	if err != nil {
		return nil, BadInput("building the hook list: %w", err)
	}
	e := &Evaluator{Namespace: ns, Notes: notes(l, ns, outcomes, entries)}
	e.exec, err = hooks.NewExecutor(entries, nil, hooks.WithLogger(slog.New(slog.DiscardHandler)),
		hooks.WithApprover(offlineApprover{}))
	if err != nil {
		return nil, fmt.Errorf("building the executor: %w", err)
	}
	return e, nil
}

// Evaluate decides one call as the gateway's decision API does: the before
// phase, then the after phase (with a discarding audit sink), so that
// budgets count the call exactly as the gateway would. Arguments that are
// not one JSON object and an empty tool name are ErrBadInput.
func (e *Evaluator) Evaluate(ctx context.Context, c Call) (Decision, error) {
	if c.Tool == "" {
		return Decision{}, BadInput("a tool name is required")
	}
	for _, f := range [...]struct{ name, v string }{{"tool", c.Tool}, {"session", c.Session},
		{"channel", c.Channel}, {"sender", c.Sender}, {"arguments", c.Args}} {
		// Never a U+FFFD stand-in: the gateway rejects invalid UTF-8 too.
		if !utf8.ValidString(f.v) {
			return Decision{}, BadInput("the %s is not valid UTF-8", f.name)
		}
	}
	if _, err := hooks.ParseArgs(c.Args); err != nil {
		return Decision{}, BadInput("arguments of %s: %w", c.Tool, err)
	}
	id, err := c.CallerOf()
	if err != nil {
		return Decision{}, err
	}
	call := hooks.NewCall(c.Tool, c.Args)
	call.SessionID, call.ChannelID, call.SenderID, call.Caller = c.Session, c.Channel, id.Username, id
	if c.Approval != "" {
		ctx = context.WithValue(ctx, approvalKey{}, c.Approval)
	}
	res := e.exec.Evaluate(ctx, call)
	d := Decision{Allowed: res.Status == hooks.StatusAllowed, Warnings: res.Warnings}
	den := res.Denial
	// Asked about, and denied by nothing but the (recorded) approval.
	if res.Ask != nil && (den == nil || den.Rule == hooks.RuleApprovalDenied) {
		d.Ask, den = true, res.Ask
	}
	if den != nil && (!d.Allowed || d.Ask) {
		d.Hook, d.Rule, d.Reason, d.Layer = den.Hook, den.Rule, den.Reason, string(den.Layer)
		if den.Policy.Kind != "" {
			d.Policy = &wire.PolicyRef{Kind: den.Policy.Kind, Namespace: den.Policy.Namespace, Name: den.Policy.Name}
		}
	}
	if d.Allowed && c.Result != nil {
		if !utf8.ValidString(*c.Result) {
			return Decision{}, BadInput("the result is not valid UTF-8")
		}
		d.Result = resultDecision(e.exec.FilterResult(ctx, call, *c.Result, false))
		d.Warnings = append(d.Warnings, d.Result.warnings...)
	}
	return d, nil
}

// resultDecision describes what the result filters made of a result.
func resultDecision(res hooks.Result) *ResultDecision {
	r := &ResultDecision{Withheld: res.Status == hooks.StatusWithheld, Output: res.Output}
	if w := res.Withheld; w != nil {
		r.Hook, r.Rule, r.Reason = w.Hook, w.Rule, w.Reason
	}
	for _, f := range res.Filtering {
		for _, x := range f.Findings {
			r.Findings = append(r.Findings, ResultFinding{Hook: f.Hook, Warn: f.Warn, ResultFinding: x})
		}
	}
	r.warnings = res.Warnings
	return r
}

// offlineApprover answers every request for approval as undecided: offline
// evaluation reports that a call would be asked about and asks nobody. A
// call evaluated with a recorded decision (Call.Approval) gets that one.
type offlineApprover struct{}

// approvalKey holds the recorded decision of the call in its context.
type approvalKey struct{}

func (offlineApprover) RequestApproval(ctx context.Context, _ hooks.ApprovalRequest) (hooks.Approval, error) {
	if s, ok := ctx.Value(approvalKey{}).(hooks.ApprovalState); ok {
		return hooks.Approval{State: s, DecidedBy: "the recorded decision"}, nil
	}
	return hooks.Approval{State: hooks.ApprovalPending}, nil
}

// workspaceDir returns dir as an absolute path to an existing directory.
func workspaceDir(dir string) (string, error) {
	if dir == "" {
		return "", BadInput("a workspace directory is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", BadInput("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", BadInput("workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", BadInput("workspace %s is not a directory", abs)
	}
	return abs, nil
}

// namespace picks the gateway namespace (see Options.Namespace).
func namespace(l *Loaded, want string) (string, error) {
	if want != "" {
		return want, nil
	}
	switch all := l.Namespaces(); len(all) {
	case 0:
		return policyfile.DefaultNamespace, nil
	case 1:
		return all[0], nil
	default:
		return "", BadInput("the policies are in several namespaces (%s); choose the gateway's namespace",
			strings.Join(all, ", "))
	}
}

// replaceRoots points every policy's workspace root at ws and moves the
// paths the policies allow under one of those roots under ws.
func replaceRoots(p *compile.Policies, ws string) {
	var roots, paths []*string
	for _, o := range p.All() {
		k, _ := compile.KindFor(o)
		r, ps := k.Paths(o)
		roots, paths = append(roots, r...), append(paths, ps...)
	}
	var abs []string
	for _, r := range roots {
		if filepath.IsAbs(*r) {
			abs = append(abs, filepath.Clean(*r))
		}
		*r = ws
	}
	for _, path := range paths {
		*path = underRoot(*path, abs, ws)
	}
}

// underRoot returns path moved from the first root that contains it to ws,
// or path unchanged.
func underRoot(path string, roots []string, ws string) string {
	if !filepath.IsAbs(path) {
		return path
	}
	for _, r := range roots {
		rel, err := filepath.Rel(r, filepath.Clean(path))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(ws, rel)
	}
	return path
}

// notes lists what the evaluation of namespace ns leaves out.
func notes(l *Loaded, ns string, outcomes []compile.Outcome, entries []hooks.Entry) []string {
	var out []string
	if other := l.Count() - len(outcomes); other > 0 {
		out = append(out, fmt.Sprintf("%d policies outside namespace %s are ignored", other, ns))
	}
	for _, o := range outcomes {
		if !o.Selected {
			out = append(out, fmt.Sprintf("%s %s/%s does not select a gateway with these labels; it is ignored",
				o.Policy.Kind, o.Policy.Namespace, o.Policy.Name))
		}
	}
	for _, e := range entries {
		if n, ok := e.Hook.(hooks.OfflineNoter); ok && n.OfflineNote() != "" {
			out = append(out, n.OfflineNote())
		}
	}
	return out
}
