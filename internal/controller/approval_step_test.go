package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

func TestNextApprovalStep(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-2 * time.Hour)
	approval := func(state policyv1alpha1.ApprovalState, expiresIn time.Duration, announced string, decidedAgo time.Duration) *policyv1alpha1.ToolCallApproval {
		a := &policyv1alpha1.ToolCallApproval{}
		a.CreationTimestamp = metav1.NewTime(created)
		a.Spec.ExpiresAt = metav1.NewTime(now.Add(expiresIn))
		a.Status.State = state
		if announced != "" {
			a.Annotations = map[string]string{policyv1alpha1.AnnotationAnnounced: announced}
		}
		if decidedAgo > 0 {
			a.Status.Conditions = []metav1.Condition{{Type: string(state), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-decidedAgo))}}
		}
		return a
	}
	cases := []struct {
		name     string
		a        *policyv1alpha1.ToolCallApproval
		want     approvalStep
		wantWait time.Duration
	}{
		{"a pending approval waits for its expiry", approval("", 5*time.Minute, "", 0), stepWait, 5 * time.Minute},
		{"a pending approval past its expiry expires", approval(policyv1alpha1.ApprovalPending, -time.Second, "", 0), stepExpire, 0},
		{"a pending approval at its expiry expires", approval(policyv1alpha1.ApprovalPending, 0, "", 0), stepExpire, 0},
		{"an approved one is announced", approval(policyv1alpha1.ApprovalApproved, -time.Hour, "", time.Minute), stepAnnounce, 0},
		{"an announced approval is not announced again", approval(policyv1alpha1.ApprovalApproved, time.Hour, "Approved", time.Minute), stepWait, time.Hour - time.Minute},
		{"a used one announces its approval", approval(policyv1alpha1.ApprovalUsed, time.Hour, "", time.Minute), stepAnnounce, 0},
		{"a used one whose approval was announced is not announced again", approval(policyv1alpha1.ApprovalUsed, time.Hour, "Approved", time.Minute), stepWait, time.Hour - time.Minute},
		{"a denied one announced as approved is announced as denied", approval(policyv1alpha1.ApprovalDenied, time.Hour, "Approved", time.Minute), stepAnnounce, 0},
		{"an expired one is announced", approval(policyv1alpha1.ApprovalExpired, -time.Hour, "", time.Minute), stepAnnounce, 0},
		{"an announced one past its retention is deleted", approval(policyv1alpha1.ApprovalDenied, -time.Hour, "Denied", 2*time.Hour), stepDelete, 0},
		{"without conditions the retention counts from creation", approval(policyv1alpha1.ApprovalExpired, -time.Hour, "Expired", 0), stepDelete, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, wait := nextApprovalStep(c.a, now, time.Hour)
			if got != c.want || wait != c.wantWait {
				t.Errorf("step %d wait %v, want %d wait %v", got, wait, c.want, c.wantWait)
			}
		})
	}
}
