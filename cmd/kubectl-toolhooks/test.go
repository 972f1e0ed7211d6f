package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolhooks/toolhooks/internal/cli"
)

type testFlags struct {
	files              []string
	workspace          string
	keepWorkspaceRoots bool
}

func newTestCmd() *cobra.Command {
	f := &testFlags{}
	cmd := &cobra.Command{
		Use:   "test -f SUITE.yaml|SUITE_DIR...",
		Short: "Run PolicyTest suites: policies, calls and the decisions expected",
		Long: `Run PolicyTest suites and report each case as PASS or FAIL, then "N passed, M failed".

A suite file (one YAML document, decoded strictly):

  apiVersion: policy.toolhooks.dev/v1alpha1
  kind: PolicyTest
  metadata: {name: coding-agent}        # optional; names the suite in the report
  policies: [../policies.yaml, dir/]    # files or directories, relative to the suite file
  workspace: workspace                  # optional; relative to the suite file (default: its directory)
  namespace: default                    # optional (default: the policies' namespace)
  labels: {app: agent}                  # optional gateway labels
  cases:
  - name: reading the secrets file is denied
    tool: read_file
    args: {path: config/.env}           # a YAML map
    session: s1                         # optional, also channel and sender
    expect:
      allowed: false                    # required
      rule: forbiddenPathGlobs          # optional, denials only; so are
      policy: coding-agent              #   policy (the object's name) and
      hook: AutonomyPolicy/default/coding-agent  # hook

The workspace replaces the policies' workspace roots as for check (see check --help).
The cases of a suite run in order through one executor, like the calls of one gateway,
so budgets accumulate across them: cases without a session share the session
"policytest"; give a case its own session to isolate it.

A directory runs every *.test.yaml and *.test.yml file below it.

Exit codes: 0 every case passed, 1 a case failed, 2 bad input (a suite or policy
that cannot be read, decoded or compiled).`,
		Example: `  kubectl toolhooks test -f config/samples/tests/coding-agent.test.yaml
  kubectl toolhooks test -f policies/tests/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "filename", "f", nil, "suite files or directories (repeatable, comma-separated)")
	fl.StringVar(&f.workspace, "workspace", "", "directory standing in for the gateway's workspace (overrides the suites')")
	fl.BoolVar(&f.keepWorkspaceRoots, "keep-workspace-roots", false, "use the policies' workspace roots as written")
	return cmd
}

func (f *testFlags) run(cmd *cobra.Command) error {
	if len(f.files) == 0 {
		return badInput(fmt.Errorf("%w: -f SUITE.yaml is required", cli.ErrBadInput))
	}
	// Every suite is read and validated before any runs, so a typo in one
	// is reported before the others' results.
	var suites []*cli.LoadedSuite
	for _, p := range f.files {
		paths, err := cli.FindSuites(p)
		if err != nil {
			return badInput(err)
		}
		for _, path := range paths {
			s, err := cli.LoadSuite(path)
			if err != nil {
				return badInput(err)
			}
			suites = append(suites, s)
		}
	}
	var report strings.Builder
	passed, failed := 0, 0
	for _, s := range suites {
		results, err := cli.RunSuite(cmd.Context(), s, cli.Options{Workspace: f.workspace, KeepWorkspaceRoots: f.keepWorkspaceRoots})
		if err != nil {
			_, _ = fmt.Fprint(cmd.OutOrStdout(), report.String())
			return badInput(fmt.Errorf("suite %s: %w", s.Path, err))
		}
		fmt.Fprintf(&report, "%s\n", s.Name())
		for _, r := range results {
			if r.Pass {
				passed++
				fmt.Fprintf(&report, "  PASS %s\n", r.Name)
			} else {
				failed++
				fmt.Fprintf(&report, "  FAIL %s: %s\n", r.Name, r.Message)
			}
		}
	}
	fmt.Fprintf(&report, "%d passed, %d failed\n", passed, failed)
	if _, err := fmt.Fprint(cmd.OutOrStdout(), report.String()); err != nil {
		return badInput(fmt.Errorf("writing the report: %w", err))
	}
	if failed > 0 {
		return &exitError{code: exitDenied}
	}
	return nil
}
