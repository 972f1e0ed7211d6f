//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// approvalEndToEnd adds an ask rule to the e2e policy, makes a call it asks
// about through the Service, approves the ToolCallApproval a gateway created
// with the real kubectl plugin, and checks that the waiting call ran once.
func (s *story) approvalEndToEnd(t *testing.T) {
	patch := `{"spec":{"ask":{"pathGlobs":["approved/**"],"expiry":"5m"}}}`
	if _, err := kubectl("patch", "autonomypolicy", policyName, "-n", e.namespace, "--type", "merge", "-p", patch); err != nil {
		t.Fatal(err)
	}
	s.waitEnforced(t, 2)
	cli := filepath.Join(t.TempDir(), "kubectl-toolhooks")
	if out, err := exec.Command("go", "build", "-o", cli, "../../cmd/kubectl-toolhooks").CombinedOutput(); err != nil {
		t.Fatalf("go build kubectl-toolhooks: %v\n%s", err, out)
	}

	waiting := make(chan callResult, 1)
	go func() {
		r, err := callWith(&http.Client{Timeout: 3 * time.Minute}, s.service, "approval", "write_file",
			`{"path":"approved/release.md","content":"approved in e2e\n"}`)
		if err != nil {
			r.Status = "error: " + err.Error()
		}
		waiting <- r
	}()
	var name string
	poll(t, "a Pending ToolCallApproval", readyTimeout, func() (bool, string) {
		out, err := kubectl("get", "toolcallapprovals", "-n", e.namespace, "-o", "json")
		if err != nil {
			return false, err.Error()
		}
		var list policyv1alpha1.ToolCallApprovalList
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return false, err.Error()
		}
		for _, a := range list.Items {
			if a.Status.State == policyv1alpha1.ApprovalPending && a.Spec.Tool == "write_file" {
				name = a.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d approvals, none Pending", len(list.Items))
	})
	listed, err := run("", cli, "approvals", "-n", e.namespace)
	if err != nil || !strings.Contains(listed, name) {
		t.Fatalf("kubectl toolhooks approvals: %v\n%s", err, listed)
	}
	if out, err := run("", cli, "approve", name, "-n", e.namespace, "--reason", "e2e"); err != nil {
		t.Fatalf("kubectl toolhooks approve %s: %v\n%s", name, err, out)
	}
	select {
	case r := <-waiting:
		if r.Status != "succeeded" {
			t.Fatalf("the approved call = %+v %+v", r, r.Denial)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the approved call did not return")
	}
	poll(t, "the approval Used", readyTimeout, func() (bool, string) {
		out, err := kubectl("get", "toolcallapproval", name, "-n", e.namespace, "-o", "jsonpath={.status.state}")
		return err == nil && out == string(policyv1alpha1.ApprovalUsed), out
	})
	t.Logf("approved %s; the waiting call ran once", name)
	// Approvals are the namespace's records, not the chart's: remove them
	// so that the uninstall step finds the namespace empty.
	if _, err := kubectl("delete", "toolcallapprovals", "--all", "-n", e.namespace, "--wait"); err != nil {
		t.Fatal(err)
	}
}
