package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// SuiteKind is the kind of a PolicyTest suite file.
const SuiteKind = "PolicyTest"

// DefaultSession is the session id of the cases that set none: they share
// one session, so budgets accumulate across them as in one agent session.
const DefaultSession = "policytest"

// Suite is a PolicyTest file: policies, the gateway they are evaluated for,
// and the cases to evaluate in order through one executor.
type Suite struct {
	// apiVersion is policy.toolhooks.dev/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// kind is PolicyTest.
	Kind string `json:"kind"`
	// metadata optionally names the suite.
	Metadata *SuiteMeta `json:"metadata,omitempty"`
	// policies are policy files or directories, relative to the suite file.
	Policies []string `json:"policies"`
	// workspace is the directory standing in for the gateway's workspace,
	// relative to the suite file (default: the suite file's directory).
	Workspace string `json:"workspace,omitempty"`
	// namespace is the gateway's namespace (default: the policies' namespace).
	Namespace string `json:"namespace,omitempty"`
	// labels are the gateway's labels, matched by gatewaySelectors.
	Labels map[string]string `json:"labels,omitempty"`
	// cases are evaluated in order.
	Cases []Case `json:"cases"`
}

// SuiteMeta is a suite's metadata.
type SuiteMeta struct {
	// name names the suite in reports.
	Name string `json:"name,omitempty"`
}

// Case is one tool call and the decision expected for it.
type Case struct {
	// name is unique within the suite.
	Name string `json:"name"`
	// tool is the tool name.
	Tool string `json:"tool"`
	// args is the arguments object (a YAML map).
	Args json.RawMessage `json:"args,omitempty"`
	// session is the call's session id (default DefaultSession).
	Session string `json:"session,omitempty"`
	// channel is the call's channel id.
	Channel string `json:"channel,omitempty"`
	// sender is the call's sender id: the caller's username (see as).
	Sender string `json:"sender,omitempty"`
	// as is the verified caller's username the call is made as, as
	// kubectl's --as (default: sender, or the anonymous caller).
	As string `json:"as,omitempty"`
	// asGroups are the verified caller's groups (with as only).
	AsGroups []string `json:"asGroups,omitempty"`
	// result is what the tool returns: the result policies run on it when
	// the call is allowed, and expect.result says what the caller sees.
	Result *string `json:"result,omitempty"`
	// expect is the expected decision.
	Expect Expect `json:"expect"`
}

// Expect is a case's expected decision. Rule, policy and hook may only be
// set when allowed is false; each that is set must match the denial.
type Expect struct {
	// allowed is required.
	Allowed *bool `json:"allowed"`
	// ask expects a policy to ask a person to approve the call (with
	// allowed: false); rule, policy and hook then name the rule that asks.
	Ask bool `json:"ask,omitempty"`
	// rule is the denying rule (e.g. forbiddenPathGlobs).
	Rule string `json:"rule,omitempty"`
	// policy is the name of the denying policy object.
	Policy string `json:"policy,omitempty"`
	// hook is the denying hook (e.g. AutonomyPolicy/default/coding-agent).
	Hook string `json:"hook,omitempty"`
	// result is what the caller should see of the case's result (with
	// allowed: true and a case result only).
	Result *ExpectResult `json:"result,omitempty"`
}

// ExpectResult is what a case expects the result policies to make of the
// tool's result. Every field that is set must hold.
type ExpectResult struct {
	// withheld expects the caller to see none of the result (default false:
	// the result, redacted or not, is passed on).
	Withheld bool `json:"withheld,omitempty"`
	// output is exactly what the caller sees.
	Output *string `json:"output,omitempty"`
	// contains are texts the caller sees.
	Contains []string `json:"contains,omitempty"`
	// excludes are texts the caller must not see, such as the secret itself.
	Excludes []string `json:"excludes,omitempty"`
	// rules are rules that must have fired (e.g. aws-access-key-id).
	Rules []string `json:"rules,omitempty"`
}

// LoadedSuite is a decoded, validated suite with its paths resolved.
type LoadedSuite struct {
	Suite
	// Path is the suite file.
	Path string
	// PolicyPaths are Suite.Policies resolved against the suite's directory.
	PolicyPaths []string
	// WorkspaceDir is Suite.Workspace resolved against the suite's directory.
	WorkspaceDir string
}

// Name is the suite's name in reports: metadata.name, or its file.
func (s *LoadedSuite) Name() string {
	if s.Metadata != nil && s.Metadata.Name != "" {
		return s.Metadata.Name
	}
	return s.Path
}

