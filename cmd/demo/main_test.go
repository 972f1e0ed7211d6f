package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestDemoSessionDecisions runs the demo's scripted session and checks each
// decision and who made it, so the README's first command keeps telling the truth.
func TestDemoSessionDecisions(t *testing.T) {
	var out strings.Builder
	if err := run(&out, false); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	text := out.String()
	steps := regexp.MustCompile(`(?m)^\s*\d+\. .*\n\s+(allowed|DENIED.*\n.*rule (\w+))`).FindAllStringSubmatch(text, -1)
	want := []string{"allowed", "allowed", "allowed", "workspaceOnly", "forbiddenPathGlobs", "workspaceOnly",
		"shellAllowList", "shellAllowList", "allowed", "allowed", "maxToolCalls"}
	if len(steps) != len(want) {
		t.Fatalf("found %d decisions, want %d:\n%s", len(steps), len(want), text)
	}
	for i, s := range steps {
		got := s[1]
		if got != "allowed" {
			got = s[2]
		}
		if got != want[i] {
			t.Errorf("step %d: %s, want %s", i+1, got, want[i])
		}
	}
	if !strings.Contains(text, "5 allowed, 6 denied; 11 audit records written (one per call)") {
		t.Errorf("summary line missing:\n%s", text)
	}
	if !strings.Contains(text, `Shell command "curl https://example.invalid/x" is not allowed`) {
		t.Errorf("the curl | sh step should name curl as the command the allow-list lacks:\n%s", text)
	}
}
