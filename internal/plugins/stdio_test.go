package plugins

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestJSPluginDeniesShellAndRecordsAfterEvents(t *testing.T) {
	m := newManager(t, Options{})
	afterLog := filepath.Join(t.TempDir(), "after.jsonl")
	h := spec("deny-shell", Spec{Stdio: nodePlugin(t, "deny-shell.mjs", map[string]string{"AFTER_LOG": afterLog})})
	ex := executor(t, m, h)
	ctx := context.Background()

	res := ex.Execute(ctx, newCall("shell", `{"command":"ls"}`))
	if res.Status != hooks.StatusDenied || res.Output != hooks.DenialText+h.Name {
		t.Fatalf("shell: status %s, output %q; want denied by %s", res.Status, res.Output, h.Name)
	}
	if d := res.Denial; d.Rule != RuleDenied || d.Reason != "deny-shell: shell is not allowed" || d.Policy.Name != "deny-shell" {
		t.Fatalf("shell denial = %+v; want rule %s with the plugin's reason", d, RuleDenied)
	}
	res = ex.Execute(ctx, newCall("read_file", `{"path":"a.txt"}`))
	if res.Status != hooks.StatusSucceeded || res.Output != "ok" {
		t.Fatalf("read_file: status %s, output %q; want succeeded", res.Status, res.Output)
	}

	eventually(t, "the after-event is recorded", func() bool { return len(readLines(t, afterLog)) >= 1 })
	lines := readLines(t, afterLog)
	if len(lines) != 1 {
		t.Fatalf("after-events %q; want only read_file's (a denied call's tool did not run)", lines)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"eventName": "tool:after", "toolName": "read_file", "arguments": `{"path":"a.txt"}`, "result": "ok",
		"failed": false, "sessionId": "sess-1", "channelId": "chan-1", "senderId": "sender-1", "correlationId": "corr-1",
	}
	for k, v := range want {
		if ev[k] != v {
			t.Errorf("after-event %s = %v, want %v", k, ev[k], v)
		}
	}
	if _, ok := ev["durationMs"].(float64); !ok {
		t.Errorf("after-event durationMs = %v, want a number", ev["durationMs"])
	}
}

