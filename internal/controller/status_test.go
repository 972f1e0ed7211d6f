package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// fakeView answers GatewayView from pod names.
type fakeView struct{ enforcing, degraded map[string]bool }

func (v fakeView) Enforces(pod *corev1.Pod) bool { return v.enforcing[pod.Name] }
func (v fakeView) Degraded(pod *corev1.Pod) bool { return v.degraded[pod.Name] }

func gatewayPodNamed(name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{policyv1alpha1.GatewayLabel: "x"}}}
}

func TestDesiredStatusReportsEnforcementAndPluginHealth(t *testing.T) {
	plugin := &policyv1alpha1.PluginHook{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Generation: 3},
		Spec: policyv1alpha1.PluginHookSpec{Events: []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Transport: policyv1alpha1.PluginTransport{Stdio: &policyv1alpha1.StdioTransport{Command: "node"}}}}
	pods := []corev1.Pod{gatewayPodNamed("a"), gatewayPodNamed("b")}
	cases := []struct {
		name                     string
		view                     GatewayView
		wantEnforced, wantReason string
		wantEnforcing            int32
		wantDegraded             metav1.ConditionStatus
	}{
		{"all gateways enforce a healthy plugin", fakeView{enforcing: map[string]bool{"a": true, "b": true}},
			"True", policyv1alpha1.ReasonAllGatewaysEnforcing, 2, metav1.ConditionFalse},
		{"one gateway is behind", fakeView{enforcing: map[string]bool{"a": true}},
			"False", policyv1alpha1.ReasonPending, 1, metav1.ConditionFalse},
		{"one gateway opened the plugin's circuit", fakeView{enforcing: map[string]bool{"a": true, "b": true}, degraded: map[string]bool{"b": true}},
			"True", policyv1alpha1.ReasonAllGatewaysEnforcing, 2, metav1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := DesiredStatus(plugin, &plugin.Status, pods, tc.view)
			enf := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionEnforced)
			if enf == nil || string(enf.Status) != tc.wantEnforced || enf.Reason != tc.wantReason || enf.ObservedGeneration != 3 {
				t.Errorf("Enforced = %+v, want %s/%s at generation 3", enf, tc.wantEnforced, tc.wantReason)
			}
			if st.Gateways.Selected != 2 || st.Gateways.Enforcing != tc.wantEnforcing {
				t.Errorf("gateways = %+v, want 2 selected, %d enforcing", st.Gateways, tc.wantEnforcing)
			}
			deg := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionDegraded)
			if deg == nil || deg.Status != tc.wantDegraded {
				t.Errorf("Degraded = %+v, want %s", deg, tc.wantDegraded)
			}
		})
	}
	t.Run("no view (compile-only controller) reports neither Enforced nor Degraded", func(t *testing.T) {
		st := DesiredStatus(plugin, &plugin.Status, pods, nil)
		if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionEnforced) != nil ||
			meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionDegraded) != nil {
			t.Errorf("conditions = %+v, want Accepted only", st.Conditions)
		}
	})
	t.Run("only PluginHooks get a Degraded condition", func(t *testing.T) {
		ap := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Generation: 1}}
		st := DesiredStatus(ap, &ap.Status, pods, fakeView{degraded: map[string]bool{"a": true}})
		if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionDegraded) != nil {
			t.Errorf("an AutonomyPolicy got a Degraded condition: %+v", st.Conditions)
		}
	})
}
