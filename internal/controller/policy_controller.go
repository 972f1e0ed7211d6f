package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
)

// PolicyStatusReconciler keeps one policy kind's status current: Accepted
// (does the spec compile, and if not why, as the gateway reconciler's compile
// found) and gateways.selected. It writes
// status at most once per reconcile, only when it changed, and emits an Event
// only when the Accepted condition changes. A policy that does not compile is
// a user's mistake: it is reported and not retried.
type PolicyStatusReconciler struct {
	// Kind is the policy kind reconciled.
	Kind     compile.Kind
	Client   client.Client
	Recorder events.EventRecorder
	// Store tells which gateways acknowledged which policy generations.
	Store *Store
	// Resync recomputes the status this often even without events (0: never).
	Resync time.Duration
}

// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=autonomypolicies/status;contractpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=pluginhooks/status;resultpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile recomputes one policy's status.
func (r *PolicyStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pods, err := gatewayPods(ctx, r.Client, obj.GetNamespace())
	if err != nil {
		return ctrl.Result{}, err
	}
	verdict, err := r.verdict(ctx, obj, pods)
	if err != nil {
		return ctrl.Result{}, err
	}
	var view GatewayView
	if r.Store != nil && r.Store.Pushing {
		view = storeView{store: r.Store, obj: obj}
	}
	desired := DesiredStatus(obj, obj.GetPolicyStatus(), verdict, pods, view)

	current := obj.GetPolicyStatus()
	if equality.Semantic.DeepEqual(*current, desired) {
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	before := meta.FindStatusCondition(current.Conditions, policyv1alpha1.ConditionAccepted)
	var prev *metav1.Condition
	if before != nil {
		c := *before
		prev = &c
	}
	prevWarning := ""
	if w := meta.FindStatusCondition(current.Conditions, policyv1alpha1.ConditionWarning); w != nil {
		prevWarning = w.Message
	}
	base := obj.DeepCopyObject().(client.Object)
	*current = desired
	// Optimistic locking: a patch computed from a stale cached copy must not
	// interleave with a newer one (a conflict is retried with backoff).
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patching status: %w", err)
	}
	accepted := meta.FindStatusCondition(desired.Conditions, policyv1alpha1.ConditionAccepted)
	if prev == nil || prev.Status != accepted.Status || prev.Reason != accepted.Reason || prev.Message != accepted.Message {
		eventType := corev1.EventTypeNormal
		if accepted.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(obj, nil, eventType, accepted.Reason, "Compile", "%s", accepted.Message)
	}
	if w := meta.FindStatusCondition(desired.Conditions, policyv1alpha1.ConditionWarning); w != nil && w.Message != prevWarning {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, w.Reason, "Lint", "%s", w.Message)
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// verdict tells whether obj compiles (nil) or why not. It takes obj's outcome
// from the hook list of one of the namespace's gateways, which the gateway
// reconciler compiles as well (they share one compile), and compiles obj
// alone only when no such list tells: the namespace has no gateway, the list
// holds another generation of obj, or obj's gatewaySelector is invalid (the
// list then says nothing of the rest of its spec).
func (r *PolicyStatusReconciler) verdict(ctx context.Context, obj compile.Object, pods []corev1.Pod) (verdict, err error) {
	if _, selErr := compile.Selects(obj.GetGatewaySelector(), nil); r.Store != nil && selErr == nil {
		for i := range pods {
			if !isGateway(&pods[i]) {
				continue
			}
			policies, err := ListPolicies(ctx, r.Client, obj.GetNamespace())
			if err != nil {
				return nil, err
			}
			gw := compile.Gateway{Namespace: obj.GetNamespace(), Labels: pods[i].Labels}
			for _, o := range r.Store.compiled(nil, gw, policies).outcomes {
				if o.Policy.UID == string(obj.GetUID()) && o.Policy.Generation == obj.GetGeneration() {
					return o.Err, nil
				}
			}
			break
		}
	}
	_, verdict = compile.One(obj)
	compilesTotal.Inc()
	return verdict, nil
}

// GatewayView is what the status needs to know of the gateways' reports.
type GatewayView interface {
	// Enforces reports whether pod acknowledged the policy's current generation.
	Enforces(pod *corev1.Pod) bool
	// Degraded reports whether pod reports the policy's plugin circuit open.
	Degraded(pod *corev1.Pod) bool
}

// storeView answers GatewayView for one policy from the Store.
type storeView struct {
	store *Store
	obj   client.Object
}

func (v storeView) Enforces(pod *corev1.Pod) bool {
	return v.store.Enforces(pod, v.obj.GetUID(), v.obj.GetGeneration())
}

func (v storeView) Degraded(pod *corev1.Pod) bool {
	k, ok := compile.KindFor(v.obj)
	return ok && v.store.Degraded(pod, compile.HookName(compile.RefOf(k.Kind, v.obj)))
}

// DesiredStatus computes a policy's status from its spec, whether it compiles
// (verdict: nil, or the compile error of its current generation) and the
// gateway pods of its namespace (pure: no API calls). current supplies
// existing conditions so unchanged ones keep their transition time. view, when
// not nil (the controller pushes), makes the status report gateways.enforcing,
// the Enforced condition and, for a kind that reports it (a PluginHook's
// plugin), the Degraded condition.
func DesiredStatus(obj client.Object, current *policyv1alpha1.PolicyStatus, verdict error, pods []corev1.Pod,
	view GatewayView) policyv1alpha1.PolicyStatus {
	desired := *current.DeepCopy()
	desired.ObservedGeneration = obj.GetGeneration()

	cond := metav1.Condition{Type: policyv1alpha1.ConditionAccepted, ObservedGeneration: obj.GetGeneration()}
	if verdict != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, compile.Reason(verdict), verdict.Error()
	} else {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, policyv1alpha1.ReasonCompiled,
			"The policy compiles into a hook"
	}
	meta.SetStatusCondition(&desired.Conditions, cond)
	if warnings := compile.Lint(obj); cond.Status == metav1.ConditionTrue && len(warnings) > 0 {
		meta.SetStatusCondition(&desired.Conditions, metav1.Condition{Type: policyv1alpha1.ConditionWarning,
			ObservedGeneration: obj.GetGeneration(), Status: metav1.ConditionTrue,
			Reason: policyv1alpha1.ReasonArbitraryPrograms, Message: strings.Join(warnings, "; ")})
	} else {
		meta.RemoveStatusCondition(&desired.Conditions, policyv1alpha1.ConditionWarning)
	}

	var selected, enforcing, degraded int32
	sel := obj.(interface{ GetGatewaySelector() *metav1.LabelSelector }).GetGatewaySelector()
	for i := range pods {
		if !isGateway(&pods[i]) {
			continue
		}
		if ok, err := compile.Selects(sel, pods[i].Labels); err == nil && ok {
			selected++
			if view != nil && view.Enforces(&pods[i]) {
				enforcing++
			}
			if view != nil && view.Degraded(&pods[i]) {
				degraded++
			}
		}
	}
	desired.Gateways.Selected, desired.Gateways.Enforcing = selected, enforcing
	if view == nil {
		return desired
	}
	if k, ok := compile.KindFor(obj); ok && k.ReportsDegraded {
		d := metav1.Condition{Type: policyv1alpha1.ConditionDegraded, ObservedGeneration: obj.GetGeneration(),
			Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonPluginHealthy,
			Message: "No gateway reports this plugin failing"}
		if degraded > 0 {
			d.Status, d.Reason = metav1.ConditionTrue, policyv1alpha1.ReasonCircuitOpen
			d.Message = fmt.Sprintf("%d of %d selected gateways stopped calling the plugin after repeated failures "+
				"(circuit open: its failure policy applies until a probe succeeds)", degraded, selected)
		}
		meta.SetStatusCondition(&desired.Conditions, d)
	}
	enforced := metav1.Condition{Type: policyv1alpha1.ConditionEnforced, ObservedGeneration: obj.GetGeneration()}
	switch {
	case cond.Status != metav1.ConditionTrue:
		enforced.Status, enforced.Reason = metav1.ConditionFalse, cond.Reason
		enforced.Message = "This generation does not compile; gateways keep enforcing the last good version, if any"
	case selected == 0:
		enforced.Status, enforced.Reason, enforced.Message = metav1.ConditionFalse, policyv1alpha1.ReasonNoGateways,
			"The gateway selector matches no gateway pod"
	case enforcing == selected:
		enforced.Status, enforced.Reason = metav1.ConditionTrue, policyv1alpha1.ReasonAllGatewaysEnforcing
		enforced.Message = fmt.Sprintf("All %d selected gateways enforce generation %d", selected, obj.GetGeneration())
	default:
		enforced.Status, enforced.Reason = metav1.ConditionFalse, policyv1alpha1.ReasonPending
		enforced.Message = fmt.Sprintf("%d of %d selected gateways enforce generation %d", enforcing, selected, obj.GetGeneration())
	}
	meta.SetStatusCondition(&desired.Conditions, enforced)
	return desired
}