func TestWildcardPluginReceivesBothEvents(t *testing.T) {
	m := newManager(t, Options{})
	eventLog := filepath.Join(t.TempDir(), "events.log")
	h := spec("wildcard", Spec{Stdio: nodePlugin(t, "wildcard.cjs", map[string]string{"EVENT_LOG": eventLog})})
	ex := executor(t, m, h)

	if res := ex.Execute(context.Background(), newCall("read_file", `{}`)); res.Status != hooks.StatusSucceeded {
		t.Fatalf("read_file: %s %q", res.Status, res.Output)
	}
	res := ex.Execute(context.Background(), newCall("rm", `{}`))
	if res.Status != hooks.StatusDenied || res.Denial.Rule != RuleDenied || !strings.Contains(res.Denial.Reason, "denied") {
		t.Fatalf("rm: %s %+v; want denied by the plugin returning false", res.Status, res.Denial)
	}
	want := []string{"tool:after read_file", "tool:before read_file", "tool:before rm"} // sorted: after-events are asynchronous
	eventually(t, "both events are recorded", func() bool { return len(readLines(t, eventLog)) >= len(want) })
	if got := readLines(t, eventLog); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestSubscriptionsFollowTheSpec(t *testing.T) {
	m := newManager(t, Options{})
	eventLog := filepath.Join(t.TempDir(), "events.log")
	// Subscribed to tool:after only: the plugin's tool:* handler would deny rm, but is never asked.
	h := spec("after-only", Spec{After: true,
		Stdio: nodePlugin(t, "wildcard.cjs", map[string]string{"EVENT_LOG": eventLog})})
	ex := executor(t, m, h)
	if res := ex.Execute(context.Background(), newCall("rm", `{}`)); res.Status != hooks.StatusSucceeded {
		t.Fatalf("rm: %s %+v; want succeeded (no tool:before subscription)", res.Status, res.Denial)
	}
	eventually(t, "the after-event is recorded", func() bool { return len(readLines(t, eventLog)) >= 1 })
	if got := readLines(t, eventLog); !slices.Equal(got, []string{"tool:after rm"}) {
		t.Fatalf("events %q, want only tool:after", got)
	}
}

func TestTimeoutAppliesTheFailurePolicy(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		name := map[bool]string{false: "Fail", true: "Ignore"}[failOpen]
		t.Run("failurePolicy "+name, func(t *testing.T) {
			m := newManager(t, Options{})
			h := spec("sleepy-"+strings.ToLower(name), Spec{TimeoutMillis: 300, FailOpen: failOpen,
				Stdio: nodePlugin(t, "sleepy.mjs", map[string]string{"SLEEP_MS": "1000"})})
			ex := executor(t, m, h)
			// Fast calls first, until the process is up, so the timing below is the plugin's.
			eventually(t, "the plugin answers", func() bool {
				return ex.Execute(context.Background(), newCall("read_file", `{}`)).Status == hooks.StatusSucceeded
			})
			before := failures(m, h.Name, KindTimeout)
			start := time.Now()
			res := ex.Execute(context.Background(), newCall("slow", `{}`))
			elapsed := time.Since(start)
			if elapsed < 300*time.Millisecond || elapsed > 2*time.Second {
				t.Errorf("the call took %s; want about the 300ms timeout", elapsed)
			}
			if failOpen {
				if res.Status != hooks.StatusSucceeded {
					t.Fatalf("status %s %+v; want succeeded (Ignore)", res.Status, res.Denial)
				}
			} else {
				if res.Status != hooks.StatusDenied || res.Denial.Rule != hooks.RuleHookError ||
					!strings.Contains(res.Denial.Reason, string(KindTimeout)) {
					t.Fatalf("status %s %+v; want denied with a pluginTimeout reason (Fail)", res.Status, res.Denial)
				}
			}
			if got := failures(m, h.Name, KindTimeout) - before; got != 1 {
				t.Errorf("pluginTimeout failures grew by %v, want 1", got)
			}
		})
	}
}

func TestCrashedPluginIsRestarted(t *testing.T) {
	m := newManager(t, Options{RestartBackoff: 20 * time.Millisecond})
	startLog := filepath.Join(t.TempDir(), "starts.log")
	h := spec("crashy", Spec{Stdio: nodePlugin(t, "crashy.mjs", map[string]string{"START_LOG": startLog})})
	hk := build(t, m, h)
	ctx := context.Background()
	if _, err := hk.Before(ctx, newCall("read_file", `{}`)); err != nil {
		t.Fatalf("before the crash: %v", err)
	}
	_, err := hk.Before(ctx, newCall("crash", `{}`))
	wantKind(t, err, KindCrashed)
	if !strings.Contains(err.Error(), "crashing on purpose") {
		t.Errorf("error %q does not quote the plugin's stderr", err)
	}
	eventually(t, "the plugin answers again", func() bool {
		v, err := hk.Before(ctx, newCall("read_file", `{}`))
		return err == nil && v.Allowed
	})
	if starts := readLines(t, startLog); len(starts) != 2 || starts[0] == starts[1] {
		t.Fatalf("plugin starts %q; want two processes", starts)
	}
	if got := counter(m.m.restarts.WithLabelValues(h.Name)); got != 1 {
		t.Errorf("restarts = %v, want 1", got)
	}
}

func TestPluginThatNeverStartsGivesUp(t *testing.T) {
	m := newManager(t, Options{RestartBackoff: time.Millisecond, MaxRestarts: 2, GiveUpDelay: time.Hour})
	h := spec("missing", Spec{Stdio: &StdioSpec{Command: "/nonexistent/plugin"}})
	hk := build(t, m, h)
	eventually(t, "the restarts are exhausted", func() bool {
		return counter(m.m.restarts.WithLabelValues(h.Name)) == 2
	})
	_, err := hk.Before(context.Background(), newCall("read_file", `{}`))
	wantKind(t, err, KindUnavailable)
}

