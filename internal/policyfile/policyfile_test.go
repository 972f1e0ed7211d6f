package policyfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/plugins"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/policyfile"
)

const autonomyDoc = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: coding-agent
spec:
  workspace: {root: /srv/workspace}
  forbiddenPathGlobs: ["**/.env"]
  shell:
    allow: true
    allowedCommands: ["ls *"]
`

const contractDoc = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata:
  name: budget
  namespace: team-a
spec:
  maxToolCalls: 3
`

const pluginDoc = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: PluginHook
metadata:
  name: scanner
spec:
  events: ["tool:before"]
  transport:
    http:
      url: http://127.0.0.1:9/hook
`

func TestParseReadsEveryKindAndAppliesTheCRDDefaults(t *testing.T) {
	data := "# leading comment\n" + autonomyDoc + "---\n# only a comment\n---\n" + contractDoc + "---\n" + pluginDoc + "---\n"
	p, err := policyfile.Parse([]byte(data), "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Of("AutonomyPolicy")) != 1 || len(p.Of("ContractPolicy")) != 1 || len(p.Of("PluginHook")) != 1 {
		t.Fatalf("got %d autonomy, %d contract, %d plugin objects, want one each", len(p.Of("AutonomyPolicy")), len(p.Of("ContractPolicy")), len(p.Of("PluginHook")))
	}
	a, c, pl := p.Of("AutonomyPolicy")[0].(*policyv1alpha1.AutonomyPolicy), p.Of("ContractPolicy")[0].(*policyv1alpha1.ContractPolicy),
		p.Of("PluginHook")[0].(*policyv1alpha1.PluginHook)
	if a.Namespace != "default" || c.Namespace != "team-a" || pl.Namespace != "default" {
		t.Errorf("namespaces = %q, %q, %q; want default, team-a, default", a.Namespace, c.Namespace, pl.Namespace)
	}
	if a.Spec.Mode != policyv1alpha1.AutonomyFull || a.Spec.EnforcementAction != policyv1alpha1.EnforcementDeny {
		t.Errorf("autonomy defaults: mode %q action %q", a.Spec.Mode, a.Spec.EnforcementAction)
	}
	if c.Spec.EnforcementAction != policyv1alpha1.EnforcementDeny {
		t.Errorf("contract action %q, want Deny", c.Spec.EnforcementAction)
	}
	if pl.Spec.Timeout == nil || pl.Spec.Timeout.Duration != 5*time.Second || pl.Spec.FailurePolicy != policyv1alpha1.FailurePolicyFail {
		t.Errorf("plugin defaults: timeout %v failurePolicy %q", pl.Spec.Timeout, pl.Spec.FailurePolicy)
	}
}

// A loaded plugin compiles with the CRD's defaults: 5s, fail-closed.
func TestALoadedPluginCompilesWithTheCRDDefaults(t *testing.T) {
	p, err := policyfile.Parse([]byte(autonomyDoc+"---\n"+pluginDoc), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, p)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Errorf("%s: %v", compile.HookName(o.Policy), o.Err)
		}
	}
	if len(got.Hooks) != 3 {
		t.Fatalf("got %d hooks, want AuditLog, the autonomy policy and the plugin", len(got.Hooks))
	}
	if pl := gatewayconfig.SpecAs[*plugins.Spec](got.Hooks[2]); pl == nil || pl.TimeoutMillis != 5000 || pl.FailOpen {
		t.Errorf("plugin compiled to %+v, want a 5s fail-closed plugin", pl)
	}
}

func TestParseReadsLists(t *testing.T) {
	data := `apiVersion: v1
kind: List
items:
- apiVersion: policy.toolhooks.dev/v1alpha1
  kind: ContractPolicy
  metadata: {name: one}
  spec: {maxToolCalls: 1}
- apiVersion: policy.toolhooks.dev/v1alpha1
  kind: AutonomyPolicy
  metadata: {name: two}
  spec: {mode: ReadOnly}
