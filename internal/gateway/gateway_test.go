package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/plugins"
	"github.com/toolhooks/toolhooks/internal/wire"
)

func TestBeforeTheFirstConfigurationEveryCallIsDeniedAndTheGatewayIsNotReady(t *testing.T) {
	e := newEnv(t, nil)
	if status, body := e.do(http.MethodGet, "/readyz", "", nil, nil); status != http.StatusServiceUnavailable || !strings.Contains(string(body), gateway.NoPolicyReason) {
		t.Errorf("/readyz answered %d %s", status, body)
	}
	if status, _ := e.do(http.MethodGet, "/healthz", "", nil, nil); status != http.StatusOK {
		t.Errorf("/healthz answered %d", status)
	}
	for _, tool := range []string{"read_file", "no_such_tool"} {
		r := e.call(tool, `{"path":"README.md"}`)
		if r.Status != "denied" || r.Result != "Tool execution denied by hook: gateway" {
			t.Errorf("%s: got %s %q", tool, r.Status, r.Result)
		}
		if d := r.Denial; d == nil || d.Hook != "gateway" || d.Rule != "NoPolicy" || d.Reason != gateway.NoPolicyReason || d.Policy != nil {
			t.Errorf("%s: denial %+v", tool, d)
		}
	}
	if d := e.decide("read_file", `{}`); d.Allowed || d.Denial == nil || d.Denial.Rule != "NoPolicy" {
		t.Errorf("decision %+v", d)
	}
	var st wire.ConfigStatus
	_, body := e.do(http.MethodGet, "/v1/config", "", nil, nil)
	mustUnmarshal(t, body, &st)
	if !reflect.DeepEqual(st, wire.ConfigStatus{}) {
		t.Errorf("config status %+v before any configuration", st)
	}
	recs := e.audit.Records()
	if len(recs) != 3 {
		t.Fatalf("got %d audit records, want one per call", len(recs))
	}
	for _, r := range recs {
		if r.Outcome != hooks.StatusDenied {
			t.Errorf("audited outcome %s", r.Outcome)
		}
	}
}

func TestAPushPutsPoliciesInForce(t *testing.T) {
	e := newEnv(t, nil)
	cfg := compileYAML(t, e.ws, basePolicy)
	cfg.IssuedAt = 100
	res := e.mustPush(cfg)
	if !res.Changed || res.Revision != cfg.Revision || res.IssuedAt != 100 || res.Hooks != 2 {
		t.Errorf("push result %+v", res)
	}
	if status, body := e.do(http.MethodGet, "/readyz", "", nil, nil); status != http.StatusOK || !strings.Contains(string(body), cfg.Revision) {
		t.Errorf("/readyz answered %d %s", status, body)
	}
	var st wire.ConfigStatus
	_, body := e.do(http.MethodGet, "/v1/config", "", nil, nil)
	mustUnmarshal(t, body, &st)
	if !reflect.DeepEqual(st, wire.ConfigStatus{Revision: cfg.Revision, IssuedAt: 100, Hooks: 2}) {
		t.Errorf("GET /v1/config = %+v", st)
	}

	if r := e.call("read_file", `{"path":"README.md"}`); r.Status != "succeeded" || r.Result != "# project\n" || r.Denial != nil {
		t.Errorf("allowed read: %+v", r)
	}
	r := e.call("read_file", `{"path":"config/.env"}`)
	want := "Tool execution denied by hook: AutonomyPolicy/default/coding-agent"
	if r.Status != "denied" || r.Result != want {
		t.Errorf("forbidden read: %s %q", r.Status, r.Result)
	}
	if d := r.Denial; d == nil || d.Hook != "AutonomyPolicy/default/coding-agent" || d.Rule == "" || d.Reason == "" ||
		d.Policy == nil || *d.Policy != (wire.PolicyRef{Kind: "AutonomyPolicy", Namespace: "default", Name: "coding-agent"}) {
		t.Errorf("denial %+v", r.Denial)
	}
	for _, tc := range []struct{ tool, args, status, result string }{
		{"shell", `{"command":"echo hi"}`, "succeeded", "hi\n"},
		{"shell", `{"command":"echo hi; rm -rf /"}`, "denied", ""},
		{"write_file", `{"path":"/tmp/outside","content":"x"}`, "denied", ""},
		{"no_such_tool", `{}`, "unknown_tool", hooks.UnknownToolText},
		{"read_file", `{"path":"missing.txt"}`, "failed", "Error: read_file: missing.txt does not exist"},
	} {
		r := e.call(tc.tool, tc.args)
		if r.Status != tc.status || tc.result != "" && r.Result != tc.result {
			t.Errorf("%s %s: got %s %q, want %s %q", tc.tool, tc.args, r.Status, r.Result, tc.status, tc.result)
		}
	}
	if d := e.decide("read_file", `{"path":"config/.env"}`); d.Allowed || d.Denial == nil || d.Denial.Policy == nil {
		t.Errorf("decision on a forbidden path: %+v", d)
	}
	if d := e.decide("runtime_tool", `{"path":"src/main.go"}`); !d.Allowed || d.Denial != nil {
		t.Errorf("decision on a tool the runtime runs itself: %+v", d)
	}
	if n := len(e.audit.Records()); n != 9 {
		t.Errorf("got %d audit records for 9 calls", n)
	}
}

