package cli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/wire"
)

func TestUnderRootMovesOnlyPathsInsideARoot(t *testing.T) {
	roots := []string{"/workspace", "/srv/repo"}
	cases := []struct {
		name, path, want string
	}{
		{"the root itself", "/workspace", "/ws"},
		{"a path under the root", "/workspace/out", "/ws/out"},
		{"a path under the second root", "/srv/repo/a/b", "/ws/a/b"},
		{"an unclean path under the root", "/workspace//out/../bin", "/ws/bin"},
		{"a sibling with the root as prefix", "/workspace2/out", "/workspace2/out"},
		{"a path outside every root", "/etc", "/etc"},
		{"a path escaping the root", "/workspace/../etc", "/workspace/../etc"},
		{"a relative path", "out", "out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := underRoot(tc.path, roots, "/ws"); got != tc.want {
				t.Errorf("underRoot(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestReplaceRootsRewritesACopyOnly(t *testing.T) {
	orig := compile.PoliciesOf(
		compile.ObjectsOf(policyv1alpha1.AutonomyPolicy{Spec: policyv1alpha1.AutonomyPolicySpec{
			Workspace: &policyv1alpha1.Workspace{Root: "/workspace"}}}),
		compile.ObjectsOf(policyv1alpha1.ContractPolicy{Spec: policyv1alpha1.ContractPolicySpec{
			AllowedPaths:       []string{"/workspace/src", "/tmp"},
			ScopedCapabilities: []policyv1alpha1.ScopedCapability{{Tool: "write_file", AllowedPaths: []string{"/workspace/out"}}},
		}}),
	)
	p := orig.DeepCopy()
	replaceRoots(&p, "/ws")
	if got := p.Of("AutonomyPolicy")[0].(*policyv1alpha1.AutonomyPolicy).Spec.Workspace.Root; got != "/ws" {
		t.Errorf("root %q, want /ws", got)
	}
	if got := p.Of("ContractPolicy")[0].(*policyv1alpha1.ContractPolicy).Spec.AllowedPaths; got[0] != "/ws/src" || got[1] != "/tmp" {
		t.Errorf("allowedPaths %v", got)
	}
	if got := p.Of("ContractPolicy")[0].(*policyv1alpha1.ContractPolicy).Spec.ScopedCapabilities[0].AllowedPaths[0]; got != "/ws/out" {
		t.Errorf("scoped allowedPaths %q", got)
	}
	if orig.Of("AutonomyPolicy")[0].(*policyv1alpha1.AutonomyPolicy).Spec.Workspace.Root != "/workspace" || orig.Of("ContractPolicy")[0].(*policyv1alpha1.ContractPolicy).Spec.AllowedPaths[0] != "/workspace/src" ||
		orig.Of("ContractPolicy")[0].(*policyv1alpha1.ContractPolicy).Spec.ScopedCapabilities[0].AllowedPaths[0] != "/workspace/out" {
		t.Error("the caller's policies were modified")
	}
}

func TestExpectMismatch(t *testing.T) {
	yes, no := true, false
	denial := Decision{Hook: "AutonomyPolicy/default/a", Policy: &wire.PolicyRef{Kind: "AutonomyPolicy", Namespace: "default", Name: "a"},
		Rule: "forbiddenPathGlobs", Reason: "no"}
	cases := []struct {
		name   string
		expect Expect
		got    Decision
		want   string
	}{
		{"an expected allow", Expect{Allowed: &yes}, Decision{Allowed: true}, ""},
		{"an unexpected denial", Expect{Allowed: &yes}, denial,
			"want allowed, got denied by forbiddenPathGlobs (hook AutonomyPolicy/default/a): no"},
		{"an expected denial of any kind", Expect{Allowed: &no}, denial, ""},
		{"an expected denial with every detail", Expect{Allowed: &no, Rule: "forbiddenPathGlobs", Policy: "a", Hook: denial.Hook}, denial, ""},
		{"an unexpected allow", Expect{Allowed: &no, Rule: "forbiddenPathGlobs"}, Decision{Allowed: true},
			"want denied by forbiddenPathGlobs, got allowed"},
		{"another rule", Expect{Allowed: &no, Rule: "workspaceOnly"}, denial,
			"want denied by workspaceOnly, got denied by forbiddenPathGlobs (hook AutonomyPolicy/default/a): no"},
		{"another policy", Expect{Allowed: &no, Policy: "b"}, denial,
			"want denied of policy b, got denied by forbiddenPathGlobs (hook AutonomyPolicy/default/a): no"},
		{"a policy named on a denial without one", Expect{Allowed: &no, Policy: "a"}, Decision{Hook: "arguments", Rule: "x"},
			"want denied of policy a, got denied by x (hook arguments): "},
		{"another hook", Expect{Allowed: &no, Hook: "x"}, denial,
			"want denied in hook x, got denied by forbiddenPathGlobs (hook AutonomyPolicy/default/a): no"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.expect.mismatch(tc.got); got != tc.want {
				t.Errorf("mismatch = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadPoliciesSkipsKustomizeFilesAndSuites(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml":  "resources: [p.yaml]\n",
		"x.test.yaml":         "kind: PolicyTest\n",
		".p.yaml.swp":         "junk",
		"notes.txt":           "junk",
		"sub/other.yaml":      "junk: [",
		"p.yaml":              "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: AutonomyPolicy\nmetadata: {name: p}\nspec: {}\n",
		"contracts/c.yaml":    "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ContractPolicy\nmetadata: {name: c}\nspec: {maxToolCalls: 1}\n",
		"contracts/more.yaml": "",
		"r.yaml": "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ResultPolicy\nmetadata: {name: r, namespace: team-r}\n" +
			"spec: {tools: [read_file], detectors: [secrets]}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := LoadPolicies([]string{dir, filepath.Join(dir, "contracts", "c.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	if l.Count() != 3 || l.Source("AutonomyPolicy", "default", "p") != filepath.Join(dir, "p.yaml") ||
		l.Source("ResultPolicy", "team-r", "r") != filepath.Join(dir, "r.yaml") {
		t.Errorf("loaded %d policies, sources %v", l.Count(), l.Sources)
	}
	if ns := l.Namespaces(); !slices.Equal(ns, []string{"default", "team-r"}) {
		t.Errorf("namespaces = %v, want default and team-r", ns)
	}
	if _, err := LoadPolicies(nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("no paths: error %v, want ErrBadInput", err)
	}
}