// FindSuites returns the suite files path stands for: path itself when it is
// a file, or every *.test.yaml and *.test.yml file below it, in lexical order.
func FindSuites(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, BadInput("reading suites: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	var out []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && IsSuiteFile(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, BadInput("reading suites: %w", err)
	}
	if len(out) == 0 {
		return nil, BadInput("no suite files (*.test.yaml, *.test.yml) under %s", path)
	}
	return out, nil
}

// LoadSuite reads and validates one suite file. Decoding is strict: unknown
// or duplicate fields, a second YAML document and missing required fields
// are errors naming the file (and the case).
func LoadSuite(path string) (*LoadedSuite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, BadInput("reading suite: %w", err)
	}
	s, err := decodeSuite(data)
	if err != nil {
		return nil, BadInput("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	ls := &LoadedSuite{Suite: s, Path: path, WorkspaceDir: dir}
	if s.Workspace != "" {
		ls.WorkspaceDir = resolve(dir, s.Workspace)
	}
	for _, p := range s.Policies {
		ls.PolicyPaths = append(ls.PolicyPaths, resolve(dir, p))
	}
	return ls, nil
}

// resolve returns p relative to dir unless it is absolute.
func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// decodeSuite decodes and validates the one YAML document of a suite.
func decodeSuite(data []byte) (Suite, error) {
	if !utf8.Valid(data) {
		return Suite{}, errors.New("the suite is not valid UTF-8")
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Suite{}, err
		}
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return Suite{}, err
		}
		if t := bytes.TrimSpace(js); len(t) > 0 && string(t) != "null" {
			docs = append(docs, js)
		}
	}
	if len(docs) != 1 {
		return Suite{}, fmt.Errorf("want exactly one YAML document, found %d", len(docs))
	}
	var s Suite
	strictErrs, err := sigsjson.UnmarshalStrict(docs[0], &s)
	if err = errors.Join(append([]error{err}, strictErrs...)...); err != nil {
		return Suite{}, err
	}
	return s, s.validate()
}

// validate checks what strict decoding cannot.
func (s *Suite) validate() error {
	if gv := policyv1alpha1.GroupVersion.String(); s.APIVersion != gv {
		return fmt.Errorf("apiVersion %q (want %s)", s.APIVersion, gv)
	}
	if s.Kind != SuiteKind {
		return fmt.Errorf("kind %q (want %s)", s.Kind, SuiteKind)
	}
	if len(s.Policies) == 0 {
		return errors.New("policies: at least one policy file or directory is required")
	}
	if len(s.Cases) == 0 {
		return errors.New("cases: at least one case is required")
	}
	seen := map[string]bool{}
	for i, c := range s.Cases {
		where := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			return fmt.Errorf("%s: name is required", where)
		}
		where = fmt.Sprintf("cases[%d] (%s)", i, c.Name)
		if seen[c.Name] {
			return fmt.Errorf("%s: duplicate case name", where)
		}
		seen[c.Name] = true
		if c.Tool == "" {
			return fmt.Errorf("%s: tool is required", where)
		}
		if a := bytes.TrimSpace(c.Args); len(a) > 0 && string(a) != "null" && a[0] != '{' {
			return fmt.Errorf("%s: args must be a map", where)
		}
		e := c.Expect
		if e.Allowed == nil {
			return fmt.Errorf("%s: expect.allowed is required", where)
		}
		if *e.Allowed && (e.Rule != "" || e.Policy != "" || e.Hook != "" || e.Ask) {
			return fmt.Errorf("%s: expect.ask, expect.rule, expect.policy and expect.hook describe a denial or an ask; "+
				"they need allowed: false", where)
		}
		if e.Result != nil && (c.Result == nil || !*e.Allowed) {
			return fmt.Errorf("%s: expect.result needs a case result and allowed: true (a denied call returns nothing)", where)
		}
		if c.Result != nil && !*e.Allowed {
			return fmt.Errorf("%s: a case result needs allowed: true (a denied call returns nothing)", where)
		}
	}
	return nil
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Name string
	Pass bool
	// Message explains a failure: what was wanted and what the call got.
	Message string
}