`
	p, err := policyfile.Parse([]byte(data), "list.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Of("ContractPolicy")) != 1 || len(p.Of("AutonomyPolicy")) != 1 || p.Of("AutonomyPolicy")[0].(*policyv1alpha1.AutonomyPolicy).Spec.Mode != policyv1alpha1.AutonomyReadOnly {
		t.Fatalf("got %+v", p)
	}
}

func TestParseRejectsBadDocumentsNamingFileAndDocument(t *testing.T) {
	cases := []struct {
		name string
		data string
		want string
	}{
		{"an unknown kind", autonomyDoc + "---\napiVersion: policy.toolhooks.dev/v1alpha1\nkind: Deployment\nmetadata: {name: x}\n", "document 2: invalid policy file: unknown kind \"Deployment\""},
		{"a wrong apiVersion", strings.Replace(autonomyDoc, "v1alpha1", "v1", 1), "document 1: invalid policy file: AutonomyPolicy has apiVersion \"policy.toolhooks.dev/v1\""},
		{"an unknown field", autonomyDoc + "  forbiddenPaths: [x]\n",
			"document 1: AutonomyPolicy default/coding-agent: invalid policy file: unknown field \"spec.forbiddenPaths\""},
		{"two unknown fields", autonomyDoc + "  forbiddenPaths: [x]\n  shel: {}\n",
			"unknown field \"spec.forbiddenPaths\"; unknown field \"spec.shel\""},
		{"a duplicate field", autonomyDoc + "  mode: Full\n  mode: ReadOnly\n", "document 1: invalid policy file"},
		{"a missing kind", "apiVersion: policy.toolhooks.dev/v1alpha1\nmetadata: {name: x}\n", "document 1: invalid policy file: kind is missing"},
		{"a missing name", "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ContractPolicy\nspec: {}\n", "metadata.name is required"},
		{"metadata that is not an object", "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ContractPolicy\nmetadata: [x]\n",
			"ContractPolicy: invalid policy file: metadata: want an object"},
		{"an invalid mode", strings.Replace(autonomyDoc, "spec:\n", "spec:\n  mode: Anything\n", 1),
			"document 1: AutonomyPolicy default/coding-agent: invalid policy file: spec.mode: Unsupported value: \"Anything\""},
		{"several invalid values", strings.Replace(contractDoc, "spec:\n", "spec:\n  enforcementAction: Audit\n  rateLimits: [{tools: \"*\", perSenderPerMinute: 0}]\n", 1),
			"spec.enforcementAction: Unsupported value: \"Audit\": supported values: \"Deny\", \"Warn\"; " +
				"spec.rateLimits[0].perSenderPerMinute: Invalid value: 0: spec.rateLimits[0].perSenderPerMinute in body should be greater than or equal to 1"},
		{"a rule broken", strings.Replace(pluginDoc, "spec:\n", "spec:\n  timeout: 1m\n", 1),
			"PluginHook default/scanner: invalid policy file: spec.timeout: Invalid value: timeout must be more than 0s and at most 30s"},
		{"an object defined twice", contractDoc + "---\n" + contractDoc, "document 2: ContractPolicy team-a/budget is also defined at f.yaml: document 1"},
		{"a document that is not an object", autonomyDoc + "---\n- a\n- b\n", "document 2: invalid policy file: not an object"},
		{"malformed YAML", autonomyDoc + "---\nkind: [\n", "document 2: invalid policy file"},
		{"an unknown field in a list item",
			"apiVersion: v1\nkind: List\nitems:\n- apiVersion: policy.toolhooks.dev/v1alpha1\n  kind: ContractPolicy\n  metadata: {name: a}\n  spec: {budget: 1}\n",
			"document 1, item 1: ContractPolicy default/a: invalid policy file: unknown field \"spec.budget\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policyfile.Parse([]byte(tc.data), "f.yaml")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !errors.Is(err, policyfile.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), "f.yaml: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not start with the file and contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadDirReadsPolicyFilesInNameOrder(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b.yaml", contractDoc)
	write(t, dir, "a.yml", autonomyDoc)
	write(t, dir, "c.json", `{"apiVersion":"policy.toolhooks.dev/v1alpha1","kind":"ContractPolicy","metadata":{"name":"json"},"spec":{"maxToolCalls":1}}`)
	write(t, dir, ".a.yaml.swp", "garbage: [")
	write(t, dir, "README.md", "not a policy")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := policyfile.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Of("AutonomyPolicy")) != 1 || len(p.Of("ContractPolicy")) != 2 || p.Of("ContractPolicy")[0].(*policyv1alpha1.ContractPolicy).Name != "budget" || p.Of("ContractPolicy")[1].(*policyv1alpha1.ContractPolicy).Name != "json" {
		t.Fatalf("got %+v", p)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, p)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Errorf("%s: %v", compile.HookName(o.Policy), o.Err)
		}
	}
	names := make([]string, 0, len(cfg.Hooks))
	for _, h := range cfg.Hooks {
		names = append(names, h.Name)
	}
	want := "AuditLog AutonomyPolicy/default/coding-agent ContractPolicy/default/json"
	if strings.Join(names, " ") != want {
		t.Errorf("hooks %v, want %s", names, want)
	}
}

func TestLoadDirRejectsAnObjectDefinedInTwoFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", contractDoc)
	write(t, dir, "b.yaml", contractDoc)
	_, err := policyfile.LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "b.yaml: ContractPolicy team-a/budget is also defined in") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadDirNamesTheBrokenFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", autonomyDoc)
	write(t, dir, "broken.yaml", "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ContractPolicy\nmetadata: {name: x}\nspec: {maxToolCals: 1}\n")
	_, err := policyfile.LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "broken.yaml")+": document 1") {
		t.Fatalf("err = %v", err)
	}
	if _, err := policyfile.LoadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadDir of a missing directory succeeded")
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

const resultDoc = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ResultPolicy
metadata:
  name: redact-secrets
spec:
  tools: ["read_file", "github__*"]
  detectors: ["secrets", "email-address"]
  patterns:
  - name: ticket
    regex: 'TICKET-\d+'
    action: Withhold
  removeLines:
  - name: debug
    regex: '^DEBUG '
  timeout: 2s
`