func TestAToolThatRunsTooLongTimesOut(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.ToolTimeout = 200 * time.Millisecond })
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	if r := e.call("shell", `{"command":"sleep 30"}`); r.Status != "timed_out" || r.Result != hooks.TimedOutText {
		t.Errorf("got %+v", r)
	}
}

func TestUnauthenticatedPushesAreRejected(t *testing.T) {
	e := newEnv(t, nil)
	good := compileYAML(t, e.ws, basePolicy)
	e.mustPush(good)
	other := compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy)
	body, _ := json.Marshal(other)
	for name, header := range map[string]map[string]string{
		"no credentials":      nil,
		"a wrong token":       {"Authorization": "Bearer not-the-token-at-all"},
		"a basic credential":  {"Authorization": "Basic " + testToken},
		"an empty bearer":     {"Authorization": "Bearer "},
		"the token truncated": {"Authorization": "Bearer " + testToken[:len(testToken)-1]},
	} {
		t.Run(name, func(t *testing.T) {
			status, resp := e.do(http.MethodPut, "/v1/config", "application/json", body, header)
			if status != http.StatusUnauthorized || !strings.Contains(string(resp), `"error":"configuration rejected: unauthenticated`) {
				t.Errorf("answered %d %s", status, resp)
			}
		})
	}
	if got := e.srv.Status().Revision; got != good.Revision {
		t.Errorf("revision %s after rejected pushes, want %s", got, good.Revision)
	}
	if m := e.metrics(); !strings.Contains(m, `toolhooks_config_push_rejections_total{reason="unauthenticated"} 5`) {
		t.Errorf("rejections not counted:\n%s", grep(m, "push_rejections"))
	}
}

func TestPushesNeedAnAuthenticatorAndOneThatMayForbid(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.Authenticator = nil })
	if status, body := e.push(compileYAML(t, e.ws, basePolicy)); status != http.StatusForbidden || !strings.Contains(string(body), "no authenticator") {
		t.Errorf("push without an authenticator answered %d %s", status, body)
	}
	e = newEnv(t, func(o *gateway.Options) {
		o.Authenticator = gateway.AuthenticatorFunc(func(*http.Request) (string, error) {
			return "system:serviceaccount:x:y", fmt.Errorf("not the controller: %w", gateway.ErrForbidden)
		})
	})
	if status, _ := e.push(compileYAML(t, e.ws, basePolicy)); status != http.StatusForbidden {
		t.Errorf("forbidden push answered %d", status)
	}
	if e.srv.Ready() {
		t.Error("a forbidden push was applied")
	}
}

