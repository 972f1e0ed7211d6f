package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/testenv"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// TestApprovalLifecycle runs the real reconcilers with a one-minute
// retention: a Pending approval past its expiry becomes Expired, every
// decision gets its Events once, and an approval used long ago is deleted.
func TestApprovalLifecycle(t *testing.T) {
	env := testenv.Start(t)
	env.StartManager(t, CacheOptions(), func(mgr ctrl.Manager) error {
		return SetupAll(mgr, NewStore(), GatewayReconciler{}, time.Minute)
	})
	ctx := context.Background()
	(&harness{t: t, c: env.Client}).namespace("asks")

	t.Run("a pending approval past its expiry expires, with Events", func(t *testing.T) {
		h := &harness{t: t, c: env.Client}
		a := testenv.Approval("asks", "late", "alice", time.Now().Add(-time.Second))
		h.create(a)
		h.eventually("the approval Expired and announced", func() (bool, string) {
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
				return false, err.Error()
			}
			return a.Status.State == policyv1alpha1.ApprovalExpired && a.Annotations[policyv1alpha1.AnnotationAnnounced] == "Expired",
				fmt.Sprintf("state %q annotations %v", a.Status.State, a.Annotations)
		})
		c := meta.FindStatusCondition(a.Status.Conditions, policyv1alpha1.ConditionExpired)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != policyv1alpha1.ReasonExpired ||
			!strings.Contains(c.Message, a.Spec.ExpiresAt.UTC().Format(time.RFC3339)) {
			t.Errorf("Expired condition %+v, want True/Expired naming the expiry time", c)
		}
		evs := waitEvents(h, "asks", wire.ReasonToolCallApprovalExpired, 2)
		for _, ev := range evs {
			if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "alice") {
				t.Errorf("event %s %q, want a Warning naming the sender", ev.Type, ev.Note)
			}
		}
		if kinds := regardingKinds(evs); kinds != "AutonomyPolicy/coding ToolCallApproval/late" {
			t.Errorf("events regard %s, want the approval and the asking policy", kinds)
		}
	})

	t.Run("a decision gets its Events once", func(t *testing.T) {
		h := &harness{t: t, c: env.Client}
		a := testenv.Approval("asks", "decided", "alice", time.Now().Add(time.Hour))
		h.create(a)
		a.Status.State = policyv1alpha1.ApprovalDenied
		a.Status.DecidedBy = "bob"
		meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: policyv1alpha1.ConditionDenied, Status: metav1.ConditionTrue,
			Reason: "KubectlDeny", Message: "not on a Friday"})
		if err := h.c.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		h.eventually("the denial announced", func() (bool, string) {
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
				return false, err.Error()
			}
			return a.Annotations[policyv1alpha1.AnnotationAnnounced] == "Denied", fmt.Sprint(a.Annotations)
		})
		// A later change of the object reconciles it again without a second announcement.
		a.Labels = map[string]string{"touched": "yes"}
		if err := h.c.Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		evs := waitEvents(h, "asks", wire.ReasonToolCallApprovalDenied, 2)
		for _, ev := range evs {
			if !strings.Contains(ev.Note, "bob denied") || !strings.Contains(ev.Note, "not on a Friday") {
				t.Errorf("event note %q, want who denied and why", ev.Note)
			}
		}
	})

	t.Run("an approval used longer ago than the retention is deleted", func(t *testing.T) {
		h := &harness{t: t, c: env.Client}
		a := testenv.Approval("asks", "old", "alice", time.Now().Add(time.Hour))
		a.Annotations = map[string]string{policyv1alpha1.AnnotationAnnounced: "Approved"}
		h.create(a)
		long := metav1.NewTime(time.Now().Add(-2 * time.Hour))
		a.Status.State = policyv1alpha1.ApprovalUsed
		a.Status.DecidedBy = "bob"
		a.Status.Conditions = []metav1.Condition{
			{Type: policyv1alpha1.ConditionApproved, Status: metav1.ConditionTrue, Reason: "KubectlApprove", Message: "ok", LastTransitionTime: long},
			{Type: policyv1alpha1.ConditionUsed, Status: metav1.ConditionTrue, Reason: "Used", Message: "used", LastTransitionTime: long},
		}
		if err := h.c.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		h.eventually("the old approval deleted", func() (bool, string) {
			err := h.c.Get(ctx, client.ObjectKeyFromObject(a), a)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
}

// waitEvents waits until namespace holds exactly n Events of reason and returns them.
func waitEvents(h *harness, namespace, reason string, n int) []eventsv1.Event {
	h.t.Helper()
	var out []eventsv1.Event
	h.eventually(fmt.Sprintf("%d %s events", n, reason), func() (bool, string) {
		var events eventsv1.EventList
		if err := h.c.List(context.Background(), &events, client.InNamespace(namespace)); err != nil {
			return false, err.Error()
		}
		out = out[:0]
		for _, e := range events.Items {
			if e.Reason == reason {
				out = append(out, e)
			}
		}
		return len(out) == n, fmt.Sprint(len(out), " events")
	})
	return out
}

// regardingKinds lists the Kind/name the events regard, sorted.
func regardingKinds(evs []eventsv1.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Regarding.Kind+"/"+e.Regarding.Name)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