// A ResultPolicy file loads with the CRD's defaults (action Redact,
// enforcementAction Deny) and compiles into a scan spec after the
// other kinds, its timeout in milliseconds.
func TestALoadedResultPolicyCompilesWithTheCRDDefaults(t *testing.T) {
	p, err := policyfile.Parse([]byte(resultDoc+"---\n"+contractDoc), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Of("ResultPolicy")) != 1 || len(p.Of("ContractPolicy")) != 1 {
		t.Fatalf("got %d result and %d contract objects, want one each", len(p.Of("ResultPolicy")), len(p.Of("ContractPolicy")))
	}
	r := p.Of("ResultPolicy")[0].(*policyv1alpha1.ResultPolicy)
	if r.Namespace != "default" || r.Spec.Action != policyv1alpha1.ResultRedact || r.Spec.EnforcementAction != policyv1alpha1.EnforcementDeny {
		t.Errorf("namespace %q, action %q, enforcementAction %q; want default, Redact, Deny", r.Namespace, r.Spec.Action, r.Spec.EnforcementAction)
	}
	got, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, p)
	if len(outcomes) != 1 || outcomes[0].Err != nil { // one per policy of the gateway's namespace
		t.Fatalf("outcomes = %+v, want the result policy's, compiled", outcomes)
	}
	if len(got.Hooks) != 2 || gatewayconfig.SpecAs[*resultscan.Spec](got.Hooks[1]) == nil {
		t.Fatalf("hooks = %+v, want AuditLog and the result policy (the contract is in team-a)", got.Hooks)
	}
	s := gatewayconfig.SpecAs[*resultscan.Spec](got.Hooks[1])
	if s.TimeoutMillis != 2000 || s.Action != "Redact" || len(s.Patterns) != 1 || s.Patterns[0].Action != "Withhold" ||
		len(s.RemoveLines) != 1 || s.RemoveLines[0].Action != "" {
		t.Errorf("scan spec = %+v", s)
	}
}

// Bad ResultPolicy files are refused naming the file and the field.
func TestParseRejectsBadResultPolicies(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"no tools", `{"detectors":["secrets"]}`, "spec.tools: Required value"},
		{"an empty tools list", `{"tools":[],"detectors":["secrets"]}`, "spec.tools: Invalid value"},
		{"a pattern without a regex", `{"tools":["*"],"patterns":[{"name":"t"}]}`, "spec.patterns[0].regex: Required value"},
		{"a rule name with a space", `{"tools":["*"],"patterns":[{"name":"my rule","regex":"x"}]}`, "spec.patterns[0].name: Invalid value"},
		{"two patterns with one name", `{"tools":["*"],"patterns":[{"name":"t","regex":"x"},{"name":"t","regex":"y"}]}`,
			"spec.patterns[1]: Duplicate value"},
		{"a zero maxBytes", `{"tools":["*"],"detectors":["jwt"],"maxBytes":0}`, "spec.maxBytes: Invalid value"},
		{"a timeout of zero", `{"tools":["*"],"detectors":["jwt"],"timeout":"0s"}`, "spec.timeout: Invalid value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"apiVersion":"policy.toolhooks.dev/v1alpha1","kind":"ResultPolicy","metadata":{"name":"bad"},"spec":` + tc.spec + `}`
			_, err := policyfile.Parse([]byte(doc), "bad.yaml")
			if err == nil {
				t.Fatalf("Parse accepted %s", tc.spec)
			}
			if !errors.Is(err, policyfile.ErrInvalid) || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want ErrInvalid naming bad.yaml and %q", err, tc.want)
			}
		})
	}
}
