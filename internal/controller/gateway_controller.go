// Package controller holds the toolhooks reconcilers: the gateway reconciler
// compiles each gateway pod's ordered hook list, and one status reconciler per
// policy kind reports whether the policy compiles and how many gateways it selects.
package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
)

// MaxPushBackoff caps the retry delay of a gateway pod whose push failed.
const MaxPushBackoff = 30 * time.Second

// GatewayReconciler compiles, for every gateway pod (a pod labelled
// toolhooks.dev/gateway), the ordered hook list of the policies in its
// namespace that select it, and records it in Store. It is level-triggered:
// every run derives the pod's list from the cache, compiling it only when no
// gateway with the same policies and selection of them got it already.
type GatewayReconciler struct {
	Client client.Client
	Store  *Store
	// Pusher delivers each pod's configuration; nil compiles only.
	Pusher *Pusher
	// Resync re-verifies a pod's revision this often (0: only on events), so a
	// gateway that restarted without its pod changing is re-pushed.
	Resync time.Duration
	// MaxConcurrentReconciles bounds parallel pod reconciles (and pushes); default 16.
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=autonomypolicies;contractpolicies;pluginhooks;resultpolicies,verbs=get;list;watch

// Reconcile compiles one gateway pod's configuration.
func (r *GatewayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := r.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.Store.Delete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting gateway pod: %w", err)
	}
	if !isGateway(&pod) {
		r.Store.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	policies, err := ListPolicies(ctx, r.Client, pod.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Compiled once for all the gateways of the namespace that the same
	// policies select.
	cfg := r.Store.compiled(&req.NamespacedName, compile.Gateway{Namespace: pod.Namespace, Labels: pod.Labels}, policies).cfg
	log := ctrl.LoggerFrom(ctx)
	if r.Store.Set(req.NamespacedName, cfg) {
		log.V(1).Info("Compiled gateway configuration", "revision", cfg.Revision, "hooks", len(cfg.Hooks))
	}
	if r.Pusher == nil || pod.Status.PodIP == "" {
		return ctrl.Result{}, nil
	}
	pushed, degraded, err := r.Pusher.Sync(ctx, &pod, cfg)
	if err != nil {
		return ctrl.Result{}, err // retried with the controller's exponential backoff
	}
	if pushed {
		log.Info("Pushed gateway configuration", "revision", cfg.Revision, "podIP", pod.Status.PodIP)
	}
	r.Store.Ack(req.NamespacedName, pod.UID, cfg, degraded)
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// liveUIDs returns the UIDs of every policy in p.
func liveUIDs(p compile.Policies) map[string]bool {
	live := make(map[string]bool, p.Len())
	for _, o := range p.All() {
		live[string(o.GetUID())] = true
	}
	return live
}

// ListPolicies reads every policy object of namespace from the cache.
func ListPolicies(ctx context.Context, c client.Reader, namespace string) (compile.Policies, error) {
	var p compile.Policies
	for _, k := range compile.Kinds {
		l := k.NewList()
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return compile.Policies{}, fmt.Errorf("listing %s: %w", k.Resource, err)
		}
		p.SetItems(k, l)
	}
	return p, nil
}

// isGateway reports whether pod is a live gateway pod.
func isGateway(pod *corev1.Pod) bool {
	_, labelled := pod.Labels[policyv1alpha1.GatewayLabel]
	return labelled && pod.DeletionTimestamp == nil
}

// gatewayPods lists the gateway pods of namespace.
func gatewayPods(ctx context.Context, c client.Reader, namespace string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{policyv1alpha1.GatewayLabel}); err != nil {
		return nil, fmt.Errorf("listing gateway pods: %w", err)
	}
	return pods.Items, nil
}

// gatewayPredicate keeps events of labelled pods only.
var gatewayPredicate = predicate.NewPredicateFuncs(func(o client.Object) bool {
	_, ok := o.GetLabels()[policyv1alpha1.GatewayLabel]
	return ok
})

// SetupWithManager registers the reconciler: pods are the root; any policy
// change maps to every gateway pod of its namespace.
func (r *GatewayReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toGateways := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		pods, err := gatewayPods(ctx, r.Client, o.GetNamespace())
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Mapping policy to gateway pods", "policy", client.ObjectKeyFromObject(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(pods))
		for i := range pods {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods[i])})
		}
		return reqs
	})
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 16
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gateway").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// Per-pod backoff only, capped: a gateway that keeps failing must not
			// slow the retries of the others (as a shared token bucket would), and
			// one that recovers gets its configuration within MaxPushBackoff.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxPushBackoff),
		}).
		For(&corev1.Pod{}, builder.WithPredicates(gatewayPredicate))
	for _, k := range compile.Kinds {
		b = b.Watches(k.New(), toGateways, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}