// SetupWithManager registers the reconciler for its kind: the policy is
// the root; gateway pod changes map to every policy of the pod's namespace.
func (r *PolicyStatusReconciler) SetupWithManager(mgr ctrl.Manager, name string) error {
	toPolicies := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := r.Kind.NewList()
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Mapping gateway pod to policies", "pod", client.ObjectKeyFromObject(o))
			return nil
		}
		items := r.Kind.ListObjects(list)
		reqs := make([]reconcile.Request, 0, len(items))
		for _, it := range items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(it)})
		}
		return reqs
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(r.Kind.New(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, toPolicies, builder.WithPredicates(gatewayPredicate))
	if r.Store != nil {
		b = b.WatchesRawSource(source.Channel(r.Store.AckEvents(), toPolicies))
	}
	return b.Complete(r)
}

// SetupAll registers the gateway reconciler (compile, and push when gw has a
// Pusher), a status reconciler per policy kind and the ToolCallApproval lifecycle
// reconciler, which deletes approvals approvalRetention after they were decided.
func SetupAll(mgr ctrl.Manager, store *Store, gw GatewayReconciler, approvalRetention time.Duration) error {
	c := mgr.GetClient()
	rec := mgr.GetEventRecorder("toolhooks-controller")
	gw.Client, gw.Store = c, store
	store.Pushing = gw.Pusher != nil
	if err := gw.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up gateway reconciler: %w", err)
	}
	for _, k := range compile.Kinds {
		r := &PolicyStatusReconciler{Kind: k, Client: c, Recorder: rec, Store: store, Resync: statusResync(gw)}
		if err := r.SetupWithManager(mgr, strings.ToLower(string(k.Kind))); err != nil {
			return fmt.Errorf("setting up %s status reconciler: %w", k.Kind, err)
		}
	}
	if err := (&ApprovalReconciler{Client: c, Recorder: rec, Retention: approvalRetention}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up ToolCallApproval reconciler: %w", err)
	}
	return nil
}

// statusResync is how often status is recomputed without events: a dropped
// acknowledgement notification is caught up within it.
func statusResync(gw GatewayReconciler) time.Duration {
	if gw.Pusher == nil {
		return 0
	}
	return 2 * time.Minute
}
