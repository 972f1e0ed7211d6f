package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// Condition reasons kubectl toolhooks writes when it decides an approval.
const (
	ReasonKubectlApprove = "KubectlApprove"
	ReasonKubectlDeny    = "KubectlDeny"
)

// ErrNotPending is returned for an approval that was already decided,
// expired or used.
var ErrNotPending = errors.New("not pending")

// ApprovalDecision is approve or deny.
type ApprovalDecision struct {
	// Approve approves the call; false denies it.
	Approve bool
	// Reason is the decider's explanation (required to deny).
	Reason string
}

// CurrentUser asks the API server who the client is (a SelfSubjectReview):
// its username and groups.
func CurrentUser(ctx context.Context, cs kubernetes.Interface) (Decider, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return Decider{}, fmt.Errorf("asking the API server who you are: %w", err)
	}
	return Decider{Username: r.Status.UserInfo.Username, Groups: r.Status.UserInfo.Groups}, nil
}

// Decider is the user who approves or denies, as the API server knows them.
type Decider struct {
	Username string
	Groups   []string
}

// Decide approves or denies the Pending approval key as user, through the
// status subresource and with the resourceVersion it read, so a concurrent
// decision makes it fail with a conflict instead of being overwritten. The
// API server's admission policy has the last word on whether user may.
func Decide(ctx context.Context, c client.Client, key client.ObjectKey, decider Decider,
	d ApprovalDecision) (*policyv1alpha1.ToolCallApproval, error) {
	user := decider.Username
	a := &policyv1alpha1.ToolCallApproval{}
	if err := c.Get(ctx, key, a); err != nil {
		return nil, fmt.Errorf("getting toolcallapproval %s: %w", key, err)
	}
	if s := a.CurrentState(); s != policyv1alpha1.ApprovalPending {
		by := ""
		if a.Status.DecidedBy != "" {
			by = " by " + a.Status.DecidedBy
		}
		return a, fmt.Errorf("toolcallapproval %s is %s%s: %w; only a Pending approval can be approved or denied", key, s, by, ErrNotPending)
	}
	state, condType, reason := policyv1alpha1.ApprovalDenied, policyv1alpha1.ConditionDenied, ReasonKubectlDeny
	verb := "denied"
	if d.Approve {
		state, condType, reason = policyv1alpha1.ApprovalApproved, policyv1alpha1.ConditionApproved, ReasonKubectlApprove
		verb = "approved"
	}
	msg := d.Reason
	if msg == "" {
		msg = verb + " by " + user
	}
	a.Status.State = state
	a.Status.DecidedBy, a.Status.DecidedByGroups = user, decider.Groups
	meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{
		Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: a.Generation,
	})
	if err := c.Status().Update(ctx, a); err != nil {
		return nil, fmt.Errorf("updating the status of toolcallapproval %s: %w", key, err)
	}
	return a, nil
}

// ListApprovals lists the approvals of namespace ("" for all), the Pending
// ones only unless all, oldest first.
func ListApprovals(ctx context.Context, c client.Client, namespace string, all bool) ([]policyv1alpha1.ToolCallApproval, string, error) {
	list := &policyv1alpha1.ToolCallApprovalList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, "", fmt.Errorf("listing toolcallapprovals: %w", err)
	}
	items := slices.DeleteFunc(list.Items, func(a policyv1alpha1.ToolCallApproval) bool {
		return !all && a.CurrentState() != policyv1alpha1.ApprovalPending
	})
	slices.SortStableFunc(items, func(a, b policyv1alpha1.ToolCallApproval) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return items, list.ResourceVersion, nil
}
