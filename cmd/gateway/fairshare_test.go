package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A real gateway whose budget table (24 sessions, 2 per caller) twelve
// callers have filled still lets each newcomer open a session, in place of
// the idlest session of a caller above its fair share (the table divided
// by the callers), and never takes one from a caller within its share.
func TestTheGatewayBinaryGivesANewcomerItsFairShareOfAFullBudgetTable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws, policies := filepath.Join(tmp, "workspace"), filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "notes.txt"), "hello\n")
	writeFile(t, filepath.Join(policies, "budget.yaml"), `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: budget, namespace: team}
spec:
  subjects: {senders: ["caller-*"]}
  maxToolCalls: 1
`)
	caller := func(i int) string { return fmt.Sprintf("caller-%02d", i) }
	var tokens strings.Builder
	tokens.WriteString("tokens:\n")
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&tokens, "- {identity: %s, token: %s-token-0123456789}\n", caller(i), caller(i))
	}
	tokensFile := filepath.Join(tmp, "tokens.yaml")
	writeFile(t, tokensFile, tokens.String())
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	g := startGatewayOut(t, out, bin, "--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies,
		"--namespace", "team", "--auth-tokens-file", tokensFile,
		"--budget-max-sessions", "24", "--budget-max-sessions-per-caller", "2")

	client := &http.Client{Timeout: 30 * time.Second}
	// call makes one read_file call and returns "succeeded" or the denial's reason.
	call := func(who, session string) string {
		t.Helper()
		body := fmt.Sprintf(`{"sessionId":%q,"tool":"read_file","arguments":{"path":"notes.txt"}}`, session)
		req, err := http.NewRequest(http.MethodPost, g.base+"/v1/tool-calls", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+who+"-token-0123456789")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var r struct {
			Status string
			Denial *struct{ Rule, Reason string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: answered %d (%v)", who, session, resp.StatusCode, err)
		}
		if r.Denial != nil {
			return r.Denial.Rule + ": " + r.Denial.Reason
		}
		return r.Status
	}
	expect := func(who, session, want string) {
		t.Helper()
		if got := call(who, session); (want == "succeeded") != (got == "succeeded") || !strings.Contains(got, want) {
			t.Errorf("%s %s: %s; want %s", who, session, got, want)
		}
	}
	const spent, fullTable = "used its budget", "has its fair share"

	// Twelve callers fill the table with two sessions each.
	for i := 1; i <= 12; i++ {
		expect(caller(i), "s1", "succeeded")
		expect(caller(i), "s2", "succeeded")
	}
	// Twelve newcomers each get one session (their share is 24/13 .. 24/24
	// = 1), each in place of the idlest session of a caller holding two.
	for i := 13; i <= 24; i++ {
		expect(caller(i), "s1", "succeeded")
	}
	// Now every caller holds its share of one: nobody opens another, and
	// the 25th caller's share is 0.
	expect(caller(25), "s1", fullTable)
	for i := 13; i <= 24; i++ {
		expect(caller(i), "s2", fullTable)
	}
	// The first twelve lost their idlest session, s1, and kept s2, whose
	// budget is still spent.
	for i := 1; i <= 12; i++ {
		expect(caller(i), "s2", spent)
		expect(caller(i), "s1", fullTable)
	}
	for i := 13; i <= 24; i++ {
		expect(caller(i), "s1", spent)
	}
}