func TestABadPushIsRejectedAndTheLastGoodConfigurationStays(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.MaxBodyBytes = 64 << 10 })
	good := compileYAML(t, e.ws, basePolicy)
	e.mustPush(good)

	badGlob := compileYAML(t, e.ws, basePolicy)
	a := specOf[*autonomy.Config](t, badGlob.Hooks[1])
	a.ForbiddenPathGlobs = []string{"[unclosed"}
	badGlob.Hooks[1].Spec = gatewayconfig.MarshalSpec(a)
	badGlob.Revision = ""
	wrongRevision := compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy)
	wrongRevision.Revision = good.Revision
	dupNames := compileYAML(t, e.ws, basePolicy)
	dupNames.Hooks = append(dupNames.Hooks, dupNames.Hooks[1])
	dupNames.Revision = ""
	unknownKind := compileYAML(t, e.ws, basePolicy)
	unknownKind.Hooks[1].Kind = "Firewall"
	unknownKind.Revision = ""

	auth := map[string]string{"Authorization": "Bearer " + testToken}
	cases := []struct {
		name   string
		body   []byte
		ctype  string
		status int
		want   string
	}{
		{"an invalid glob", mustJSON(t, badGlob), "application/json", http.StatusUnprocessableEntity, "invalid glob"},
		{"a revision that does not match the hooks", mustJSON(t, wrongRevision), "application/json", http.StatusUnprocessableEntity, "does not match"},
		{"duplicate hook names", mustJSON(t, dupNames), "application/json", http.StatusUnprocessableEntity, "duplicate hook name"},
		{"an unknown hook kind", mustJSON(t, unknownKind), "application/json", http.StatusUnprocessableEntity, "unknown kind"},
		{"malformed JSON", []byte(`{"revision":`), "application/json", http.StatusBadRequest, "malformed JSON"},
		{"an unknown field", []byte(`{"revision":"","hooks":[],"extra":1}`), "application/json", http.StatusBadRequest, "unknown field"},
		{"an oversized body", []byte(`{"revision":"` + strings.Repeat("a", 70<<10) + `"}`), "application/json", http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
		{"a non-JSON content type", mustJSON(t, good), "text/plain", http.StatusUnsupportedMediaType, "send application/json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.do(http.MethodPut, "/v1/config", tc.ctype, tc.body, auth)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("answered %d %s; want %d and %q", status, body, tc.status, tc.want)
			}
		})
	}
	if got := e.srv.Status().Revision; got != good.Revision {
		t.Fatalf("revision %s, want the last good %s", got, good.Revision)
	}
	if r := e.call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
		t.Errorf("the last good configuration is not enforced: %+v", r)
	}
}

func TestAStalePushIsRejectedAndAnUnchangedOneIsANoOp(t *testing.T) {
	e := newEnv(t, nil)
	first := compileYAML(t, e.ws, basePolicy)
	first.IssuedAt = 2000
	e.mustPush(first)

	older := compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy)
	older.IssuedAt = 1000
	if status, body := e.push(older); status != http.StatusConflict || !strings.Contains(string(body), "stale configuration") {
		t.Errorf("stale push answered %d %s", status, body)
	}
	if got := e.srv.Status(); got.Revision != first.Revision || got.IssuedAt != 2000 {
		t.Errorf("status %+v after a stale push", got)
	}
	// The same revision again, later: nothing to rebuild, the issue time advances.
	again := compileYAML(t, e.ws, basePolicy)
	again.IssuedAt = 3000
	if res := e.mustPush(again); res.Changed || res.IssuedAt != 3000 || res.Revision != first.Revision {
		t.Errorf("unchanged push: %+v", res)
	}
	// Now the first one is stale too.
	if status, _ := e.push(first); status != http.StatusConflict {
		t.Errorf("replayed push answered %d", status)
	}
	newer := compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy)
	newer.IssuedAt = 3000 // equal issue times are not stale
	if res := e.mustPush(newer); !res.Changed || res.Revision != newer.Revision {
		t.Errorf("newer push: %+v", res)
	}
}

