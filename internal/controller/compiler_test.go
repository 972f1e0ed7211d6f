package controller

import (
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
)

func compiledPolicy(name, uid string, generation int64, globs ...string) policyv1alpha1.AutonomyPolicy {
	return policyv1alpha1.AutonomyPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), Generation: generation},
		Spec: policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: "/workspace"},
			ForbiddenPathGlobs: globs}}
}

func TestConcurrentReconcilesOfOneSelectionShareOneCompile(t *testing.T) {
	s := NewStore()
	p := compile.PoliciesOf(compile.ObjectsOf[policyv1alpha1.AutonomyPolicy](compiledPolicy("a", "u-a", 1, "**/.env")))
	before := compilesMetric(t)
	var wg sync.WaitGroup
	got := make([]*gatewayconfig.Config, 50)
	for i := range got {
		wg.Go(func() {
			pod := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("gw-%d", i)}
			got[i] = s.compiled(&pod, compile.Gateway{Namespace: "ns", Labels: map[string]string{"pod": pod.Name}}, p).cfg
		})
	}
	wg.Wait()
	if n := compilesMetric(t) - before; n != 1 {
		t.Errorf("%v compiles, want 1", n)
	}
	for i, cfg := range got {
		if cfg != got[0] {
			t.Fatalf("pod %d got another list than pod 0", i)
		}
	}
	for i := range got {
		s.Delete(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("gw-%d", i)})
	}
	if g := s.Groups(); g != 0 {
		t.Errorf("%d groups kept after every pod went, want 0", g)
	}
}

// A list compiled while a broken policy had no last good version is compiled
// again once one is known, so the policy's protection is not lost.
func TestAListIsRecompiledWhenABrokenPolicysLastGoodVersionChanges(t *testing.T) {
	s := NewStore()
	gw := compile.Gateway{Namespace: "ns"}
	pod := &types.NamespacedName{Namespace: "ns", Name: "gw"}
	before := compilesMetric(t)
	compiles := func() float64 { return compilesMetric(t) - before }
	broken := compile.PoliciesOf(compile.ObjectsOf[policyv1alpha1.AutonomyPolicy](compiledPolicy("a", "u-a", 2, "/workspace/[unclosed")))
	if c := s.compiled(pod, gw, broken); len(c.cfg.Hooks) != 1 || c.outcomes[0].Err == nil {
		t.Fatalf("hooks %v, outcomes %v: want the broken policy left out and reported", hookNames(c.cfg), c.outcomes)
	}
	// Another reconcile, which saw generation 1, remembers it.
	good, _ := compile.Compile(gw, compile.PoliciesOf(compile.ObjectsOf[policyv1alpha1.AutonomyPolicy](compiledPolicy("a", "u-a", 1, "**/.env"))))
	s.Remember("ns", good, map[string]bool{"u-a": true})

	c := s.compiled(pod, gw, broken)
	if compiles() != 2 || len(c.cfg.Hooks) != 2 || c.cfg.Hooks[1].Policy.Generation != 1 {
		t.Fatalf("after %v compiles hooks %v: want a recompile holding generation 1", compiles(), c.cfg.Hooks)
	}
	if c.outcomes[0].Err == nil {
		t.Error("the outcome no longer reports the broken generation")
	}
	if s.compiled(pod, gw, broken); compiles() != 2 {
		t.Errorf("%v compiles, want the list reused", compiles())
	}
}

func TestFingerprint(t *testing.T) {
	prod := policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u-c", Generation: 1},
		Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 1,
			GatewaySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}}
	a, b := compiledPolicy("a", "u-a", 1), compiledPolicy("b", "u-b", 1)
	p := compile.PoliciesOf(compile.ObjectsOf(a, b), compile.ObjectsOf(prod))
	in, sel := fingerprint(p, map[string]string{"tier": "prod", "pod": "gw-1"})

	if in2, sel2 := fingerprint(p, map[string]string{"tier": "prod", "pod": "gw-2"}); in2 != in || sel2 != sel {
		t.Error("two gateways the same policies select differ")
	}
	if _, sel2 := fingerprint(p, map[string]string{"tier": "staging"}); sel2 == sel {
		t.Error("a gateway the contract does not select has the same selection")
	}
	swapped := compile.PoliciesOf(compile.ObjectsOf(b, a), compile.ObjectsOf(prod))
	if in2, sel2 := fingerprint(swapped, map[string]string{"tier": "prod"}); in2 != in || sel2 != sel {
		t.Error("the order the cache lists policies in matters")
	}
	bumped := compile.PoliciesOf(compile.ObjectsOf(a, compiledPolicy("b", "u-b", 2)), compile.ObjectsOf(prod))
	if in2, _ := fingerprint(bumped, map[string]string{"tier": "prod"}); in2 == in {
		t.Error("a new generation leaves the inputs unchanged")
	}
	recreated := compile.PoliciesOf(compile.ObjectsOf(a, compiledPolicy("b", "u-b2", 1)), compile.ObjectsOf(prod))
	if in2, _ := fingerprint(recreated, map[string]string{"tier": "prod"}); in2 == in {
		t.Error("a policy recreated under its name leaves the inputs unchanged")
	}
}
