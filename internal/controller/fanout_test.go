package controller

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
)

// compilesMetric reads toolhooks_controller_compiles_total from
// controller-runtime's registry.
func compilesMetric(t *testing.T) float64 {
	t.Helper()
	return counter(t, "toolhooks_controller_compiles_total")
}

// reusesMetric is toolhooks_controller_compile_reuses_total.
func reusesMetric(t *testing.T) float64 {
	t.Helper()
	return counter(t, "toolhooks_controller_compile_reuses_total")
}

// counter is the value of the controller's counter name.
func counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal(name, " is not registered")
	return 0
}

// fanout is a namespace of gateway pods for the compile-sharing tests.
type fanout struct {
	*harness
	ns   string
	pods map[types.NamespacedName]map[string]string // labels by pod
}

func (f *fanout) pod(name string, labels map[string]string) {
	l := map[string]string{"statefulset.kubernetes.io/pod-name": name}
	maps.Copy(l, labels)
	f.pods[f.gatewayPod(f.ns, name, l)] = l
}

// relabel sets pod's tier label.
func (f *fanout) relabel(pod types.NamespacedName, tier string) {
	f.t.Helper()
	var p corev1.Pod
	if err := f.c.Get(context.Background(), pod, &p); err != nil {
		f.t.Fatal(err)
	}
	base := p.DeepCopy()
	p.Labels["tier"] = tier
	if err := f.c.Patch(context.Background(), &p, client.MergeFrom(base)); err != nil {
		f.t.Fatal(err)
	}
	f.pods[pod]["tier"] = tier
}

// want compiles, independently of the controller, each pod's list from the
// policies the API server holds now (none of which may fail to compile).
func (f *fanout) want() map[types.NamespacedName]*gatewayconfig.Config {
	f.t.Helper()
	policies, err := ListPolicies(context.Background(), f.c, f.ns)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[types.NamespacedName]*gatewayconfig.Config{}
	for pod, l := range f.pods {
		full := map[string]string{policyv1alpha1.GatewayLabel: "main"}
		maps.Copy(full, l)
		cfg, outcomes := compile.Compile(compile.Gateway{Namespace: f.ns, Labels: full}, policies)
		for _, o := range outcomes {
			if o.Err != nil {
				f.t.Fatalf("%s does not compile: %v", o.Policy.Name, o.Err)
			}
		}
		out[pod] = cfg
	}
	return out
}

// converge waits until every pod holds the revision want computes and the
// statuses of every policy observe their generation, then lets the
// reconcilers drain.
func (f *fanout) converge() {
	f.t.Helper()
	want := f.want()
	f.eventually("every pod holding its revision", func() (bool, string) {
		for pod, cfg := range want {
			got, ok := f.store.Get(pod)
			if !ok || got.Revision != cfg.Revision {
				return false, fmt.Sprintf("%s: %v, want %v", pod.Name, got, hookNames(cfg))
			}
		}
		return true, ""
	})
	policies, err := ListPolicies(context.Background(), f.c, f.ns)
	if err != nil {
		f.t.Fatal(err)
	}
	objs := make([]client.Object, 0, len(policies.Of("AutonomyPolicy"))+len(policies.Of("ContractPolicy")))
	for _, o := range policies.Of("AutonomyPolicy") {
		objs = append(objs, o)
	}
	for _, o := range policies.Of("ContractPolicy") {
		objs = append(objs, o)
	}
	for _, o := range objs {
		f.eventually(o.GetName()+" status observing its generation", func() (bool, string) {
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
				return false, err.Error()
			}
			st := o.(interface {
				GetPolicyStatus() *policyv1alpha1.PolicyStatus
			}).GetPolicyStatus()
			return st.ObservedGeneration == o.GetGeneration(), fmt.Sprint(st.ObservedGeneration)
		})
	}
	// Reconciles still queued would compile now if they were going to.
	time.Sleep(500 * time.Millisecond)
}

// compiles runs change and returns how many compiles it caused, by
// toolhooks_controller_compiles_total.
func (f *fanout) compiles(t *testing.T, change func()) int {
	t.Helper()
	before := compilesMetric(t)
	change()
	f.converge()
	return int(compilesMetric(t) - before)
}

func (f *fanout) update(obj client.Object, mutate func()) {
	f.t.Helper()
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		f.t.Fatal(err)
	}
	mutate()
	if err := f.c.Update(context.Background(), obj); err != nil {
		f.t.Fatal(err)
	}
}

