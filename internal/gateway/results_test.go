package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// A fake GitHub token, built at run time so that no scanner of this
// repository mistakes the source for a leak.
var fakeGitHubToken = "ghp_" + "8Rf3kXq9PzL2mN7vB4cT1wY6hJ0sD5aE2gKq"

// pushWithResultPolicy puts the base policy and a result policy for the
// shell tool with action in force.
func (e *env) pushWithResultPolicy(action resultscan.Action) {
	e.t.Helper()
	cfg := compileYAML(e.t, e.ws, basePolicy)
	cfg.Hooks = append(cfg.Hooks, gatewayconfig.Hook{Name: "ResultPolicy/default/no-secrets", Kind: resultscan.KindName,
		Policy: hooks.PolicyRef{Kind: "ResultPolicy", Namespace: "default", Name: "no-secrets"},
		Spec:   gatewayconfig.MarshalSpec(&resultscan.Spec{Tools: []string{"shell"}, Detectors: []string{resultscan.SetSecrets}, Action: action})})
	cfg.Revision = gatewayconfig.ComputeRevision(cfg.Hooks)
	e.mustPush(cfg)
}

func (e *env) postResult(body map[string]any) wire.ResultResponse {
	e.t.Helper()
	code, b := e.post("/v1/results", body)
	if code != http.StatusOK {
		e.t.Fatalf("POST /v1/results answered %d %s", code, b)
	}
	var r wire.ResultResponse
	mustUnmarshal(e.t, b, &r)
	return r
}

