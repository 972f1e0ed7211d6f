package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolhooks/toolhooks/internal/wire"
)

// agentOnlyPolicy restricts the caller "agent" alone: the shell runs any
// command, and no path may name a sentinel, before or while the shell runs.
const agentOnlyPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: agent-only
spec:
  subjects:
    callers: [{kind: User, name: agent}]
  workspace: {root: WORKSPACE}
  forbiddenPathGlobs: ["**/sentinel*"]
  shell:
    allow: true
    allowedCommands: ["*"]
`

// everyonePolicy binds every caller and restricts nothing but the
// workspace: the shell runs any command inside it.
const everyonePolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: everyone
spec:
  workspace: {root: WORKSPACE, only: true}
  shell:
    allow: true
    allowedCommands: ["*"]
`

// A policy restricts the callers its subjects bind, before a shell command
// runs and while it runs, and restricts no other caller anywhere: the
// sentinel files exist exactly when the caller was not bound.
func TestAPolicyRestrictsOnlyTheCallersItBindsThroughTheShell(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, agentOnlyPolicy+"---\n"+everyonePolicy))
	shell := func(tok, cmd string) wire.ToolCallResponse { return runShellAs(t, e, tok, cmd) }
	for _, tc := range []struct {
		name, cmd string
		runtime   bool // only the run-time check can see the path
	}{
		{"a path the command names", "touch sentinel-%s", false},
		{"a path a substitution makes", `touch "$(printf sentin)el-%s"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				who, tok string
				bound    bool
			}{{"agent", agentToken, true}, {"other", otherToken, false}} {
				cmd := fmt.Sprintf(tc.cmd, c.who)
				r := shell(c.tok, cmd)
				_, err := os.Stat(filepath.Join(e.ws, "sentinel-"+c.who))
				created := err == nil
				switch {
				case c.bound && (created || r.Denial == nil || r.Denial.Rule != "forbiddenPathGlobs"):
					t.Errorf("%s, bound: created=%v, answer %+v", cmd, created, r)
				case c.bound && tc.runtime && r.Denial.Reason[:11] != "At run time":
					t.Errorf("%s, bound: denied before running, want at run time: %+v", cmd, r.Denial)
				case !c.bound && (!created || r.Status != "succeeded"):
					t.Errorf("%s, not bound: created=%v, answer %+v", cmd, created, r)
				}
				_ = os.Remove(filepath.Join(e.ws, "sentinel-"+c.who))
			}
		})
	}
}

// A caller that every policy's subjects leave out is not left unrestricted:
// its calls are denied, nothing runs, and tools/list-style questions agree.
// A policy that binds every caller lifts the denial.
func TestACallerNoPolicyBindsIsDenied(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, agentOnlyPolicy))
	run := func(tok, cmd string) wire.ToolCallResponse { return runShellAs(t, e, tok, cmd) }
	made := func(name string) bool {
		_, err := os.Stat(filepath.Join(e.ws, name))
		return err == nil
	}
	r := run(otherToken, "touch made-by-other")
	if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != "noPolicyBindsCaller" || made("made-by-other") {
		t.Fatalf("an unbound caller's command: created=%v, answer %+v", made("made-by-other"), r)
	}
	if r := run(agentToken, "touch made-by-agent"); r.Status != "succeeded" || !made("made-by-agent") {
		t.Fatalf("the bound caller's allowed command: created=%v, answer %+v", made("made-by-agent"), r)
	}

	e.mustPush(compileYAML(t, e.ws, agentOnlyPolicy+"---\n"+everyonePolicy))
	if r := run(otherToken, "touch made-by-other"); r.Status != "succeeded" || !made("made-by-other") {
		t.Fatalf("with a policy binding every caller: created=%v, answer %+v", made("made-by-other"), r)
	}
}

// runShellAs runs cmd with the shell tool as the caller of token tok.
func runShellAs(t *testing.T, e *env, tok, cmd string) wire.ToolCallResponse {
	t.Helper()
	code, body := e.postAs(tok, "/v1/tool-calls", map[string]any{"sessionId": "s-" + tok[:5], "tool": "shell",
		"arguments": map[string]string{"command": cmd}})
	if code != http.StatusOK {
		t.Fatalf("answered %d %s", code, body)
	}
	var r wire.ToolCallResponse
	mustUnmarshal(t, body, &r)
	return r
}
