package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/cli"
)

// releaseNotes is the call the coding-agent sample asks a person to approve
// (its spec.ask.pathGlobs names release/**).
const releaseNotes = `{"path":"release/NOTES.md","content":"v1.2: reviewed and approved\n"}`

// approvalScene shows a call that waits for a person: the gateway creates a
// ToolCallApproval, an approver approves it with the code of kubectl
// toolhooks approve, and the waiting call runs once.
func approvalScene(ctx context.Context, out *printer, start time.Time, c client.Client, cs kubernetes.Interface,
	kubectl func(...string) (string, error), addr string) error {
	progress(out, start, "%s writes release/NOTES.md; its policy asks a person to approve writes under release/ "+
		"(spec.ask.pathGlobs), so the call waits on the gateway...", codingAgent.sender)
	type reply struct {
		r   callReply
		err error
	}
	done := make(chan reply, 1)
	go func() {
		r, err := call(ctx, addr, codingAgent, "write_file", releaseNotes)
		done <- reply{r, err}
	}()
	var name string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list policyv1alpha1.ToolCallApprovalList
		if err := c.List(ctx, &list, client.InNamespace(demoNamespace)); err != nil {
			return false, err
		}
		for _, a := range list.Items {
			if a.Status.State == policyv1alpha1.ApprovalPending && a.Spec.Tool == "write_file" {
				name = a.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the gateway's ToolCallApproval: %w", err)
	}
	progress(out, start, "kubectl get toolcallapprovals (the gateway asked; an approver decides):")
	listed, err := kubectl("get", "toolcallapprovals", "-n", demoNamespace)
	if err != nil {
		return err
	}
	out.printf("%s", indent(listed))
	decider, err := cli.CurrentUser(ctx, cs)
	if err != nil {
		return err
	}
	progress(out, start, "kubectl toolhooks approve %s --reason 'release notes reviewed' (as %s)", name, decider.Username)
	if _, err := cli.Decide(ctx, c, client.ObjectKey{Namespace: demoNamespace, Name: name}, decider,
		cli.ApprovalDecision{Approve: true, Reason: "release notes reviewed"}); err != nil {
		return err
	}
	var rep reply
	select {
	case rep = <-done:
	case <-time.After(time.Minute):
		return fmt.Errorf("the approved call did not return")
	}
	if rep.err != nil {
		return rep.err
	}
	if rep.r.Status != "succeeded" {
		return fmt.Errorf("the approved call = %+v", rep.r)
	}
	a := &policyv1alpha1.ToolCallApproval{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: name}, a); err != nil {
		return err
	}
	progress(out, start, "The waiting call ran: %s; ToolCallApproval %s is now %s (single use: the same call again needs a new approval)",
		rep.r.Status, name, a.Status.State)
	return nil
}
