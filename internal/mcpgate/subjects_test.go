package mcpgate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// denyWriteForAlice binds only the caller alice.
const denyWriteForAlice = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: no-writes-for-alice}
spec:
  subjects:
    callers: [{kind: User, name: alice}]
  tools: {deny: [write_file]}
`

// A policy that binds one caller shapes that caller's tools/list and calls,
// and neither of another caller's.
func TestToolsListAndCallsFollowThePolicysCallers(t *testing.T) {
	for _, mode := range []string{mcpgate.DeniedMark, mcpgate.DeniedHide} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, envOptions{denied: mode})
			e.apply(codingPolicy + "---\n" + denyWriteForAlice)
			alice, bob := connect(t, e.url, aliceToken), connect(t, e.url, bobToken)

			tool, shown := listTools(t, alice)["write_file"]
			switch {
			case mode == mcpgate.DeniedHide && shown:
				t.Error("alice's tools/list shows write_file")
			case mode == mcpgate.DeniedMark && (!shown || !strings.HasPrefix(tool.Description, mcpgate.DeniedMarker)):
				t.Errorf("alice's tools/list does not mark write_file: shown=%v", shown)
			}
			if tool, shown := listTools(t, bob)["write_file"]; !shown || strings.HasPrefix(tool.Description, mcpgate.DeniedMarker) {
				t.Errorf("bob's tools/list lacks or marks write_file: shown=%v", shown)
			}

			res := call(t, alice, "write_file", `{"path":"by-alice.txt","content":"a"}`)
			if d := denialOf(t, res); d == nil || d.Rule != autonomy.RuleToolDeny || d.Hook != "AutonomyPolicy/default/no-writes-for-alice" {
				t.Errorf("alice's write_file: denial %+v, text %q", d, text(res))
			}
			if _, err := os.Stat(filepath.Join(e.ws, "by-alice.txt")); !os.IsNotExist(err) {
				t.Errorf("alice's denied write_file wrote the file: %v", err)
			}
			res = call(t, bob, "write_file", `{"path":"by-bob.txt","content":"b"}`)
			if res.IsError {
				t.Errorf("bob's write_file: %s", text(res))
			}
			if b, err := os.ReadFile(filepath.Join(e.ws, "by-bob.txt")); err != nil || string(b) != "b" {
				t.Errorf("bob's write_file did not write the file: %q %v", b, err)
			}
		})
	}
}

// For every tool and caller, the listing says what a call with empty
// arguments gets: listed unmarked exactly when no hook denies it.
func TestToolsListAgreesWithCallsForEveryCaller(t *testing.T) {
	const readOnlyForBob = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: read-only-bob}
spec:
  mode: ReadOnly
  subjects:
    callers: [{kind: User, name: bob}, {kind: Group, name: no-such-group}]
`
	const shellForAliceSessions = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: no-listing-for-alice}
spec:
  subjects:
    channels: [mcp]
    senders: ["ali*"]
  tools: {allow: [read_file, write_file, shell]}
`
	e := newEnv(t, envOptions{denied: mcpgate.DeniedMark})
	e.apply(denyWriteForAlice + "---\n" + readOnlyForBob + "---\n" + shellForAliceSessions)
	// alice: write_file (toolDeny), edit_file and list_dir (toolAllow) and
	// shell (shellDisabled); bob: write_file, edit_file and shell (readOnly).
	for tok, want := range map[string]int{aliceToken: 4, bobToken: 3} {
		cs := connect(t, e.url, tok)
		listed := listTools(t, cs)
		if len(listed) != 5 {
			t.Fatalf("listed %d tools, want 5", len(listed))
		}
		denials := 0
		for name, tool := range listed {
			marked := strings.HasPrefix(tool.Description, mcpgate.DeniedMarker)
			d := denialOf(t, call(t, cs, name, `{}`))
			if marked != (d != nil) {
				t.Errorf("%s for %s: listed marked=%v, a call with {} got denial %+v", tok[:5], name, marked, d)
			}
			if marked {
				denials++
				if ld, _ := tool.Meta[mcpgate.MetaDenial].(map[string]any); d != nil && (ld["rule"] != d.Rule || ld["hook"] != d.Hook) {
					t.Errorf("%s for %s: listed denial %v, call's %+v", tok[:5], name, ld, d)
				}
			}
		}
		if denials != want {
			t.Errorf("%s: %d tools denied outright, want %d", tok[:5], denials, want)
		}
	}
}

// When the only policy binds alice, bob is bound by none: his tools/list
// hides (or marks) every tool and his calls are denied without running.
func TestACallerNoPolicyBindsSeesNoToolsAndRunsNone(t *testing.T) {
	e := newEnv(t, envOptions{denied: mcpgate.DeniedHide})
	e.apply(denyWriteForAlice)
	alice, bob := connect(t, e.url, aliceToken), connect(t, e.url, bobToken)
	if tools := listTools(t, bob); len(tools) != 0 {
		t.Errorf("bob's tools/list shows %d tools, want none", len(tools))
	}
	if _, shown := listTools(t, alice)["read_file"]; !shown {
		t.Error("alice's tools/list lacks read_file")
	}
	res := call(t, bob, "write_file", `{"path":"by-bob.txt","content":"b"}`)
	if d := denialOf(t, res); d == nil || d.Rule != "noPolicyBindsCaller" || d.Hook != "subjects" {
		t.Errorf("bob's write_file: denial %+v, text %q", d, text(res))
	}
	if _, err := os.Stat(filepath.Join(e.ws, "by-bob.txt")); !os.IsNotExist(err) {
		t.Errorf("bob's denied write_file wrote the file: %v", err)
	}
}
