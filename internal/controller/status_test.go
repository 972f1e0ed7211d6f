package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
)

// fakeView answers GatewayView from pod names.
type fakeView struct{ enforcing, degraded map[string]bool }

func (v fakeView) Enforces(pod *corev1.Pod) bool { return v.enforcing[pod.Name] }
func (v fakeView) Degraded(pod *corev1.Pod) bool { return v.degraded[pod.Name] }

// verdict compiles obj alone, as the status reconciler does without gateways.
func verdict(obj metav1.Object) error {
	_, err := compile.One(obj)
	return err
}

func gatewayPodNamed(name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{policyv1alpha1.GatewayLabel: "x"}}}
}

func TestDesiredStatusReportsEnforcementAndPluginHealth(t *testing.T) {
	plugin := &policyv1alpha1.PluginHook{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Generation: 3},
		Spec: policyv1alpha1.PluginHookSpec{Events: []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
			Timeout:   &metav1.Duration{Duration: 5 * time.Second}, // the CRD default, applied by the API server
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
			st := DesiredStatus(plugin, &plugin.Status, verdict(plugin), pods, tc.view)
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
		st := DesiredStatus(plugin, &plugin.Status, verdict(plugin), pods, nil)
		if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionEnforced) != nil ||
			meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionDegraded) != nil {
			t.Errorf("conditions = %+v, want Accepted only", st.Conditions)
		}
	})
	t.Run("only PluginHooks get a Degraded condition", func(t *testing.T) {
		ap := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Generation: 1}}
		st := DesiredStatus(ap, &ap.Status, verdict(ap), pods, fakeView{degraded: map[string]bool{"a": true}})
		if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionDegraded) != nil {
			t.Errorf("an AutonomyPolicy got a Degraded condition: %+v", st.Conditions)
		}
	})
}

// TestDesiredStatusWarnsOfArbitraryPrograms checks the lint condition: an
// allow-list entry that runs arbitrary programs is named, and fixing it
// removes the condition.
func TestDesiredStatusWarnsOfArbitraryPrograms(t *testing.T) {
	ap := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Generation: 2},
		Spec: policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: "/workspace"},
			Shell: &policyv1alpha1.ShellPolicy{Allow: true, AllowedCommands: []string{"git status", "python *", "npm run *", "make *", "bash *"}}}}
	st := DesiredStatus(ap, &ap.Status, verdict(ap), nil, nil)
	w := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionWarning)
	if w == nil || w.Status != metav1.ConditionTrue || w.Reason != policyv1alpha1.ReasonArbitraryPrograms {
		t.Fatalf("warning condition = %+v", w)
	}
	for _, entry := range []string{`"python *"`, `"npm run *"`, `"make *"`, `"bash *"`} {
		if !strings.Contains(w.Message, entry) {
			t.Errorf("warning %q does not name %s", w.Message, entry)
		}
	}
	if strings.Contains(w.Message, "git status") {
		t.Errorf("warning %q names a harmless entry", w.Message)
	}
	if a := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionAccepted); a == nil || a.Status != metav1.ConditionTrue {
		t.Errorf("a policy with warnings is not accepted: %+v", a)
	}
	ap.Status = st
	ap.Spec.Shell.AllowedCommands = []string{"git status"}
	st = DesiredStatus(ap, &ap.Status, verdict(ap), nil, nil)
	if w := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionWarning); w != nil {
		t.Errorf("the warning stayed after the entries were removed: %+v", w)
	}
}