// A runtime that runs its tools itself posts their results; the gateway
// answers what the model may see, audits it and counts the findings.
func TestResultsAPIRedactsAndAudits(t *testing.T) {
	e := newEnv(t, nil)
	e.pushWithResultPolicy(resultscan.Redact)
	out := "$ env\nGITHUB_TOKEN=" + fakeGitHubToken + "\nHOME=/root\n"
	r := e.postResult(map[string]any{"sessionId": "s1", "tool": "shell", "arguments": map[string]string{"command": "env"}, "result": out})
	want := "$ env\nGITHUB_TOKEN=" + resultscan.RedactedMarker("github-token") + "\nHOME=/root\n"
	if r.Status != "succeeded" || r.Result != want || len(r.Redactions) != 1 || r.Redactions[0].Rule != "github-token" ||
		r.Redactions[0].Bytes != len(fakeGitHubToken) {
		t.Fatalf("%+v", r)
	}
	recs := e.audit.Records()
	rec := recs[len(recs)-1]
	if rec.Tool != "shell" || rec.SenderID != "agent" || rec.SessionID != "s1" || rec.Outcome != hooks.StatusSucceeded ||
		len(rec.Filtering) != 1 || rec.ResultLength != len(want) {
		t.Fatalf("audit %+v", rec)
	}
	// A failed tool's error text is scanned too.
	r = e.postResult(map[string]any{"tool": "shell", "result": "Error: " + fakeGitHubToken, "failed": true})
	if r.Status != "failed" || strings.Contains(r.Result, fakeGitHubToken) {
		t.Fatalf("%+v", r)
	}
	// Tools the policy does not select pass unchanged, recorded with no findings.
	r = e.postResult(map[string]any{"tool": "read_file", "result": fakeGitHubToken})
	if r.Status != "succeeded" || r.Result != fakeGitHubToken || len(r.Redactions) != 0 {
		t.Fatalf("%+v", r)
	}
	m := e.metrics()
	for _, want := range []string{
		`toolhooks_result_findings_total{action="Redact",hook="ResultPolicy/default/no-secrets",rule="github-token"} 2`,
		`toolhooks_decision_duration_seconds_count{api="results"} 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestResultsAPIWithholds(t *testing.T) {
	e := newEnv(t, nil)
	e.pushWithResultPolicy(resultscan.Withhold)
	r := e.postResult(map[string]any{"tool": "shell", "result": "token " + fakeGitHubToken})
	if r.Status != "withheld" || r.Result != hooks.WithheldText+"ResultPolicy/default/no-secrets" || r.Withheld == nil ||
		r.Withheld.Rule != resultscan.RuleWithheld || r.Withheld.Policy == nil || r.Withheld.Policy.Name != "no-secrets" {
		t.Fatalf("%+v", r)
	}
	recs := e.audit.Records()
	if rec := recs[len(recs)-1]; rec.Outcome != hooks.StatusWithheld || rec.Withheld == nil {
		t.Fatalf("audit %+v", rec)
	}
}

// With no policy in force nothing says a result is clean: it is withheld,
// and the attempt is audited.
func TestResultsAPIWithholdsWithoutAPolicy(t *testing.T) {
	e := newEnv(t, nil)
	before := len(e.audit.Records())
	r := e.postResult(map[string]any{"tool": "shell", "result": "anything"})
	if r.Status != "withheld" || strings.Contains(r.Result, "anything") || r.Withheld == nil {
		t.Fatalf("%+v", r)
	}
	if len(e.audit.Records()) != before+1 {
		t.Errorf("not audited")
	}
}

func TestResultsAPIRefusesBadRequests(t *testing.T) {
	e := newEnv(t, nil)
	e.pushWithResultPolicy(resultscan.Redact)
	for name, body := range map[string]string{
		"no tool":        `{"result":"x"}`,
		"unknown member": `{"tool":"shell","result":"x","output":"y"}`,
		"duplicate":      `{"tool":"shell","result":"` + fakeGitHubToken + `","result":"clean"}`,
		"trailing":       `{"tool":"shell","result":"x"} {}`,
		"not an object":  `"x"`,
		"bad utf-8":      "{\"tool\":\"shell\",\"result\":\"\xff\"}",
	} {
		code, b := e.do(http.MethodPost, "/v1/results", "application/json", []byte(body), map[string]string{"Authorization": "Bearer " + agentToken})
		if code != http.StatusBadRequest || strings.Contains(string(b), fakeGitHubToken) {
			t.Errorf("%s: %d %s", name, code, b)
		}
	}
	code, _ := e.do(http.MethodPost, "/v1/results", "application/json", []byte(`{"tool":"shell","result":"x"}`), nil)
	if code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", code)
	}
	code, b := e.do(http.MethodPost, "/v1/results", "application/json", []byte(`{"tool":"shell","senderId":"someone-else","result":"x"}`),
		map[string]string{"Authorization": "Bearer " + agentToken})
	if code != http.StatusBadRequest {
		t.Errorf("posing as another sender: %d %s", code, b)
	}
	code, _ = e.do(http.MethodGet, "/v1/results", "", nil, map[string]string{"Authorization": "Bearer " + agentToken})
	if code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", code)
	}
}

// resultEvents is a DenialSink and ResultSink that keeps what it is told.
type resultEvents struct {
	mu       sync.Mutex
	filtered []hooks.ResultFiltering
	withheld []*hooks.Decision
}

func (r *resultEvents) Denied(context.Context, *hooks.Call, hooks.Decision) {}

func (r *resultEvents) ResultFiltered(_ context.Context, _ *hooks.Call, f hooks.ResultFiltering, withheld *hooks.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.filtered = append(r.filtered, f)
	r.withheld = append(r.withheld, withheld)
}

func (r *resultEvents) wait(t *testing.T, n int) ([]hooks.ResultFiltering, []*hooks.Decision) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		f, w := slices.Clone(r.filtered), slices.Clone(r.withheld)
		r.mu.Unlock()
		if len(f) >= n || time.Now().After(deadline) {
			return f, w
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The denial sink is told what each result policy found (for the Events on
// the policy), and which one withheld a result; a clean scan tells nothing.
func TestResultFindingsReachTheSink(t *testing.T) {
	sink := &resultEvents{}
	e := newEnv(t, func(o *gateway.Options) { o.DenialSink = sink })
	e.pushWithResultPolicy(resultscan.Withhold)
	e.postResult(map[string]any{"tool": "shell", "result": "clean"})
	if r := e.postResult(map[string]any{"tool": "shell", "result": "t=" + fakeGitHubToken}); r.Status != "withheld" {
		t.Fatalf("%+v", r)
	}
	f, w := sink.wait(t, 1)
	if len(f) != 1 || f[0].Policy.Name != "no-secrets" || len(f[0].Findings) != 1 || f[0].Findings[0].Rule != "github-token" ||
		w[0] == nil || w[0].Rule != resultscan.RuleWithheld {
		t.Fatalf("sink told %+v %+v", f, w)
	}
}
