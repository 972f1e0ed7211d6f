package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// DefaultApprovalRetention is how long a decided, expired or used approval
// is kept before the controller deletes it.
const DefaultApprovalRetention = 24 * time.Hour

// ApprovalReconciler runs a ToolCallApproval's lifecycle: it expires a
// Pending approval once spec.expiresAt passed, records Events for each
// decision once, and deletes the approval a retention after it was decided.
// It never approves or denies: it does not hold the "approve" verb.
//
// Each reconcile does one write at most. An Event is announced once: the
// decision it announces is first recorded in the AnnotationAnnounced
// annotation (with the resourceVersion read, so a stale view fails), and the
// Events are recorded only after that write succeeded. A crash between the
// two loses the Events rather than repeating them on every restart.
type ApprovalReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Retention is how long a decided, expired or used approval is kept.
	Retention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=toolcallapprovals,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=toolcallapprovals/status,verbs=get;update;patch

// approvalStep is what a reconcile does to an approval.
type approvalStep int

const (
	// stepWait does nothing until the returned delay passed.
	stepWait approvalStep = iota
	// stepExpire marks a Pending approval Expired.
	stepExpire
	// stepAnnounce records the Events of the decision.
	stepAnnounce
	// stepDelete deletes an approval past its retention.
	stepDelete
)

// announcedDecision is the decision Events announce for a state: Used was
// Approved first. Pending announces nothing.
func announcedDecision(s policyv1alpha1.ApprovalState) policyv1alpha1.ApprovalState {
	switch s {
	case policyv1alpha1.ApprovalApproved, policyv1alpha1.ApprovalUsed:
		return policyv1alpha1.ApprovalApproved
	case policyv1alpha1.ApprovalDenied, policyv1alpha1.ApprovalExpired:
		return s
	}
	return ""
}

// finishedAt is when an approval last changed state: its latest condition
// transition, or its creation when it has no condition.
func finishedAt(a *policyv1alpha1.ToolCallApproval) time.Time {
	if len(a.Status.Conditions) == 0 {
		return a.CreationTimestamp.Time
	}
	var t time.Time
	for _, c := range a.Status.Conditions {
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return t
}

// nextApprovalStep decides what to do to a at now, and for stepWait how long
// to wait (0: until something changes).
func nextApprovalStep(a *policyv1alpha1.ToolCallApproval, now time.Time, retention time.Duration) (approvalStep, time.Duration) {
	state := a.CurrentState()
	if state == policyv1alpha1.ApprovalPending {
		if left := a.Spec.ExpiresAt.Sub(now); left > 0 {
			return stepWait, left
		}
		return stepExpire, 0
	}
	if d := announcedDecision(state); d != "" && a.Annotations[policyv1alpha1.AnnotationAnnounced] != string(d) {
		return stepAnnounce, 0
	}
	if left := finishedAt(a).Add(retention).Sub(now); left > 0 {
		return stepWait, left
	}
	return stepDelete, 0
}

// Reconcile advances one approval's lifecycle by one step.
func (r *ApprovalReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &policyv1alpha1.ToolCallApproval{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	step, wait := nextApprovalStep(a, now, r.Retention)
	switch step {
	case stepExpire:
		a.Status.State = policyv1alpha1.ApprovalExpired
		meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{
			Type: policyv1alpha1.ConditionExpired, Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonExpired,
			Message:            "nobody decided it before it expired at " + a.Spec.ExpiresAt.UTC().Format(time.RFC3339),
			ObservedGeneration: a.Generation,
		})
		// Update carries the resourceVersion read: a decision made meanwhile wins.
		if err := r.Client.Status().Update(ctx, a); err != nil {
			return ctrl.Result{}, fmt.Errorf("marking the approval expired: %w", err)
		}
	case stepAnnounce:
		orig := a.DeepCopy()
		decision := announcedDecision(a.CurrentState())
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		a.Annotations[policyv1alpha1.AnnotationAnnounced] = string(decision)
		if err := r.Client.Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("recording the announced decision: %w", err)
		}
		r.announce(a, decision)
	case stepDelete:
		if err := r.Client.Delete(ctx, a, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion}); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("deleting the approval past its retention: %w", err))
		}
	case stepWait:
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return ctrl.Result{}, nil
}

// announce records the Events of decision on the approval and on the policy
// that asked.
func (r *ApprovalReconciler) announce(a *policyv1alpha1.ToolCallApproval, decision policyv1alpha1.ApprovalState) {
	call := fmt.Sprintf("%s call by %s (toolcallapproval %s, rule %s)", a.Spec.Tool, a.Spec.Sender.Username, a.Name, a.Spec.Policy.Rule)
	eventType, reason, note := corev1.EventTypeWarning, wire.ReasonToolCallApprovalExpired, call+" was not decided before it expired"
	switch decision {
	case policyv1alpha1.ApprovalApproved:
		eventType, reason = corev1.EventTypeNormal, wire.ReasonToolCallApprovalApproved
		note = fmt.Sprintf("%s approved the %s: %s", a.Status.DecidedBy, call, decisionMessage(a, policyv1alpha1.ConditionApproved))
	case policyv1alpha1.ApprovalDenied:
		reason = wire.ReasonToolCallApprovalDenied
		note = fmt.Sprintf("%s denied the %s: %s", a.Status.DecidedBy, call, decisionMessage(a, policyv1alpha1.ConditionDenied))
	}
	var policy *corev1.ObjectReference
	if a.Spec.Policy.Kind != "" && a.Spec.Policy.Name != "" {
		policy = &corev1.ObjectReference{
			APIVersion: policyv1alpha1.GroupVersion.String(), Kind: a.Spec.Policy.Kind,
			Namespace: a.Namespace, Name: a.Spec.Policy.Name, UID: types.UID(a.Spec.Policy.UID),
		}
	}
	if policy != nil {
		r.Recorder.Eventf(a, policy, eventType, reason, "Decide", "%s", note)
		r.Recorder.Eventf(policy, a, eventType, reason, "Decide", "%s", note)
		return
	}
	r.Recorder.Eventf(a, nil, eventType, reason, "Decide", "%s", note)
}

// decisionMessage is the message of the condition condType, or "no reason given".
func decisionMessage(a *policyv1alpha1.ToolCallApproval, condType string) string {
	if c := meta.FindStatusCondition(a.Status.Conditions, condType); c != nil && c.Message != "" {
		return c.Message
	}
	return "no reason given"
}

// SetupWithManager registers the reconciler; the approval is its only input.
func (r *ApprovalReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("toolcallapproval").
		For(&policyv1alpha1.ToolCallApproval{}).
		Complete(r)
}
