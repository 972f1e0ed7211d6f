package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// harness runs the real reconcilers in a manager against envtest.
type harness struct {
	t     testing.TB
	c     client.Client
	store *Store
}

func startHarness(t testing.TB) *harness {
	t.Helper()
	env := testenv.Start(t)
	store := NewStore()
	env.StartManager(t, CacheOptions(), func(mgr ctrl.Manager) error {
		return SetupAll(mgr, store, GatewayReconciler{}, DefaultApprovalRetention)
	})
	return &harness{t: t, c: env.Client, store: store}
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := h.c.Create(context.Background(), obj); err != nil {
		h.t.Fatalf("Creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (h *harness) namespace(name string) {
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func (h *harness) gatewayPod(ns, name string, labels map[string]string) types.NamespacedName {
	l := map[string]string{policyv1alpha1.GatewayLabel: "main"}
	maps.Copy(l, labels)
	h.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "toolhooks/gateway:dev"}}},
	})
	return types.NamespacedName{Namespace: ns, Name: name}
}

// eventually polls cond until it holds or 30 s pass.
func (h *harness) eventually(what string, cond func() (bool, string)) {
	h.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) {
			ok, state := cond()
			last = state
			return ok, nil
		})
	if err != nil {
		h.t.Fatalf("Timed out waiting for %s; last state: %s", what, last)
	}
}

func hookNames(cfg *gatewayconfig.Config) []string {
	out := make([]string, 0, len(cfg.Hooks))
	for _, h := range cfg.Hooks {
		out = append(out, h.Name)
	}
	return out
}

// waitHooks waits until pod's compiled list is exactly want and returns its config.
func (h *harness) waitHooks(pod types.NamespacedName, want ...string) *gatewayconfig.Config {
	h.t.Helper()
	want = append([]string{"AuditLog"}, want...)
	var cfg *gatewayconfig.Config
	h.eventually(fmt.Sprintf("hooks of %s = %v", pod, want), func() (bool, string) {
		c, ok := h.store.Get(pod)
		if !ok {
			return false, "no configuration"
		}
		cfg = c
		return slices.Equal(hookNames(c), want), fmt.Sprint(hookNames(c))
	})
	return cfg
}

func (h *harness) waitStatus(obj client.Object, status func() *policyv1alpha1.PolicyStatus, accepted metav1.ConditionStatus,
	reason string, selected int32) *metav1.Condition {
	h.t.Helper()
	var cond *metav1.Condition
	h.eventually(fmt.Sprintf("%s Accepted=%s/%s selected=%d", obj.GetName(), accepted, reason, selected), func() (bool, string) {
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		st := status()
		cond = meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionAccepted)
		if cond == nil {
			return false, "no Accepted condition"
		}
		ok := cond.Status == accepted && cond.Reason == reason && st.Gateways.Selected == selected &&
			st.ObservedGeneration == obj.GetGeneration() && cond.ObservedGeneration == obj.GetGeneration()
		return ok, fmt.Sprintf("%s/%s selected=%d observedGeneration=%d", cond.Status, cond.Reason, st.Gateways.Selected, st.ObservedGeneration)
	})
	return cond
}

