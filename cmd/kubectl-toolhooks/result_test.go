package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Fake credentials of each rule's shape, built at run time so that no
// scanner of this repository mistakes the source for a leak.
var (
	fakeAWSKey  = "AKIA" + "IOSFODNN7EXAMPLE"
	fakePrivKey = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END " + "OPENSSH PRIVATE KEY-----"
)

// resultPolicies is a directory with the sample AutonomyPolicy and result
// policies for check --result.
func resultPolicies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "autonomy.yaml", mustRead(t, samples+"/policy_v1alpha1_autonomypolicy.yaml"))
	writeFile(t, dir, "results.yaml", `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ResultPolicy
metadata: {name: secrets}
spec:
  tools: ["*"]
  detectors: [secrets]
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ResultPolicy
metadata: {name: no-keys-from-shell}
spec:
  tools: [shell]
  detectors: [private-key]
  action: Withhold
`)
	return dir
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := readResult(nil, path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// check --result runs the result policies on the given output and prints
// what the caller would see: never the secret, the rule that fired, and a
// withheld result exits 1.
func TestCheckResultShowsWhatTheCallerSees(t *testing.T) {
	ws := t.TempDir()
	pol := resultPolicies(t)
	out := writeFile(t, t.TempDir(), "out.txt", "key = "+fakeAWSKey+"\nregion = eu\n")
	args := func(tool, cmdArgs string, extra ...string) []string {
		return append([]string{"check", "-f", pol, "--workspace", ws, "--tool", tool, "--args", cmdArgs}, extra...)
	}

	r := runCLI(t, args("read_file", `{"path":"a.txt"}`, "--result", out)...)
	if r.code != 0 || strings.Contains(r.stdout, fakeAWSKey) ||
		!strings.Contains(r.stdout, "key = [REDACTED:aws-access-key-id]\nregion = eu\n") ||
		!strings.Contains(r.stdout, "ResultPolicy/default/secrets: rule aws-access-key-id, Redact, 1 match(es), 20 bytes") {
		t.Errorf("redacted: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, args("read_file", `{"path":"a.txt"}`, "--result", out, "-o", "json")...)
	var d struct {
		Allowed bool `json:"allowed"`
		Result  struct {
			Withheld bool   `json:"withheld"`
			Output   string `json:"output"`
			Findings []struct {
				Hook, Rule, Action string
				Count, Bytes       int
			} `json:"findings"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if !d.Allowed || d.Result.Withheld || strings.Contains(d.Result.Output, fakeAWSKey) || len(d.Result.Findings) != 1 ||
		d.Result.Findings[0].Rule != "aws-access-key-id" || d.Result.Findings[0].Bytes != len(fakeAWSKey) {
		t.Errorf("json: %+v", d)
	}

	// A private key in a shell command's output is withheld (stdin input).
	var errOut, stdout bytes.Buffer
	code := runIO(args("shell", `{"command":"git status"}`, "--result", "-"), strings.NewReader("x\n"+fakePrivKey+"\n"), &stdout, &errOut)
	if code != exitDenied || strings.Contains(stdout.String(), "b3BlbnNzaC1rZXkt") ||
		!strings.Contains(stdout.String(), "result withheld") || !strings.Contains(stdout.String(), "ResultPolicy/default/no-keys-from-shell") {
		t.Errorf("withheld: code %d\n%s%s", code, stdout.String(), errOut.String())
	}

	// A clean result is passed on; a denied call is denied whatever its result.
	clean := writeFile(t, t.TempDir(), "clean.txt", "hello\n")
	if r := runCLI(t, args("read_file", `{"path":"a.txt"}`, "--result", clean)...); r.code != 0 ||
		!strings.Contains(r.stdout, "result passed on unchanged") || !strings.Contains(r.stdout, "hello") {
		t.Errorf("clean: code %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, args("read_file", `{"path":".env"}`, "--result", out)...); r.code != exitDenied || strings.Contains(r.stdout, "REDACTED") {
		t.Errorf("denied call: code %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, args("read_file", `{"path":"a.txt"}`, "--result", pol+"/missing.txt")...); r.code != exitBadInput {
		t.Errorf("missing result file: code %d\n%s", r.code, r.stderr)
	}
	bad := writeFile(t, t.TempDir(), "bad.txt", "\xff\xfe")
	if r := runCLI(t, args("read_file", `{"path":"a.txt"}`, "--result", bad)...); r.code != exitBadInput || !strings.Contains(r.stderr, "UTF-8") {
		t.Errorf("invalid UTF-8 result: code %d\n%s", r.code, r.stderr)
	}
}
