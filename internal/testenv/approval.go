package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// ApproverRole is the name ApplyApprovalPolicy gives the approver ClusterRole
// of config/rbac (kustomize adds the same "toolhooks-" prefix).
const ApproverRole = "toolhooks-approver"

// Apply creates the objects of YAML files (one or more documents each),
// paths relative to the repository root.
func (e *Env) Apply(t testing.TB, paths ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(RepoRoot(), p))
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(b), "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("Parsing %s: %v", p, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := e.Client.Create(t.Context(), u); err != nil {
				t.Fatalf("Creating %s %s from %s: %v", u.GetKind(), u.GetName(), p, err)
			}
			out = append(out, u)
		}
	}
	return out
}

// ApplyApprovalPolicy installs the admission policy of config/approval and the
// approver ClusterRole of config/rbac (as ApproverRole), and waits until the
// API server enforces the policy: it refuses, to an administrator, a decision
// that names another user in decidedBy.
func (e *Env) ApplyApprovalPolicy(t testing.TB) {
	t.Helper()
	e.Apply(t, "config/approval/validating_admission_policy.yaml", "config/approval/validating_admission_policy_binding.yaml")
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "rbac", "toolcallapproval_approver_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		t.Fatal(err)
	}
	role.Name = ApproverRole
	ctx := t.Context()
	if err := e.Client.Create(ctx, role); err != nil {
		t.Fatalf("Creating the approver role: %v", err)
	}

	probe := Approval("default", "admission-policy-probe", "probe-sender", time.Now().Add(time.Hour))
	if err := e.Client.Create(ctx, probe); err != nil {
		t.Fatalf("Creating the probe approval: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		a := &policyv1alpha1.ToolCallApproval{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(probe), a); err != nil {
			return false, err
		}
		a.Status.State = policyv1alpha1.ApprovalApproved
		a.Status.DecidedBy = "someone-else"
		err := e.Client.Status().Update(ctx, a)
		switch {
		case err == nil:
			// Not enforced yet: put the probe back to Pending.
			a.Status = policyv1alpha1.ToolCallApprovalStatus{}
			return false, client.IgnoreNotFound(e.Client.Status().Update(ctx, a))
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "toolcallapproval-decisions"):
			return true, nil
		case apierrors.IsConflict(err):
			return false, nil
		default:
			return false, err
		}
	})
	if err != nil {
		t.Fatalf("Waiting for the admission policy to take effect: %v", errors.Join(err, ctx.Err()))
	}
	if err := e.Client.Delete(ctx, probe); err != nil {
		t.Fatal(err)
	}
}

// BindRole binds the ClusterRole role to user in namespace.
func (e *Env) BindRole(t testing.TB, namespace, role, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: role + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := e.Client.Create(t.Context(), rb); err != nil {
		t.Fatalf("Binding %s to %s: %v", role, user, err)
	}
}

// Approval returns a Pending ToolCallApproval asking to approve a read_file
// call by sender, asked by the AutonomyPolicy "coding".
func Approval(namespace, name, sender string, expiresAt time.Time) *policyv1alpha1.ToolCallApproval {
	return &policyv1alpha1.ToolCallApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: policyv1alpha1.ToolCallApprovalSpec{
			Policy:          policyv1alpha1.AskingPolicy{Kind: "AutonomyPolicy", Name: "coding", Rule: "ask.pathGlobs", Reason: "touches deploy/**"},
			Sender:          policyv1alpha1.ApprovalSender{Username: sender},
			Session:         "s1",
			Tool:            "read_file",
			ArgumentsDigest: "sha256:" + strings.Repeat("ab", 32),
			Arguments:       []policyv1alpha1.ArgumentPreview{{Name: "path", Value: `"deploy/prod.yaml"`}},
			Gateway:         "gateway-7d9f-abcde",
			ExpiresAt:       metav1.NewTime(expiresAt),
		},
	}
}
