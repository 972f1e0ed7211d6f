package hooks_test

import (
	"slices"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestExactToolNamesKeepsOnlyNamesThatAreNotGlobs(t *testing.T) {
	got := hooks.ExactToolNames(
		[]string{"read_file", "", "mcp__*", "shell"},
		nil,
		[]string{"git?", "a[bc]", "{x,y}", `esc\*`, "write_file"},
	)
	want := []string{"read_file", "shell", "write_file"}
	if !slices.Equal(got, want) {
		t.Fatalf("ExactToolNames = %q, want %q", got, want)
	}
	if got := hooks.ExactToolNames(); got != nil {
		t.Fatalf("ExactToolNames() = %q, want nil", got)
	}
}
