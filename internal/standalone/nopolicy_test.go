package standalone_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gateway/gatewaytest"
	"github.com/toolhooks/toolhooks/internal/standalone"
)

func TestNoPolicySelectingTheGatewayDeniesEverything(t *testing.T) {
	cases := map[string]map[string]string{
		"an empty directory":  {},
		"only comments":       {"p.yaml": "# nothing yet\n---\n# still nothing\n"},
		"an empty file":       {"p.yaml": ""},
		"only dot-files":      {".p.yaml": basePolicy, ".#p.yaml": basePolicy},
		"a renamed file":      {"p.yaml.bak": basePolicy, "p.yaml~": basePolicy},
		"another namespace":   {"p.yaml": strings.Replace(basePolicy, "name: coding-agent", "name: coding-agent\n  namespace: other", 1)},
		"a selector mismatch": {"p.yaml": strings.Replace(basePolicy, "spec:", "spec:\n  gatewaySelector: {matchLabels: {track: canary}}", 1)},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			e := gatewaytest.New(t, nil)
			dir := t.TempDir()
			for f, body := range files {
				writeFile(t, filepath.Join(dir, f), strings.ReplaceAll(body, "WORKSPACE", e.Workspace))
			}
			_, _ = standalone.Load(context.Background(), e.Server, standalone.Options{Dir: dir})
			e.RequireNoPolicy(name)
			if got := e.Decide("write_file", `{"path":"x","content":"y"}`); got.Allowed {
				t.Errorf("/v1/decisions allowed: %+v", got)
			}
		})
	}
}

// runStandalone runs standalone.Run on e's gateway until the test ends.
func runStandalone(e *gatewaytest.Env, o standalone.Options) {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- standalone.Run(ctx, e.Server, o) }()
	e.T.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.T.Error(err)
		}
	})
}

func TestStandaloneEmptiedOrRemovedFileDeniesEverything(t *testing.T) {
	for _, how := range []string{"emptied", "comments only", "renamed", "removed"} {
		t.Run(how, func(t *testing.T) {
			e := gatewaytest.New(t, nil)
			dir := t.TempDir()
			file := filepath.Join(dir, "policies.yaml")
			writeFile(t, file, strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace))
			runStandalone(e, standalone.Options{Dir: dir, Interval: 10 * time.Millisecond, Debounce: 50 * time.Millisecond})
			eventually(t, "the policies are in force", e.Server.Ready)
			switch how {
			case "emptied":
				writeFile(t, file, "")
			case "comments only":
				writeFile(t, file, "# TODO\n")
			case "renamed":
				if err := os.Rename(file, file+".old"); err != nil {
					t.Fatal(err)
				}
			case "removed":
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the gateway is not ready", func() bool { return !e.Server.Ready() })
			e.RequireNoPolicy(how)
			// Filling the file again restores enforcement.
			writeFile(t, file, strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace))
			eventually(t, "the policies are in force again", e.Server.Ready)
			if r := e.Call("read_file", `{"path":"config/.env"}`); r.Status != "denied" || r.Denial.Rule == gateway.RuleNoPolicy {
				t.Errorf("forbidden read: %+v", r)
			}
		})
	}
}

// TestStandaloneHalfWrittenSavesNeverLoosenEnforcement saves the policy file
// the way a non-atomic editor does (truncate, write a part, write the rest)
// many times while callers try a forbidden read and a write outside the
// policy: no call may be allowed and no weaker configuration applied.
func TestStandaloneHalfWrittenSavesNeverLoosenEnforcement(t *testing.T) {
	e := gatewaytest.New(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.yaml")
	full := strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace)
	writeFile(t, file, full)
	runStandalone(e, standalone.Options{Dir: dir, Interval: 5 * time.Millisecond, Debounce: 500 * time.Millisecond})
	eventually(t, "the policies are in force", e.Server.Ready)
	good := e.Server.Status().Revision

	// The prefix that drops forbiddenPathGlobs still parses as a valid, weaker policy.
	weak := full[:strings.Index(full, "  forbiddenPathGlobs")]
	var stop atomic.Bool
	var allowed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if r := e.Call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
				allowed.Add(1)
			}
		}
	})
	for range 30 {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range []string{weak, full[len(weak):]} {
			if _, err := f.WriteString(part); err != nil {
				t.Fatal(err)
			}
			if st := e.Server.Status(); st.Revision != good {
				t.Errorf("revision %s in force mid-save, want %s", st.Revision, good)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := allowed.Load(); n > 0 {
		t.Errorf("%d forbidden reads were allowed during the saves", n)
	}
	if st := e.Server.Status(); st.Revision != good || !e.Server.Ready() {
		t.Errorf("after the saves: %+v ready=%v", st, e.Server.Ready())
	}
}

// A PluginHook that leaves failurePolicy out fails closed: when its plugin
// cannot run, the call is denied and the tool does not run.
func TestAPluginHookWithoutFailurePolicyFailsClosed(t *testing.T) {
	e := gatewaytest.New(t, nil) // no plugin factory: every plugin fails
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), strings.ReplaceAll(basePolicy, "WORKSPACE", e.Workspace)+`---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: PluginHook
metadata: {name: approvals}
spec:
  events: ["tool:before"]
  transport: {stdio: {command: /nonexistent/plugin}}
`)
	if _, err := standalone.Load(context.Background(), e.Server, standalone.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	r, ran := e.SentinelCall("sentinel")
	if ran || r.Status != "denied" || r.Denial.Hook != "PluginHook/default/approvals" {
		t.Errorf("call %+v (tool ran: %v), want a denial by the failing plugin", r, ran)
	}
}
