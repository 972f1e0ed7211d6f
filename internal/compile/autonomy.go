package compile

import (
	"strings"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
)

func init() {
	register(kind(Kind{Kind: autonomy.KindName, Resource: "autonomypolicies", Short: "ap"},
		func(l *policyv1alpha1.AutonomyPolicyList) []policyv1alpha1.AutonomyPolicy { return l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.AutonomyPolicy) (hooks.Spec, Common, error) {
			return autonomySpec(ref, &o.Spec), Common{o.Spec.EnforcementAction, o.Spec.RequireDecisionLog}, nil
		},
		lintAutonomy,
		func(o *policyv1alpha1.AutonomyPolicy) (roots, paths []*string) {
			if w := o.Spec.Workspace; w != nil && w.Root != "" {
				roots = append(roots, &w.Root)
			}
			return roots, nil
		}))
}

// autonomySpec compiles an AutonomyPolicy spec into its hook's.
func autonomySpec(ref hooks.PolicyRef, s *policyv1alpha1.AutonomyPolicySpec) *autonomy.Config {
	a := &autonomy.Config{
		Mode:               strings.ToLower(string(s.Mode)),
		ForbiddenPathGlobs: s.ForbiddenPathGlobs,
		Subjects:           subjects(ref, s.Subjects),
	}
	if s.Workspace != nil {
		a.WorkspaceRoot, a.WorkspaceOnly = s.Workspace.Root, s.Workspace.Only
	}
	if s.Shell != nil {
		a.AllowShell, a.AllowedShellCommands = s.Shell.Allow, s.Shell.AllowedCommands
		for _, d := range s.Shell.Dialects {
			a.ShellDialects = append(a.ShellDialects, string(d))
		}
	}
	if pp := s.ProtectedPaths; pp != nil {
		a.ProtectedPaths = &autonomy.ProtectedConfig{Add: pp.Add, Lift: pp.Lift, AllowGitPrograms: pp.AllowGitPrograms}
	}
	if k := s.Ask; k != nil {
		a.Ask = &autonomy.AskConfig{Tools: k.Tools, PathGlobs: k.PathGlobs, Commands: k.Commands}
		if k.Expiry != nil {
			a.Ask.ExpirySeconds = int64(k.Expiry.Seconds())
		}
	}
	if t := s.Tools; t != nil {
		a.ToolAllow, a.ToolDeny, a.ReadOnlyTools = t.Allow, t.Deny, t.ReadOnly
		if len(t.PathArguments) > 0 {
			a.PathArgs = make(map[string][]string, len(t.PathArguments))
			for _, pa := range t.PathArguments {
				a.PathArgs[pa.Tool] = pa.Keys
			}
		}
	}
	return a
}

// lintAutonomy warns of each shell allow-list entry that lets an agent run
// arbitrary programs (autonomy.Lint).
func lintAutonomy(p *policyv1alpha1.AutonomyPolicy) []string {
	if p.Spec.Shell == nil || !p.Spec.Shell.Allow {
		return nil
	}
	var out []string
	for _, f := range autonomy.Lint(p.Spec.Shell.AllowedCommands) {
		out = append(out, f.String())
	}
	return out
}