func autonomy(ns, name string, spec policyv1alpha1.AutonomyPolicySpec) *policyv1alpha1.AutonomyPolicy {
	return &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func TestReconcileCompilesEachGatewayPodsOrderedHookList(t *testing.T) {
	h := startHarness(t)
	ctx := context.Background()
	h.namespace("team-a")
	h.namespace("team-b")
	prod := h.gatewayPod("team-a", "gw-prod", map[string]string{"tier": "prod"})
	staging := h.gatewayPod("team-a", "gw-staging", map[string]string{"tier": "staging"})
	other := h.gatewayPod("team-b", "gw", nil)
	// A pod without the gateway label is not a gateway.
	h.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "not-a-gateway"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}})

	h.waitHooks(prod)
	empty := h.waitHooks(other)

	// Policies of every kind; the contract selects prod pods only.
	workspace := policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: "/workspace", Only: true},
		ForbiddenPathGlobs: []string{"**/.env"}}
	h.create(autonomy("team-a", "coding", workspace))
	h.create(&policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "budget"},
		Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 100,
			GatewaySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}})
	h.create(&policyv1alpha1.PluginHook{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "approvals"},
		Spec: policyv1alpha1.PluginHookSpec{Events: []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Transport: policyv1alpha1.PluginTransport{HTTP: &policyv1alpha1.HTTPTransport{URL: "http://127.0.0.1:9/hook"}}}})

	cfg := h.waitHooks(prod, "AutonomyPolicy/team-a/coding", "ContractPolicy/team-a/budget", "PluginHook/team-a/approvals")
	h.waitHooks(staging, "AutonomyPolicy/team-a/coding", "PluginHook/team-a/approvals")
	// Namespace isolation: team-b's gateway is untouched.
	if got, _ := h.store.Get(other); got.Revision != empty.Revision {
		t.Errorf("team-b gateway changed revision to %s after team-a policies were created", got.Revision)
	}
	var coding policyv1alpha1.AutonomyPolicy
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "coding"}, &coding); err != nil {
		t.Fatal(err)
	}
	ref := cfg.Hooks[1].Policy
	if ref.UID != string(coding.UID) || ref.Generation != coding.Generation || ref.Namespace != "team-a" {
		t.Errorf("entry policy ref = %+v, want uid %s generation %d", ref, coding.UID, coding.Generation)
	}

	// Status: Accepted and the selected gateway counts.
	h.waitStatus(&coding, func() *policyv1alpha1.PolicyStatus { return &coding.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 2)
	var budget policyv1alpha1.ContractPolicy
	budget.Namespace, budget.Name = "team-a", "budget"
	h.waitStatus(&budget, func() *policyv1alpha1.PolicyStatus { return &budget.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 1)

	// Creation order, tie-broken by name: two policies created in the same second
	// are ordered by name whatever order they were created in.
	var first, second string
	for attempt := 0; ; attempt++ {
		z, a := autonomy("team-a", fmt.Sprintf("zz-%d", attempt), workspace), autonomy("team-a", fmt.Sprintf("aa-%d", attempt), workspace)
		h.create(z)
		h.create(a)
		if z.CreationTimestamp.Equal(&a.CreationTimestamp) {
			first, second = a.Name, z.Name
			break
		}
		if attempt == 5 {
			t.Fatal("could not create two policies within one second")
		}
	}
	var all policyv1alpha1.AutonomyPolicyList
	if err := h.c.List(ctx, &all, client.InNamespace("team-a")); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all.Items, func(x, y policyv1alpha1.AutonomyPolicy) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
	wantOrder := make([]string, 0, len(all.Items)+1)
	for _, p := range all.Items {
		wantOrder = append(wantOrder, "AutonomyPolicy/team-a/"+p.Name)
	}
	if i, j := slices.Index(wantOrder, "AutonomyPolicy/team-a/"+first), slices.Index(wantOrder, "AutonomyPolicy/team-a/"+second); i < 0 || i > j {
		t.Fatalf("expected %s before %s in %v", first, second, wantOrder)
	}
	staged := h.waitHooks(staging, append(wantOrder, "PluginHook/team-a/approvals")...)

	// Update → new revision; the list still holds the policy.
	coding.Spec.ForbiddenPathGlobs = append(coding.Spec.ForbiddenPathGlobs, "**/*.pem")
	if err := h.c.Update(ctx, &coding); err != nil {
		t.Fatal(err)
	}
	h.eventually("a new revision after the update", func() (bool, string) {
		c, _ := h.store.Get(staging)
		i := slices.IndexFunc(c.Hooks, func(x gatewayconfig.Hook) bool { return x.Policy.Name == "coding" })
		return c.Revision != staged.Revision && i > 0 && c.Hooks[i].Policy.Generation == coding.Generation, c.Revision
	})

	// Delete → removed from the list.
	for _, p := range all.Items {
		if p.Name != "coding" {
			if err := h.c.Delete(ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.waitHooks(staging, "AutonomyPolicy/team-a/coding", "PluginHook/team-a/approvals")

	// Deleting a gateway pod forgets its configuration.
	if err := h.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gw-staging"}}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the deleted pod's configuration to go", func() (bool, string) {
		_, ok := h.store.Get(staging)
		return !ok, fmt.Sprint("present=", ok)
	})
	h.waitStatus(&coding, func() *policyv1alpha1.PolicyStatus { return &coding.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 1)
}

func TestReconcileReportsAnInvalidGlobWhileValidPoliciesStillApply(t *testing.T) {
	h := startHarness(t)
	ctx := context.Background()
	h.namespace("team-c")
	pod := h.gatewayPod("team-c", "gw", nil)
	ws := &policyv1alpha1.Workspace{Root: "/workspace"}
	h.create(autonomy("team-c", "a-valid", policyv1alpha1.AutonomyPolicySpec{Workspace: ws, ForbiddenPathGlobs: []string{"/secrets/**"}}))
	bad := autonomy("team-c", "b-broken", policyv1alpha1.AutonomyPolicySpec{Workspace: ws, ForbiddenPathGlobs: []string{"/workspace/[unclosed"}})
	h.create(bad)

	good := h.waitHooks(pod, "AutonomyPolicy/team-c/a-valid")
	cond := h.waitStatus(bad, func() *policyv1alpha1.PolicyStatus { return &bad.Status }, metav1.ConditionFalse, policyv1alpha1.ReasonInvalidGlob, 1)
	if !strings.Contains(cond.Message, "[unclosed") {
		t.Errorf("Accepted message %q does not name the bad pattern", cond.Message)
	}

	// The Warning event about it is emitted once, not on every reconcile.
	var events eventsv1.EventList
	h.eventually("an InvalidGlob event regarding the policy", func() (bool, string) {
		if err := h.c.List(ctx, &events, client.InNamespace("team-c")); err != nil {
			return false, err.Error()
		}
		n := countEvents(events.Items, "b-broken", policyv1alpha1.ReasonInvalidGlob)
		return n == 1, fmt.Sprint(n, " events")
	})
	ev := events.Items[slices.IndexFunc(events.Items, func(e eventsv1.Event) bool { return e.Regarding.Name == "b-broken" })]
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "[unclosed") || ev.Regarding.Kind != "AutonomyPolicy" {
		t.Errorf("event = type %s note %q regarding %s, want a Warning naming the pattern on the AutonomyPolicy", ev.Type, ev.Note, ev.Regarding.Kind)
	}

	// No hot loop: the broken policy's resourceVersion stays put while nothing changes.
	rv := bad.ResourceVersion
	h.create(autonomy("team-c", "c-later", policyv1alpha1.AutonomyPolicySpec{}))
	h.waitHooks(pod, "AutonomyPolicy/team-c/a-valid", "AutonomyPolicy/team-c/c-later")
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
		t.Fatal(err)
	}
	if bad.ResourceVersion != rv {
		t.Errorf("broken policy was rewritten (resourceVersion %s → %s) though nothing about it changed", rv, bad.ResourceVersion)
	}

	// Fixing it makes it Accepted and adds it to the list with a new revision.
	bad.Spec.ForbiddenPathGlobs = []string{"/workspace/[abc]"}
	if err := h.c.Update(ctx, bad); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(bad, func() *policyv1alpha1.PolicyStatus { return &bad.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 1)
	fixed := h.waitHooks(pod, "AutonomyPolicy/team-c/a-valid", "AutonomyPolicy/team-c/b-broken", "AutonomyPolicy/team-c/c-later")
	if fixed.Revision == good.Revision {
		t.Error("revision did not change when the fixed policy joined the list")
	}
}

// TestReconcileWarnsOfArbitraryProgramsWithAnEvent: a policy whose shell
// allow-list lets an agent run arbitrary programs is accepted and applied,
// with a Warning condition and one Warning Event naming each such entry.
func TestReconcileWarnsOfArbitraryProgramsWithAnEvent(t *testing.T) {
	h := startHarness(t)
	ctx := context.Background()
	h.namespace("team-l")
	pod := h.gatewayPod("team-l", "gw", nil)
	p := autonomy("team-l", "runner", policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: "/workspace"},
		Shell: &policyv1alpha1.ShellPolicy{Allow: true, AllowedCommands: []string{"git status", "python3 *", "npm run *"}}})
	h.create(p)
	h.waitHooks(pod, "AutonomyPolicy/team-l/runner")
	h.waitStatus(p, func() *policyv1alpha1.PolicyStatus { return &p.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 1)
	if w := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionWarning); w == nil ||
		w.Status != metav1.ConditionTrue || w.Reason != policyv1alpha1.ReasonArbitraryPrograms {
		t.Fatalf("Warning condition = %+v", w)
	}
	var events eventsv1.EventList
	h.eventually("an ArbitraryPrograms event regarding the policy", func() (bool, string) {
		if err := h.c.List(ctx, &events, client.InNamespace("team-l")); err != nil {
			return false, err.Error()
		}
		n := countEvents(events.Items, "runner", policyv1alpha1.ReasonArbitraryPrograms)
		return n == 1, fmt.Sprint(n, " events")
	})
	ev := events.Items[slices.IndexFunc(events.Items, func(e eventsv1.Event) bool {
		return e.Regarding.Name == "runner" && e.Reason == policyv1alpha1.ReasonArbitraryPrograms
	})]
	if ev.Type != corev1.EventTypeWarning || ev.Regarding.Kind != "AutonomyPolicy" ||
		!strings.Contains(ev.Note, `"python3 *"`) || !strings.Contains(ev.Note, `"npm run *"`) || strings.Contains(ev.Note, "git status") {
		t.Errorf("event = type %s note %q regarding %s, want a Warning on the AutonomyPolicy naming the two runner entries", ev.Type, ev.Note, ev.Regarding.Kind)
	}
}

func countEvents(items []eventsv1.Event, regarding, reason string) int {
	n := 0
	for _, e := range items {
		if e.Regarding.Name == regarding && e.Reason == reason {
			n++
		}
	}
	return n
}

// TestReconcileCompilesResultPoliciesAndReportsABadRegex: a ResultPolicy
// created against the API server joins the selected gateway's list after the
// other kinds, with its scan spec (timeout in milliseconds); one whose pattern
// is not RE2 is left out, with Accepted=False naming the pattern, and joins
// once fixed.
func TestReconcileCompilesResultPoliciesAndReportsABadRegex(t *testing.T) {
	h := startHarness(t)
	ctx := context.Background()
	h.namespace("team-r")
	pod := h.gatewayPod("team-r", "gw", map[string]string{"tier": "prod"})
	h.create(&policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-r", Name: "budget"},
		Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 100}})
	redact := &policyv1alpha1.ResultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-r", Name: "redact"},
		Spec: policyv1alpha1.ResultPolicySpec{
			Tools:           []string{"read_file", "github__*"},
			Detectors:       []policyv1alpha1.ResultDetector{"secrets"},
			Patterns:        []policyv1alpha1.ResultPattern{{Name: "ticket", Regex: `TICKET-\d+`, Action: policyv1alpha1.ResultWithhold}},
			Timeout:         &metav1.Duration{Duration: 1500 * time.Millisecond},
			GatewaySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}},
		}}
	h.create(redact)
	bad := &policyv1alpha1.ResultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-r", Name: "broken"},
		Spec: policyv1alpha1.ResultPolicySpec{Tools: []string{"*"},
			RemoveLines: []policyv1alpha1.ResultPattern{{Name: "debug", Regex: `^DEBUG (`}}}}
	h.create(bad)

	cfg := h.waitHooks(pod, "ContractPolicy/team-r/budget", "ResultPolicy/team-r/redact")
	got := cfg.Hooks[2]
	if got.Kind != resultscan.KindName || gatewayconfig.SpecAs[*resultscan.Spec](got) == nil || got.Policy.UID != string(redact.UID) {
		t.Fatalf("entry = %+v, want the ResultPolicy's scan spec", got)
	}
	r := gatewayconfig.SpecAs[*resultscan.Spec](got)
	if !slices.Equal(r.Detectors, []string{"secrets"}) || r.TimeoutMillis != 1500 || r.Action != "Redact" ||
		len(r.Patterns) != 1 || r.Patterns[0].Action != "Withhold" {
		t.Errorf("scan spec = %+v, want detectors [secrets], timeoutMillis 1500, the CRD's default action Redact and the ticket pattern withholding", r)
	}
	if got.Action != "Deny" {
		t.Errorf("entry action = %q, want the CRD's default enforcementAction Deny", got.Action)
	}

	h.waitStatus(redact, func() *policyv1alpha1.PolicyStatus { return &redact.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 1)
	cond := h.waitStatus(bad, func() *policyv1alpha1.PolicyStatus { return &bad.Status }, metav1.ConditionFalse, policyv1alpha1.ReasonInvalidSpec, 1)
	if !strings.Contains(cond.Message, `removeLines "debug"`) {
		t.Errorf("Accepted message %q does not name the bad rule", cond.Message)
	}

	bad.Spec.RemoveLines[0].Regex = `^DEBUG `
	if err := h.c.Update(ctx, bad); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(bad, func() *policyv1alpha1.PolicyStatus { return &bad.Status }, metav1.ConditionTrue, policyv1alpha1.ReasonCompiled, 1)
	// Result policies in creation order, then by name (both may share a second).
	want := []string{"ResultPolicy/team-r/redact", "ResultPolicy/team-r/broken"}
	if bad.CreationTimestamp.Equal(&redact.CreationTimestamp) {
		want[0], want[1] = want[1], want[0]
	}
	fixed := h.waitHooks(pod, append([]string{"ContractPolicy/team-r/budget"}, want...)...)
	if fixed.Revision == cfg.Revision {
		t.Error("revision did not change when the fixed result policy joined the list")
	}
}