func TestMalformedReplies(t *testing.T) {
	tests := []struct {
		mode string
		want Kind
	}{
		{"garbage", KindBadReply},
		{"nonbool", KindBadReply},
		{"error", KindError},
		{"allow", ""},
	}
	m := newManager(t, Options{})
	for _, tt := range tests {
		t.Run("a plugin replying "+tt.mode, func(t *testing.T) {
			h := spec("raw-"+tt.mode, Spec{Stdio: nodePlugin(t, "raw.mjs",
				map[string]string{ProtocolEnv: "raw", "MODE": tt.mode})})
			v, err := build(t, m, h).Before(context.Background(), newCall("read_file", `{}`))
			if tt.want == "" {
				if err != nil || !v.Allowed {
					t.Fatalf("verdict %+v, error %v; want allowed", v, err)
				}
				return
			}
			wantKind(t, err, tt.want)
			if got := failures(m, h.Name, tt.want); got != 1 {
				t.Errorf("%s failures = %v, want 1", tt.want, got)
			}
		})
	}
}

func TestOutOfOrderRepliesAreMatchedByID(t *testing.T) {
	m := newManager(t, Options{})
	h := spec("sleepy-concurrent", Spec{TimeoutMillis: 10000,
		Stdio: nodePlugin(t, "sleepy.mjs", map[string]string{"SLEEP_MS": "1000"})})
	hk := build(t, m, h)
	slow := make(chan error, 1)
	go func() {
		_, err := hk.Before(context.Background(), newCall("slow", `{}`))
		slow <- err
	}()
	// While "slow" waits 1 s, later calls are answered first.
	for range 5 {
		if v, err := hk.Before(context.Background(), newCall("read_file", `{}`)); err != nil || !v.Allowed {
			t.Fatalf("verdict %+v, error %v", v, err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call finished first (%v)", err)
	default:
	}
	if err := <-slow; err != nil {
		t.Fatalf("slow call: %v", err)
	}
}

func TestArgv(t *testing.T) {
	tests := []struct {
		name   string
		spec   StdioSpec
		bridge bool
	}{
		{"an .mjs file under node runs through the bridge", StdioSpec{Command: "node", Args: []string{"/p/a.mjs"}}, true},
		{"a .cjs file under /usr/bin/nodejs runs through the bridge",
			StdioSpec{Command: "/usr/bin/nodejs", Args: []string{"a.CJS", "x"}}, true},
		{"a raw-protocol script runs as given",
			StdioSpec{Command: "node", Args: []string{"a.js"}, Env: map[string]string{ProtocolEnv: "raw"}}, false},
		{"node with an option first runs as given", StdioSpec{Command: "node", Args: []string{"--no-warnings", "a.js"}}, false},
		{"another command runs as given", StdioSpec{Command: "python3", Args: []string{"a.js"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := Argv(&tt.spec)
			if got := slices.Contains(argv, bridgeSource); got != tt.bridge {
				t.Fatalf("argv %q: bridge inserted = %v, want %v", argv, got, tt.bridge)
			}
			if tail := argv[len(argv)-len(tt.spec.Args):]; !slices.Equal(tail, tt.spec.Args) {
				t.Fatalf("argv %q does not end with the args %q", argv, tt.spec.Args)
			}
		})
	}
}

func TestPluginEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("TOOLHOOKS_TEST_SECRET", "hunter2")
	env := environ(map[string]string{"A": "1"})
	for _, kv := range env {
		if strings.HasPrefix(kv, "TOOLHOOKS_TEST_SECRET=") {
			t.Fatalf("the gateway's environment leaked into the plugin's: %q", env)
		}
	}
	if !slices.Contains(env, "A=1") || !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		t.Fatalf("env %q lacks PATH or the spec's variables", env)
	}
}