func TestBudgetsSurvivePushes(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, basePolicy+"---\n"+budgetPolicy))
	for range 3 {
		if r := e.call("read_file", `{"path":"README.md"}`); r.Status != "succeeded" {
			t.Fatalf("call within budget: %+v", r)
		}
	}
	edited := compileYAML(t, e.ws, strings.Replace(basePolicy, `"**/.env"`, `"**/.env", "**/*.pem"`, 1)+"---\n"+budgetPolicy)
	if res := e.mustPush(edited); !res.Changed {
		t.Fatal("edited configuration not applied")
	}
	r := e.call("read_file", `{"path":"README.md"}`)
	if r.Status != "denied" || r.Denial == nil || r.Denial.Policy == nil || r.Denial.Policy.Name != "budget" {
		t.Errorf("the budget was reset by a push: %+v", r)
	}
}

func TestBadRequestsGetAClearJSONError(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.MaxBodyBytes = 1024 })
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	const malformed, tooLarge = hooks.RuleMalformedRequest, hooks.RuleTooLarge
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		want                            string
		rule                            string // of the refusal's audit record; "" when the request is no call
	}{
		{"malformed JSON", "POST", "/v1/tool-calls", "application/json", `{"tool":`, 400, "malformed JSON body", malformed},
		{"not an object", "POST", "/v1/tool-calls", "application/json", `["read_file"]`, 400, "malformed JSON body", malformed},
		{"an empty body", "POST", "/v1/decisions", "application/json", ``, 400, "request body is empty", malformed},
		{"a missing tool", "POST", "/v1/tool-calls", "application/json", `{"arguments":{}}`, 400, "tool is required", malformed},
		{"an unknown field", "POST", "/v1/tool-calls", "application/json", `{"tool":"read_file","argument":{}}`, 400, `unknown field \"argument\"`, malformed},
		{"data after the object", "POST", "/v1/tool-calls", "application/json", `{"tool":"read_file"} {}`, 400, "unexpected data after the JSON object", malformed},
		{"a wrong type", "POST", "/v1/tool-calls", "application/json", `{"tool":3}`, 400, "malformed JSON body", malformed},
		{"an oversized body", "POST", "/v1/tool-calls", "application/json", `{"tool":"read_file","arguments":{"content":"` + strings.Repeat("x", 2000) + `"}}`, 413, "larger than 1024 bytes", tooLarge},
		{"a form body (CSRF)", "POST", "/v1/tool-calls", "application/x-www-form-urlencoded", `{"tool":"read_file"}`, 415, "send application/json", malformed},
		{"no content type", "POST", "/v1/decisions", "", `{"tool":"read_file"}`, 415, "send application/json", malformed},
		{"a malformed result", "POST", "/v1/results", "application/json", `{"tool":"read_file","result":`, 400, "malformed JSON body", malformed},
		{"a result without a tool", "POST", "/v1/results", "application/json", `{"result":"x"}`, 400, "tool is required", malformed},
		{"a wrong method", "GET", "/v1/tool-calls", "", ``, 405, "method GET is not allowed on /v1/tool-calls (allowed: POST)", ""},
		{"a wrong method on config", "DELETE", "/v1/config", "", ``, 405, "allowed: GET, PUT", ""},
		{"an unknown path", "GET", "/v2/anything", "", ``, 404, "no such endpoint: /v2/anything", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.audit.Records())
			status, body := e.do(tc.method, tc.path, tc.ctype, []byte(tc.body), map[string]string{"Authorization": "Bearer " + agentToken})
			var er wire.ErrorResponse
			if err := json.Unmarshal(body, &er); err != nil || er.Error == "" {
				t.Errorf("body %q is not a JSON error", body)
			}
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("answered %d %s; want %d and %q", status, body, tc.status, tc.want)
			}
			// A refused call leaves one record: denied, with its caller and
			// the rule of the refusal; a request that is no call, none.
			recs := e.audit.Records()[before:]
			switch {
			case tc.rule == "" && len(recs) != 0:
				t.Errorf("a request that is no call left the audit records %+v", recs)
			case tc.rule == "":
			case len(recs) != 1 || recs[0].Outcome != hooks.StatusDenied || recs[0].Denial == nil ||
				recs[0].Denial.Rule != tc.rule || recs[0].SenderID != "agent":
				t.Errorf("the refused call left the audit records %+v, want one denied by rule %s of agent", recs, tc.rule)
			}
		})
	}
	if m := e.metrics(); !strings.Contains(m, `toolhooks_denials_total{caller_kind="static",hook="arguments",tool="other"} 1`) ||
		!strings.Contains(m, `toolhooks_denials_total{caller_kind="static",hook="request",tool="other"} 11`) {
		t.Errorf("the refused calls were not counted:\n%s", grep(m, "denials_total"))
	}
}