// RunSuite evaluates s's cases in order through one evaluator built from its
// policies, so that they share state like the calls of one gateway. o's
// Workspace and KeepWorkspaceRoots apply when set; the suite gives the rest.
// An error (bad policies, workspace or arguments) means the suite could not run.
func RunSuite(ctx context.Context, s *LoadedSuite, o Options) ([]CaseResult, error) {
	l, err := LoadPolicies(s.PolicyPaths)
	if err != nil {
		return nil, err
	}
	opts := Options{Namespace: s.Namespace, Labels: s.Labels, Workspace: s.WorkspaceDir, KeepWorkspaceRoots: o.KeepWorkspaceRoots}
	if o.Workspace != "" {
		opts.Workspace = o.Workspace
	}
	ev, err := NewEvaluator(l, opts)
	if err != nil {
		return nil, err
	}
	results := make([]CaseResult, 0, len(s.Cases))
	for _, c := range s.Cases {
		session := c.Session
		if session == "" {
			session = DefaultSession
		}
		call := Call{Tool: c.Tool, Args: string(c.Args), Session: session, Channel: c.Channel, Sender: c.Sender, Result: c.Result}
		if c.As != "" {
			call.Caller = &hooks.Identity{Username: c.As, Groups: c.AsGroups}
		} else if len(c.AsGroups) > 0 {
			return nil, BadInput("case %s: asGroups without as", c.Name)
		}
		d, err := ev.Evaluate(ctx, call)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", c.Name, err)
		}
		msg := c.Expect.mismatch(d)
		results = append(results, CaseResult{Name: c.Name, Pass: msg == "", Message: msg})
	}
	return results, nil
}

// mismatch returns "" when d is what e expects, or says how it differs.
func (e Expect) mismatch(d Decision) string {
	want := e.String()
	if *e.Allowed {
		if !d.Allowed {
			return "want " + want + ", got " + describe(d)
		}
		if e.Result != nil {
			return e.Result.mismatch(d.Result)
		}
		return ""
	}
	policy := ""
	if d.Policy != nil {
		policy = d.Policy.Name
	}
	if !d.Allowed && e.Ask == d.Ask && (e.Rule == "" || e.Rule == d.Rule) && (e.Policy == "" || e.Policy == policy) &&
		(e.Hook == "" || e.Hook == d.Hook) {
		return ""
	}
	return "want " + want + ", got " + describe(d)
}

// String describes the expected decision, e.g. "denied by forbiddenPathGlobs".
func (e Expect) String() string {
	if *e.Allowed {
		return "allowed"
	}
	var b strings.Builder
	b.WriteString("denied")
	if e.Ask {
		b.Reset()
		b.WriteString("asked for approval")
	}
	if e.Rule != "" {
		b.WriteString(" by " + e.Rule)
	}
	if e.Policy != "" {
		b.WriteString(" of policy " + e.Policy)
	}
	if e.Hook != "" {
		b.WriteString(" in hook " + e.Hook)
	}
	return b.String()
}

// describe says what decision a call got, e.g.
// "denied by shellAllowList (hook AutonomyPolicy/default/coding-agent): reason".
func describe(d Decision) string {
	if d.Allowed {
		return "allowed"
	}
	if d.Ask {
		return fmt.Sprintf("asked for approval by %s (hook %s): %s", d.Rule, d.Hook, d.Reason)
	}
	return fmt.Sprintf("denied by %s (hook %s): %s", d.Rule, d.Hook, d.Reason)
}

// mismatch returns "" when r is what e expects, or says how it differs.
func (e *ExpectResult) mismatch(r *ResultDecision) string {
	if r == nil {
		return "want a result, got none"
	}
	var bad []string
	if e.Withheld != r.Withheld {
		got := "passed on"
		if r.Withheld {
			got = fmt.Sprintf("withheld by %s (hook %s): %s", r.Rule, r.Hook, r.Reason)
		}
		bad = append(bad, fmt.Sprintf("want the result withheld: %t, got %s", e.Withheld, got))
	}
	if e.Output != nil && *e.Output != r.Output {
		bad = append(bad, fmt.Sprintf("want output %q, got %q", *e.Output, r.Output))
	}
	for _, c := range e.Contains {
		if !strings.Contains(r.Output, c) {
			bad = append(bad, fmt.Sprintf("want the output to contain %q", c))
		}
	}
	for _, x := range e.Excludes {
		if strings.Contains(r.Output, x) {
			bad = append(bad, fmt.Sprintf("want the output not to contain %q", x))
		}
	}
	fired := map[string]bool{}
	var names []string
	for _, f := range r.Findings {
		if !fired[f.Rule] {
			fired[f.Rule] = true
			names = append(names, f.Rule)
		}
	}
	for _, rule := range e.Rules {
		if !fired[rule] {
			bad = append(bad, fmt.Sprintf("want rule %s to fire, got %v", rule, names))
		}
	}
	return strings.Join(bad, "; ")
}
