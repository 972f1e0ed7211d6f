package cli

import (
	"fmt"
	"testing"
)

// TestParseNoteRoundTrips parses notes written in the gateway's format
// (gatewayk8s.Events), including names an attacker chose to look like the
// note's own separators.
func TestParseNoteRoundTrips(t *testing.T) {
	cases := []note{
		{tool: "read_file", session: "s1", sender: "alice", rule: "forbiddenPathGlobs", reason: "Path \"x\" matches."},
		{tool: `x" for session "forged`, session: `" sender "eve" (rule r): `, sender: "🙂\n\t", rule: "toolDeny", reason: "a): b"},
		{tool: "", session: "", sender: "", rule: "NoPolicy", reason: ""},
	}
	for _, verb := range []string{"Denied", "Would deny"} {
		for _, c := range cases {
			s := fmt.Sprintf("%s tool %q for session %q sender %q (rule %s): %s", verb, c.tool, c.session, c.sender, c.rule, c.reason)
			got, ok := parseNote(s)
			if !ok || got != c {
				t.Errorf("parseNote(%q) = %+v, %v; want %+v", s, got, ok, c)
			}
		}
	}
	for _, s := range []string{"", "Denied tool read_file", `Denied tool "a" for session "b" sender "c" rule x: y`, `Denied tool "a...`} {
		if got, ok := parseNote(s); ok {
			t.Errorf("parseNote(%q) = %+v, want no match", s, got)
		}
	}
}

func TestParsePolicyKind(t *testing.T) {
	for in, want := range map[string]string{
		"ap": "AutonomyPolicy", "AutonomyPolicy": "AutonomyPolicy", "autonomypolicies": "AutonomyPolicy",
		"ctp": "ContractPolicy", "contractpolicy.policy.toolhooks.dev": "ContractPolicy",
		"PH": "PluginHook", "pluginhooks.v1alpha1.policy.toolhooks.dev": "PluginHook",
		"rp": "ResultPolicy", "resultpolicies": "ResultPolicy", "ResultPolicy.policy.toolhooks.dev": "ResultPolicy",
	} {
		k, err := ParsePolicyKind(in)
		if err != nil || k.Kind != want {
			t.Errorf("ParsePolicyKind(%q) = %v, %v; want %s", in, k.Kind, err, want)
		}
	}
	for _, in := range []string{"", "pod", "policy", "autonomypolicy.example.com", "ap.policy.toolhooks.dev.evil"} {
		if k, err := ParsePolicyKind(in); err == nil {
			t.Errorf("ParsePolicyKind(%q) = %v, want an error", in, k)
		}
	}
}