func TestArgumentsThatAreNotOneObjectAreDeniedAndAudited(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	for _, args := range []string{`["README.md"]`, `"README.md"`, `42`, `true`, `{"path":"README.md","path":"config/.env"}`} {
		r := e.call("read_file", args)
		if r.Status != "denied" || r.Result != "Tool execution denied by hook: arguments" || r.Denial == nil || r.Denial.Rule != hooks.RuleInvalidArguments {
			t.Errorf("arguments %s: %+v", args, r)
		}
	}
	// Absent, null and the JSON-text-in-a-string form are accepted.
	if r := e.call("list_dir", ``); r.Status != "succeeded" {
		t.Errorf("absent arguments: %+v", r)
	}
	if r := e.call("list_dir", `null`); r.Status != "succeeded" {
		t.Errorf("null arguments: %+v", r)
	}
	if r := e.call("read_file", `"{\"path\":\"README.md\"}"`); r.Status != "succeeded" || r.Result != "# project\n" {
		t.Errorf("string-encoded arguments: %+v", r)
	}
	if r := e.call("read_file", `"{\"path\":\"config/.env\"}"`); r.Status != "denied" {
		t.Errorf("string-encoded forbidden arguments: %+v", r)
	}
	if n := len(e.audit.Records()); n != 9 {
		t.Errorf("got %d audit records for 9 calls", n)
	}
}

// recordingHook is a PluginHook runtime that remembers the arguments it decided on.
type recordingHook struct {
	name string
	seen chan map[string]any
}

func (h *recordingHook) Name() string { return h.name }
func (h *recordingHook) Before(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
	h.seen <- c.Args
	return hooks.Allow, nil
}
func (h *recordingHook) After(context.Context, *hooks.Call, *hooks.Result) {}

