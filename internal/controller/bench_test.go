package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// benchPolicies are a namespace's policies of every kind: the autonomy policy
// and the plugin select every gateway, the contract only tier=prod ones.
func benchPolicies(ns string) (*policyv1alpha1.AutonomyPolicy, []client.Object) {
	ap := autonomy(ns, "coding", policyv1alpha1.AutonomyPolicySpec{
		Workspace:          &policyv1alpha1.Workspace{Root: "/workspace", Only: true},
		ForbiddenPathGlobs: []string{"**/.env", "**/*.pem", "/workspace/secrets/**"},
		Shell: &policyv1alpha1.ShellPolicy{Allow: true, AllowedCommands: []string{
			"git status", "git diff *", "git log *", "ls *", "cat *", "grep -rn *", "go build ./...", "go vet ./..."}},
	})
	ct := &policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "budget"},
		Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 100, AllowedPaths: []string{"/workspace/**"},
			GatewaySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}}
	ph := &policyv1alpha1.PluginHook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approvals"},
		Spec: policyv1alpha1.PluginHookSpec{Events: []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Transport: policyv1alpha1.PluginTransport{HTTP: &policyv1alpha1.HTTPTransport{URL: "http://127.0.0.1:9/hook"}}}}
	return ap, []client.Object{ap, ct, ph}
}

// benchPod is gateway pod i of n: all but the last tenth are tier=prod; each
// carries its own pod-name label, as a StatefulSet's pods do.
func benchPod(ns string, i, n int) *corev1.Pod {
	tier := "prod"
	if i >= n-n/10 {
		tier = fmt.Sprintf("canary-%d", i)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("gw-%d", i),
		Labels: map[string]string{policyv1alpha1.GatewayLabel: "main", "tier": tier,
			"statefulset.kubernetes.io/pod-name": fmt.Sprintf("gw-%d", i)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "toolhooks/gateway:dev"}}}}
}

// BenchmarkReconcile50Pods measures the reconciles one policy change causes,
// run one after the other on the manager's cache: the gateway reconcile of
// each of 50 pods, then the changed policy's status reconcile.
func BenchmarkReconcile50Pods(b *testing.B) {
	const ns, n = "bench", 50
	env := testenv.Start(b)
	ctx := context.Background()
	ap, policies := benchPolicies(ns)
	objs := append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}, policies...)
	for i := range n {
		objs = append(objs, benchPod(ns, i, n))
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	var c client.Client
	env.StartManager(b, CacheOptions(), func(mgr ctrl.Manager) error { c = mgr.GetClient(); return nil })
	// seen waits until the cache holds the policy at generation.
	seen := func(generation int64) {
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			var cur policyv1alpha1.AutonomyPolicy
			if c.List(ctx, &pods, client.InNamespace(ns)) != nil || len(pods.Items) != n ||
				c.Get(ctx, client.ObjectKeyFromObject(ap), &cur) != nil {
				return false, nil
			}
			return cur.Generation == generation, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	store := NewStore()
	gw := &GatewayReconciler{Client: c, Store: store}
	status := &PolicyStatusReconciler{Kind: compile.Kinds[0], Client: c, Recorder: &events.FakeRecorder{}, Store: store}
	var gateways, statuses time.Duration
	reconcileAll := func() {
		start := time.Now()
		for i := range n {
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("gw-%d", i)}}
			if _, err := gw.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		mid := time.Now()
		if _, err := status.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ap)}); err != nil {
			b.Fatal(err)
		}
		gateways, statuses = gateways+mid.Sub(start), statuses+time.Since(mid)
	}
	seen(1)
	reconcileAll()
	gateways, statuses = 0, 0
	u := 0
	for b.Loop() {
		b.StopTimer()
		base := ap.DeepCopy()
		u++
		ap.Spec.ForbiddenPathGlobs[0] = fmt.Sprintf("**/.env-%d", u)
		if err := env.Client.Patch(ctx, ap, client.MergeFrom(base)); err != nil {
			b.Fatal(err)
		}
		seen(ap.Generation)
		b.StartTimer()
		reconcileAll()
	}
	// Split of ns/op: the 50 gateway reconciles, and the status reconcile
	// (which includes its status patch to the API server).
	b.ReportMetric(float64(gateways.Microseconds())/float64(u), "gateways-µs/op")
	b.ReportMetric(float64(statuses.Microseconds())/float64(u), "status-µs/op")
}

// BenchmarkPolicyChange50Pods measures, against a real API server, the time
// from a policy update to all 50 gateway pods holding the new revision and the
// policy's status observing the new generation.
func BenchmarkPolicyChange50Pods(b *testing.B) {
	const ns, n = "bench", 50
	h := startHarness(b)
	ctx := context.Background()
	h.namespace(ns)
	pods := make([]types.NamespacedName, n)
	for i := range n {
		p := benchPod(ns, i, n)
		h.create(p)
		pods[i] = client.ObjectKeyFromObject(p)
	}
	ap, policies := benchPolicies(ns)
	for _, o := range policies {
		h.create(o)
	}
	waitAll := func(generation int64) {
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, p := range pods {
				cfg, ok := h.store.Get(p)
				if !ok || len(cfg.Hooks) < 2 || cfg.Hooks[1].Policy.Generation != generation {
					return false, nil
				}
			}
			var cur policyv1alpha1.AutonomyPolicy
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(ap), &cur); err != nil {
				return false, err
			}
			return cur.Status.ObservedGeneration == generation, nil
		})
		if err != nil {
			b.Fatalf("waiting for generation %d everywhere: %v", generation, err)
		}
	}
	waitAll(1)
	u := 0
	for b.Loop() {
		u++
		base := ap.DeepCopy()
		ap.Spec.ForbiddenPathGlobs[0] = fmt.Sprintf("**/.env-%d", u)
		if err := h.c.Patch(ctx, ap, client.MergeFrom(base)); err != nil {
			b.Fatal(err)
		}
		waitAll(ap.Generation)
	}
}
