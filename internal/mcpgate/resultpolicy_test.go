package mcpgate_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
)

// Fake credentials, built at run time so that no scanner of this
// repository mistakes the source for a leak.
var (
	fakeAWSKeyID   = "AKIA" + "Z3MSJV4WZKQEXAMP"
	fakeKeyBody    = "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn" + "/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB"
	fakePrivateKey = "-----BEGIN RSA PRIVATE KEY-----\n" + fakeKeyBody + "\n-----END RSA PRIVATE KEY-----"
	fakeJWT        = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	fakeDBPassword = "s3cr3t" + "Pa55w0rd"
	fakeSecrets    = []string{fakeAWSKeyID, fakeKeyBody, fakeJWT, fakeDBPassword}
)

// withResultPolicy is the coding policy plus a result policy scanning every
// tool's result for secrets with action.
func withResultPolicy(t *testing.T, e *env, action resultscan.Action) {
	t.Helper()
	cfg := compileYAML(t, e.ws, codingPolicy)
	ref := hooks.PolicyRef{Kind: string(resultscan.KindName), Namespace: "default", Name: "no-secrets", UID: "u1", Generation: 1}
	cfg.Hooks = append(cfg.Hooks, gatewayconfig.Hook{Name: "ResultPolicy/default/no-secrets", Kind: resultscan.KindName,
		Policy: ref, Spec: gatewayconfig.MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Detectors: []string{resultscan.SetSecrets}, Action: action})})
	cfg.Revision = ""
	if _, err := e.srv.Apply(context.Background(), cfg, "test"); err != nil {
		t.Fatal(err)
	}
}

func writeSecrets(t *testing.T, e *env) {
	t.Helper()
	body := "aws_access_key_id = " + fakeAWSKeyID + "\n" + fakePrivateKey + "\ntoken: " + fakeJWT +
		"\nDATABASE_URL=postgres://app:" + fakeDBPassword + "@db.internal:5432/app\n"
	if err := os.WriteFile(filepath.Join(e.ws, "deploy.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// leaked returns the secrets found in v's JSON encoding.
func leaked(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range fakeSecrets {
		if strings.Contains(string(b), s) {
			out = append(out, s)
		}
	}
	return out
}

func findingRules(fs []hooks.ResultFiltering) []string {
	var out []string
	for _, f := range fs {
		for _, x := range f.Findings {
			out = append(out, x.Rule)
		}
	}
	slices.Sort(out)
	return out
}

// A file of secrets read by a built-in tool, over MCP and POST
// /v1/tool-calls, and an upstream tool echoing one in its text and its
// structuredContent: the caller sees markers, never the values, and the
// audit record names the rules.
func TestResultPolicyRedactsBuiltinAndUpstreamResults(t *testing.T) {
	up, _ := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL + "/")})
	writeSecrets(t, e)
	withResultPolicy(t, e, resultscan.Redact)
	cs := connect(t, e.url, aliceToken)
	wantRules := []string{"aws-access-key-id", "connection-string-password", "jwt", "private-key"}

	res := call(t, cs, "read_file", `{"path":"deploy.txt"}`)
	if res.IsError || len(leaked(t, res)) > 0 || !strings.Contains(text(res), resultscan.RedactedMarker("jwt")) {
		t.Fatalf("MCP read_file: isError=%v leaked=%q text=%q", res.IsError, leaked(t, res), text(res))
	}
	rec := lastRecord(t, e.audit)
	if rec.Outcome != hooks.StatusSucceeded || !slices.Equal(findingRules(rec.Filtering), wantRules) ||
		rec.Filtering[0].Policy.Name != "no-secrets" || len(leaked(t, rec)) > 0 {
		t.Fatalf("audit: %+v", rec)
	}

	got := postToolCall(t, e, "read_file", `{"path":"deploy.txt"}`)
	if got.Status != string(hooks.StatusSucceeded) || len(leaked(t, got)) > 0 || len(got.Redactions) != len(wantRules) {
		t.Fatalf("POST /v1/tool-calls: %+v", got)
	}

	res = call(t, cs, "up_echo", `{"text":"`+fakeJWT+`"}`)
	if res.IsError || len(leaked(t, res)) > 0 || text(res) != "echo: "+resultscan.RedactedMarker("jwt") {
		t.Fatalf("MCP up_echo: isError=%v leaked=%q text=%q structured=%v", res.IsError, leaked(t, res), text(res), res.StructuredContent)
	}
	if res.StructuredContent != nil {
		t.Errorf("unscanned structuredContent passed through: %v", res.StructuredContent)
	}
	// A result the policy scanned and found clean is scanned text as well.
	res = call(t, cs, "up_echo", `{"text":"hello"}`)
	if res.IsError || text(res) != "echo: hello" || len(lastRecord(t, e.audit).Filtering) != 1 {
		t.Fatalf("MCP up_echo clean: %q %+v", text(res), lastRecord(t, e.audit).Filtering)
	}
}