func TestToolsSeeTheArgumentsTheHooksDecidedOn(t *testing.T) {
	hookSaw := make(chan map[string]any, 1)
	toolSaw := make(chan map[string]any, 1)
	e := newEnv(t, func(o *gateway.Options) {
		o.Plugins = func(h plugins.Ref) (hooks.Hook, error) {
			return &recordingHook{name: h.Name, seen: hookSaw}, nil
		}
		o.Tools = []hooks.Tool{hooks.ToolFunc{ToolName: "echo_args", Func: func(_ context.Context, a map[string]any) (string, error) {
			toolSaw <- a
			return "ok", nil
		}}}
	})
	cfg := compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: PluginHook
metadata: {name: recorder}
spec:
  events: ["tool:before"]
  transport: {http: {url: "http://127.0.0.1:9/"}}
`)
	e.mustPush(cfg)
	if r := e.call("echo_args", `{"path":"a","n":12345678901234567890,"nested":{"k":[1,"x"]}}`); r.Status != "succeeded" {
		t.Fatalf("call: %+v", r)
	}
	h, tl := <-hookSaw, <-toolSaw
	if fmt.Sprintf("%p", h) != fmt.Sprintf("%p", tl) {
		t.Error("the tool received a different argument map than the hook decided on")
	}
	if n, ok := tl["n"].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Errorf("large number arrived as %#v", tl["n"])
	}
}

func TestDenialsAndWarningsReachTheDenialSinkWithoutArguments(t *testing.T) {
	type ev struct {
		call hooks.Call
		d    hooks.Decision
	}
	got := make(chan ev, 10)
	e := newEnv(t, func(o *gateway.Options) {
		o.DenialSink = gateway.DenialSinkFunc(func(_ context.Context, c *hooks.Call, d hooks.Decision) { got <- ev{*c, d} })
	})
	warn := strings.Replace(strings.Replace(basePolicy, "coding-agent", "dry-run", 1), "spec:\n", "spec:\n  enforcementAction: Warn\n", 1)
	warn = strings.Replace(warn, `"**/.env"`, `"**/*.md"`, 1)
	e.mustPush(compileYAML(t, e.ws, basePolicy+"---\n"+warn))

	if r := e.call("read_file", `{"path":"README.md"}`); r.Status != "succeeded" || len(r.Warnings) != 1 || r.Warnings[0].EnforcementAction != "Warn" {
		t.Errorf("warned call: %+v", r)
	}
	w := <-got
	if w.d.Action != hooks.ActionWarn || w.d.Policy.Name != "dry-run" || w.call.Tool != "read_file" || w.call.SessionID != "session-1" || w.call.SenderID != "agent" {
		t.Errorf("warning event %+v", w)
	}
	if w.call.Args != nil || w.call.ArgsJSON != "" {
		t.Error("the sink received the call's arguments")
	}
	if r := e.call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
		t.Errorf("denied call: %+v", r)
	}
	d := <-got
	if d.d.Action != hooks.ActionDeny || d.d.Policy.Name != "coding-agent" || d.d.Reason == "" {
		t.Errorf("denial event %+v", d)
	}
}

func TestASlowDenialSinkNeverBlocksCalls(t *testing.T) {
	release := make(chan struct{})
	var delivered atomic.Int32
	e := newEnv(t, func(o *gateway.Options) {
		o.DenialQueueSize = 1
		o.DenialSink = gateway.DenialSinkFunc(func(ctx context.Context, _ *hooks.Call, _ hooks.Decision) {
			delivered.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
	})
	defer close(release)
	for range 10 {
		if r := e.call("read_file", `{}`); r.Status != "denied" {
			t.Fatalf("got %+v", r)
		}
	}
	m := e.metrics()
	if !strings.Contains(m, "toolhooks_denial_events_dropped_total ") || strings.Contains(m, "toolhooks_denial_events_dropped_total 0\n") {
		t.Errorf("no denial was dropped:\n%s", grep(m, "dropped"))
	}
	if delivered.Load() > 2 {
		t.Errorf("%d denials delivered to a blocked sink with a queue of one", delivered.Load())
	}
}

func TestMetricsAreExposedWithBoundedLabels(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	for i := range 300 {
		req := map[string]any{"sessionId": fmt.Sprintf("secret-session-%d", i), "tool": fmt.Sprintf("made_up_%d", i), "arguments": map[string]any{"path": "/very/secret/path"}}
		if status, body := e.post("/v1/tool-calls", req); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	e.call("read_file", `{"path":"README.md"}`)
	e.call("read_file", `{"path":"config/.env"}`)
	e.decide("read_file", `{"path":"config/.env"}`)
	e.decide("made_up_1", `{"path":"config/.env"}`)
	m := e.metrics()
	for _, want := range []string{
		`toolhooks_tool_calls_total{caller_kind="static",outcome="unknown_tool",tool="other"} 300`,
		`toolhooks_tool_calls_total{caller_kind="static",outcome="succeeded",tool="read_file"} 1`,
		`toolhooks_tool_calls_total{caller_kind="static",outcome="denied",tool="read_file"} 2`,
		`toolhooks_tool_calls_total{caller_kind="static",outcome="denied",tool="other"} 1`,
		`toolhooks_denials_total{caller_kind="static",hook="AutonomyPolicy/default/coding-agent",tool="read_file"} 2`,
		`toolhooks_decision_duration_seconds_count{api="decisions"} 2`,
		`toolhooks_decision_duration_seconds_count{api="tool-calls"} 302`,
		`toolhooks_config_revision_info{revision="` + e.srv.Status().Revision + `"} 1`,
		`toolhooks_config_hooks 2`,
		`toolhooks_config_push_rejections_total{reason="stale"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, leak := range []string{"secret-session", "/very/secret/path", "made_up_"} {
		if strings.Contains(m, leak) {
			t.Errorf("metrics contain %q", leak)
		}
	}
}

func TestCallsInFlightFinishOnTheExecutorTheyStartedWith(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(o *gateway.Options) {
		o.Tools = []hooks.Tool{hooks.ToolFunc{ToolName: "slow", Func: func(context.Context, map[string]any) (string, error) {
			close(started)
			<-release
			return "done", nil
		}}}
	})
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: allow-all}
spec: {}
`))
	done := make(chan wire.ToolCallResponse)
	go func() { done <- e.call("slow", `{}`) }()
	<-started
	e.mustPush(compileYAML(t, e.ws, `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: deny-slow}
