package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// A built at run time so that no scanner of this repository mistakes the
// source for a leak.
var fakeKey = "AKIA" + "IOSFODNN7EXAMPLE"

func TestExpectResultMismatch(t *testing.T) {
	out := func(s string) *string { return &s }
	redacted := &ResultDecision{Output: "k=[REDACTED:aws-access-key-id]",
		Findings: []ResultFinding{{Hook: "h", ResultFinding: hooks.ResultFinding{Rule: "aws-access-key-id", Action: "Redact", Count: 1, Bytes: 20}}}}
	withheld := &ResultDecision{Withheld: true, Hook: "h", Rule: "resultWithheld", Reason: "no", Output: "withheld"}
	cases := []struct {
		name   string
		expect ExpectResult
		got    *ResultDecision
		want   string
	}{
		{"everything as expected", ExpectResult{Output: out(redacted.Output), Contains: []string{"REDACTED"}, Excludes: []string{fakeKey},
			Rules: []string{"aws-access-key-id"}}, redacted, ""},
		{"a result passed on that should be withheld", ExpectResult{Withheld: true}, redacted, "want the result withheld: true, got passed on"},
		{"a withheld result", ExpectResult{}, withheld, "want the result withheld: false, got withheld by resultWithheld (hook h): no"},
		{"another output", ExpectResult{Output: out("x")}, redacted, `want output "x", got "k=[REDACTED:aws-access-key-id]"`},
		{"a missing text", ExpectResult{Contains: []string{"k=AKIA"}}, redacted, `want the output to contain "k=AKIA"`},
		{"a leaked text", ExpectResult{Excludes: []string{"k="}}, redacted, `want the output not to contain "k="`},
		{"a rule that did not fire", ExpectResult{Rules: []string{"jwt"}}, redacted, "want rule jwt to fire, got [aws-access-key-id]"},
		{"no result at all", ExpectResult{}, nil, "want a result, got none"},
	}
	yes := true
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Expect{Allowed: &yes, Result: &tc.expect}
			if got := e.mismatch(Decision{Allowed: true, Result: tc.got}); got != tc.want {
				t.Errorf("mismatch = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSuiteResultFieldsAreValidated(t *testing.T) {
	for name, c := range map[string]string{
		"expect.result without a result": `{name: a, tool: t, expect: {allowed: true, result: {withheld: true}}}`,
		"a result on a denial":           `{name: a, tool: t, result: x, expect: {allowed: false}}`,
		"expect.result on a denial":      `{name: a, tool: t, result: x, expect: {allowed: false, result: {}}}`,
		"an unknown expect.result field": `{name: a, tool: t, result: x, expect: {allowed: true, result: {redacted: true}}}`,
	} {
		doc := "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: PolicyTest\npolicies: [p]\ncases:\n- " + c + "\n"
		if _, err := decodeSuite([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A suite's result cases run the result policies on the case's result
// through the same executor as its calls: a redacting policy passes the
// expectations that name the marker and fails one that expects the value.
func TestRunSuiteChecksResults(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy.yaml", `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ResultPolicy
metadata: {name: secrets}
spec: {tools: ["*"], detectors: [secrets]}
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: base}
spec: {}
`)
	write("s.test.yaml", `apiVersion: policy.toolhooks.dev/v1alpha1
kind: PolicyTest
policies: [policy.yaml]
cases:
- name: redacted
  tool: read_file
  args: {path: a}
  result: "k=`+fakeKey+`"
  expect: {allowed: true, result: {output: "k=[REDACTED:aws-access-key-id]", rules: [aws-access-key-id], excludes: [`+fakeKey+`]}}
- name: wrongly expects the value
  tool: read_file
  args: {path: a}
  result: "k=`+fakeKey+`"
  expect: {allowed: true, result: {contains: [`+fakeKey+`]}}
`)
	s, err := LoadSuite(filepath.Join(dir, "s.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSuite(context.Background(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || !res[0].Pass || res[1].Pass || !strings.Contains(res[1].Message, "want the output to contain") {
		t.Errorf("results %+v", res)
	}
}
