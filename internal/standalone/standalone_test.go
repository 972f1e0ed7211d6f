package standalone_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gateway/gatewaytest"
	"github.com/toolhooks/toolhooks/internal/standalone"
)

var (
	writeFile  = gatewaytest.WriteFile
	eventually = gatewaytest.Eventually
)

const (
	basePolicy   = gatewaytest.BasePolicy
	budgetPolicy = gatewaytest.BudgetPolicy
)

func TestStandaloneReloadsEditedFilesAndIgnoresBrokenOnes(t *testing.T) {
	e := gatewaytest.New(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.yaml")
	writeFile(t, file, strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- standalone.Run(ctx, e.Server, standalone.Options{Dir: dir, Interval: 10 * time.Millisecond})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	eventually(t, "the policies are in force", e.Server.Ready)
	first := e.Server.Status().Revision
	if r := e.Call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
		t.Errorf("forbidden read: %+v", r)
	}
	if r := e.Call("read_file", `{"path":"README.md"}`); r.Status != "succeeded" {
		t.Errorf("allowed read: %+v", r)
	}

	// Edit: README.md becomes forbidden.
	writeFile(t, file, strings.ReplaceAll(strings.Replace(basePolicy, `"**/.env"`, `"**/.env", "**/*.md"`, 1), "WORKSPACE", e.Workspace))
	eventually(t, "the edited policy is in force", func() bool { return e.Server.Status().Revision != first })
	second := e.Server.Status().Revision
	if r := e.Call("read_file", `{"path":"README.md"}`); r.Status != "denied" {
		t.Errorf("read after the edit: %+v", r)
	}

	// A broken file, then a policy that does not compile: both are refused and the last good one stays.
	writeFile(t, filepath.Join(dir, "broken.yaml"), "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: ContractPolicy\nmetadata: {name: x}\nspec: {maxToolCals: 1}\n")
	eventually(t, "the broken file is refused", func() bool {
		return strings.Contains(e.Metrics(), `toolhooks_config_push_rejections_total{reason="policy_files"} 1`)
	})
	writeFile(t, filepath.Join(dir, "broken.yaml"), strings.ReplaceAll(strings.Replace(basePolicy, "coding-agent", "bad-glob", 1), `"**/.env"`, `"[unclosed"`))
	eventually(t, "the uncompilable policy is refused", func() bool {
		return strings.Contains(e.Metrics(), `toolhooks_config_push_rejections_total{reason="policy_files"} 2`)
	})
	if got := e.Server.Status().Revision; got != second {
		t.Errorf("revision %s after broken files, want %s", got, second)
	}
	if r := e.Call("read_file", `{"path":"README.md"}`); r.Status != "denied" {
		t.Errorf("the last good configuration is not enforced: %+v", r)
	}

	// Fixing it applies both files.
	if err := os.Remove(filepath.Join(dir, "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "budget.yaml"), budgetPolicy)
	eventually(t, "the fixed directory is in force", func() bool { return e.Server.Status().Hooks == 3 })
}

func TestStandaloneStartsNotReadyWhenTheFilesAreBroken(t *testing.T) {
	e := gatewaytest.New(t, nil)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), "kind: Nonsense\n")
	_, err := standalone.Load(context.Background(), e.Server, standalone.Options{Dir: dir})
	if !errors.Is(err, standalone.ErrPolicyFiles) || !strings.Contains(err.Error(), "p.yaml: document 1") {
		t.Errorf("err = %v", err)
	}
	if e.Server.Ready() {
		t.Error("ready after a failed load")
	}
	if r := e.Call("list_dir", `{}`); r.Status != "denied" || r.Denial.Rule != gateway.RuleNoPolicy {
		t.Errorf("call: %+v", r)
	}
}

func TestStandaloneAppliesOnlyItsNamespaceAndSelectedPolicies(t *testing.T) {
	e := gatewaytest.New(t, nil)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace)+`---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: elsewhere, namespace: other}
spec: {maxToolCalls: 1}
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: canary-only}
spec:
  maxToolCalls: 1
  gatewaySelector: {matchLabels: {track: canary}}
`)
	res, err := standalone.Load(context.Background(), e.Server, standalone.Options{Dir: dir, Labels: map[string]string{"track": "stable"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hooks != 2 {
		t.Errorf("got %d hooks, want AuditLog and the autonomy policy", res.Hooks)
	}
	res, err = standalone.Load(context.Background(), e.Server, standalone.Options{Dir: dir, Labels: map[string]string{"track": "canary"}})
	if err != nil || res.Hooks != 3 {
		t.Errorf("canary: %+v %v", res, err)
	}
}

// TestStandaloneAppliesAResultPolicyFile: a ResultPolicy read from the
// directory redacts what read_file returns, on the gateway's own endpoint.
func TestStandaloneAppliesAResultPolicyFile(t *testing.T) {
	e := gatewaytest.New(t, nil)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace)+`---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ResultPolicy
metadata: {name: redact-secrets}
spec:
  tools: ["READ_*"]
  detectors: [secrets]
`)
	key := "AKIA" + strings.Repeat("Q", 16)
	writeFile(t, filepath.Join(e.Workspace, "notes.txt"), "aws key "+key+"\n")
	res, err := standalone.Load(context.Background(), e.Server, standalone.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hooks != 3 {
		t.Errorf("got %d hooks, want AuditLog, the autonomy policy and the result policy", res.Hooks)
	}
	r := e.Call("read_file", `{"path":"notes.txt"}`)
	if r.Status != "succeeded" || strings.Contains(r.Result, key) || !strings.Contains(r.Result, "[REDACTED:aws-access-key-id]") {
		t.Errorf("read_file answered %s %q, want the key redacted", r.Status, r.Result)
	}
	if len(r.Redactions) != 1 || r.Redactions[0].Hook != "ResultPolicy/default/redact-secrets" {
		t.Errorf("redactions = %+v, want one by ResultPolicy/default/redact-secrets", r.Redactions)
	}
}