spec: {tools: {deny: ["slow"]}}
`))
	close(release)
	if r := <-done; r.Status != "succeeded" || r.Result != "done" {
		t.Errorf("the call in flight: %+v", r)
	}
	if r := e.call("slow", `{}`); r.Status != "denied" {
		t.Errorf("a call after the push: %+v", r)
	}
}

func TestConcurrentCallsAndPushes(t *testing.T) {
	e := newEnv(t, nil)
	a := compileYAML(t, e.ws, basePolicy)
	b := compileYAML(t, e.ws, strings.Replace(basePolicy, `"**/.env"`, `"**/.env", "**/*.pem"`, 1))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				if i%4 == 0 {
					cfg := a
					if j%2 == 1 {
						cfg = b
					}
					c := *cfg
					c.IssuedAt = time.Now().UnixNano()
					if status, body := e.push(&c); status != http.StatusOK && status != http.StatusConflict {
						t.Errorf("push answered %d %s", status, body)
					}
					continue
				}
				if r := e.call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
					t.Errorf("forbidden read: %+v", r)
				}
			}
		})
	}
	wg.Wait()
}

func TestAPanickingHandlerAnswers500(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Authenticator = gateway.AuthenticatorFunc(func(*http.Request) (string, error) { panic("boom") })
	})
	if status, body := e.push(&gatewayconfig.Config{}); status != http.StatusInternalServerError || !strings.Contains(string(body), `"error":"internal error"`) {
		t.Errorf("answered %d %s", status, body)
	}
	if status, _ := e.do(http.MethodGet, "/healthz", "", nil, nil); status != http.StatusOK {
		t.Error("the gateway did not survive a panic")
	}
}

func TestApplyErrors(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.srv.Apply(context.Background(), nil, "test"); !errors.Is(err, gateway.ErrInvalidConfig) {
		t.Errorf("nil config: %v", err)
	}
	if _, err := gateway.New(gateway.Options{}); err == nil {
		t.Error("New without a workspace succeeded")
	}
	if _, err := gateway.NewStaticToken("short"); err == nil {
		t.Error("a short static token was accepted")
	}
	_ = audit.Name
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func grep(text, substr string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// specOf returns h's decoded spec, of type T.
func specOf[T hooks.Spec](t testing.TB, h gatewayconfig.Hook) T {
	t.Helper()
	spec, err := h.Decode()
	if err != nil {
		t.Fatalf("decoding %s: %v", h.Name, err)
	}
	return spec.(T)
}