// TestGatewaysSelectedAlikeShareOneCompile: a policy change compiles one list
// per distinct selection of the namespace's policies (20 prod gateways, 2
// canaries with labels of their own) and fans it out; the status reconciler
// reuses it. Label changes, selector changes, pod deletion, a policy that
// stops compiling and the no-policy state each get the right lists.
func TestGatewaysSelectedAlikeShareOneCompile(t *testing.T) {
	h := startHarness(t)
	ctx := context.Background()
	f := &fanout{harness: h, ns: "fan", pods: map[types.NamespacedName]map[string]string{}}
	h.namespace(f.ns)
	for i := range 20 {
		f.pod(fmt.Sprintf("gw-%d", i), map[string]string{"tier": "prod"})
	}
	f.pod("canary-a", map[string]string{"tier": "canary-a"})
	f.pod("canary-b", map[string]string{"tier": "canary-b"})
	all := autonomy(f.ns, "all", policyv1alpha1.AutonomyPolicySpec{
		Workspace: &policyv1alpha1.Workspace{Root: "/workspace"}, ForbiddenPathGlobs: []string{"**/.env"}})
	h.create(all)
	budget := &policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "budget"},
		Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 100,
			GatewaySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}}
	h.create(budget)
	f.converge()
	if g := h.store.Groups(); g != 2 {
		t.Errorf("%d compiled groups, want 2 (prod, canaries)", g)
	}

	t.Run("a policy change compiles once per selection", func(t *testing.T) {
		reuses := reusesMetric(t)
		n := f.compiles(t, func() {
			f.update(all, func() { all.Spec.ForbiddenPathGlobs = append(all.Spec.ForbiddenPathGlobs, "**/*.pem") })
		})
		if n != 2 {
			t.Errorf("the policy change caused %d compiles, want 2", n)
		}
		// 20 + 2 pods, less the 2 that compiled, plus the status reconciles.
		if r := reusesMetric(t) - reuses; r < 21 {
			t.Errorf("%v reconciles reused a compiled list, want at least 21", r)
		}
	})

	t.Run("a pod relabelled into an existing selection reuses its list", func(t *testing.T) {
		if n := f.compiles(t, func() { f.relabel(types.NamespacedName{Namespace: f.ns, Name: "canary-a"}, "prod") }); n != 0 {
			t.Errorf("relabelling caused %d compiles, want 0", n)
		}
	})

	t.Run("a selector change regroups the gateways", func(t *testing.T) {
		n := f.compiles(t, func() {
			f.update(budget, func() { budget.Spec.GatewaySelector.MatchLabels = map[string]string{"tier": "canary-b"} })
		})
		if n != 2 {
			t.Errorf("the selector change caused %d compiles, want 2", n)
		}
	})

	t.Run("a deleted pod's group is forgotten", func(t *testing.T) {
		canary := types.NamespacedName{Namespace: f.ns, Name: "canary-b"}
		if err := h.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: canary.Name}},
			client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		delete(f.pods, canary)
		h.eventually("the deleted pod's configuration to go", func() (bool, string) {
			_, ok := h.store.Get(canary)
			return !ok && h.store.Groups() == 1, fmt.Sprint("present=", ok, " groups=", h.store.Groups())
		})
		// Recreated with the same name and labels, it is compiled for afresh.
		if n := f.compiles(t, func() { f.pod(canary.Name, map[string]string{"tier": "canary-b"}) }); n != 1 {
			t.Errorf("the recreated pod caused %d compiles, want 1", n)
		}
	})

	t.Run("a policy that stops compiling keeps its last good version everywhere", func(t *testing.T) {
		before := compilesMetric(t)
		good := all.Generation
		f.update(all, func() { all.Spec.ForbiddenPathGlobs = []string{"/workspace/[unclosed"} })
		h.waitStatus(all, func() *policyv1alpha1.PolicyStatus { return &all.Status }, metav1.ConditionFalse,
			policyv1alpha1.ReasonInvalidGlob, 22)
		h.eventually("every pod compiled from the broken generation", func() (bool, string) {
			return compilesMetric(t)-before >= 2, fmt.Sprint(compilesMetric(t)-before, " compiles")
		})
		time.Sleep(500 * time.Millisecond)
		for pod := range f.pods {
			cfg, _ := h.store.Get(pod)
			if len(cfg.Hooks) < 2 || cfg.Hooks[1].Policy.Name != "all" || cfg.Hooks[1].Policy.Generation != good {
				t.Errorf("%s: hooks %v, want the last good generation %d of all", pod.Name, cfg.Hooks, good)
			}
		}
		if n := compilesMetric(t) - before; n != 2 {
			t.Errorf("the broken policy caused %v compiles, want 2", n)
		}
	})

	t.Run("without policies every gateway gets the audit log alone", func(t *testing.T) {
		for _, o := range []client.Object{all, budget} {
			if err := h.c.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		h.eventually("every pod back to the audit log alone", func() (bool, string) {
			for pod := range f.pods {
				if cfg, ok := h.store.Get(pod); !ok || len(cfg.Hooks) != 1 {
					return false, pod.Name
				}
			}
			return h.store.Groups() == 1, fmt.Sprint(h.store.Groups(), " groups")
		})
		if _, ok := h.store.LastGood(string(all.UID)); ok {
			t.Error("the deleted policy's last good version is still kept")
		}
	})
}
