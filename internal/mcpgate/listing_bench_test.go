package mcpgate

import (
	"fmt"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
)

// BenchmarkOutrightDenials measures what one tools/list costs the gateway
// for one caller: every Deny entry asked about every tool, with 3
// AutonomyPolicies with subjects (one binding the caller) and 40 tools.
func BenchmarkOutrightDenials(b *testing.B) {
	ws := b.TempDir()
	var entries []hooks.Entry
	for i, s := range []hooks.Subjects{
		{Callers: []hooks.CallerSubject{{Kind: hooks.CallerUser, Name: "alice"}}},
		{Callers: []hooks.CallerSubject{{Kind: hooks.CallerGroup, Name: "reviewers"}}},
		{Sessions: []string{"ci-*"}},
	} {
		h, err := autonomy.Build(fmt.Sprintf("p%d", i), autonomy.Config{Mode: "readonly", ToolDeny: []string{"web_*", "delegate_*"},
			ForbiddenPathGlobs: []string{"**/.env"}, Subjects: s}, hooks.BuildEnv{Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		entries = append(entries, hooks.Entry{Hook: h, Action: hooks.ActionDeny})
	}
	names := []string{"read_file", "write_file", "edit_file", "list_dir", "shell"}
	for i := len(names); i < 40; i++ {
		names = append(names, fmt.Sprintf("up_tool_%d", i))
	}
	caller := &hooks.Call{SessionID: "s-1", ChannelID: ChannelID, SenderID: "alice", Caller: &hooks.Identity{Username: "alice"}}
	var n int
	b.ReportAllocs()
	for b.Loop() {
		n = len(outrightDenials(entries, "", names, caller))
	}
	if n == 0 {
		b.Fatal("the bound caller was denied nothing")
	}
}