// Withhold replaces the whole result, over MCP (an error naming the hook)
// and POST /v1/tool-calls (status withheld, with the decision); nothing of
// the file reaches the caller.
func TestResultPolicyWithholds(t *testing.T) {
	up, _ := httpUpstream(t)
	e := newEnv(t, envOptions{upstreams: upstreamConfig(up.URL + "/")})
	writeSecrets(t, e)
	withResultPolicy(t, e, resultscan.Withhold)
	cs := connect(t, e.url, aliceToken)
	want := hooks.WithheldText + "ResultPolicy/default/no-secrets"

	for _, tc := range []struct{ tool, args string }{{"read_file", `{"path":"deploy.txt"}`}, {"up_echo", `{"text":"` + fakeJWT + `"}`}} {
		res := call(t, cs, tc.tool, tc.args)
		if !res.IsError || text(res) != want || res.StructuredContent != nil || len(leaked(t, res)) > 0 {
			t.Errorf("MCP %s: isError=%v text=%q structured=%v", tc.tool, res.IsError, text(res), res.StructuredContent)
		}
		if rec := lastRecord(t, e.audit); rec.Outcome != hooks.StatusWithheld || rec.Withheld == nil ||
			rec.Withheld.Rule != resultscan.RuleWithheld || rec.ResultLength != len(want) {
			t.Errorf("audit of %s: %+v", tc.tool, rec)
		}
	}
	got := postToolCall(t, e, "read_file", `{"path":"deploy.txt"}`)
	if got.Status != string(hooks.StatusWithheld) || got.Result != want || got.Withheld == nil ||
		got.Withheld.Rule != resultscan.RuleWithheld || strings.Contains(got.Result, "aws") {
		t.Fatalf("POST /v1/tool-calls: %+v", got)
	}
	if m := e.metrics(); !strings.Contains(m, `outcome="withheld",tool="read_file"} 2`) {
		t.Errorf("metrics lack the withheld calls:\n%s", m)
	}
	// A clean result is not withheld.
	if res := call(t, cs, "read_file", `{"path":"README.md"}`); res.IsError || text(res) != "# project\n" {
		t.Errorf("clean read: %q", text(res))
	}
}

// A gateway given only result policies decides nothing before calls, so it
// denies every call, as with no policy at all.
func TestOnlyResultPoliciesDenyEveryCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := &gatewayconfig.Config{Hooks: []gatewayconfig.Hook{
		{Name: "AuditLog", Kind: gatewayconfig.KindAuditLog},
		{Name: "ResultPolicy/default/r", Kind: resultscan.KindName,
			Spec: gatewayconfig.MarshalSpec(&resultscan.Spec{Tools: []string{"*"}, Detectors: []string{resultscan.SetSecrets}})},
	}}
	if _, err := e.srv.Apply(context.Background(), cfg, "test"); err != nil {
		t.Fatal(err)
	}
	got := postToolCall(t, e, "read_file", `{"path":"README.md"}`)
	if got.Status != string(hooks.StatusDenied) || got.Denial == nil {
		t.Fatalf("%+v", got)
	}
}
