package autonomy

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// A policy's subjects decide, alike for Before, the run-time checks and
// DeniesOutright, whether it restricts a call: it restricts the callers it
// binds everywhere and the others nowhere.
func TestSubjectsBindEveryCheckAlike(t *testing.T) {
	f := newFixture(t)
	h, err := New(Config{
		Mode: ModeReadOnly, WorkspaceRoot: f.ws, WorkspaceOnly: true, ForbiddenPathGlobs: []string{"**/.env"},
		ToolDeny: []string{"web_*"},
		Subjects: hooks.Subjects{Callers: []hooks.CallerSubject{
			{Kind: hooks.CallerServiceAccount, Namespace: "agents", Name: "coder"},
			{Kind: hooks.CallerGroup, Name: "interns"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	as := func(id *hooks.Identity, tool, args string) *hooks.Call {
		c := hooks.NewCall(tool, args)
		c.Caller = id
		if id != nil {
			c.SenderID = id.Username
		}
		return c
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		id    *hooks.Identity
		bound bool
	}{
		{"the bound ServiceAccount", &hooks.Identity{Username: "system:serviceaccount:agents:coder"}, true},
		{"a member of the bound group", &hooks.Identity{Username: "carol", Groups: []string{"interns"}}, true},
		{"a call without a verified caller", nil, false},
		{"a ServiceAccount of the same name in another namespace", &hooks.Identity{Username: "system:serviceaccount:other:coder"}, false},
		{"a user named like the group", &hooks.Identity{Username: "interns"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := map[string]hooks.Verdict{
				"Before toolDeny": mustBefore(t, h, as(tc.id, "web_fetch", `{}`)),
				"Before readOnly": mustBefore(t, h, as(tc.id, "write_file", `{"path":"a.txt","content":"x"}`)),
				"Before path":     mustBefore(t, h, as(tc.id, "read_file", `{"path":"/etc/passwd"}`)),
				"CheckExec":       h.CheckExec(ctx, as(tc.id, "shell", `{}`), f.ws, nil, []string{"cat", ".env"}),
				"CheckOpen write": h.CheckOpen(ctx, as(tc.id, "write_file", `{}`), filepath.Join(f.ws, "a.txt"), true),
				"CheckOpen path":  h.CheckOpen(ctx, as(tc.id, "read_file", `{}`), filepath.Join(f.ws, ".env"), false),
			}
			for _, tool := range []string{"web_fetch", "write_file", "shell"} {
				v, denied := h.DeniesOutright(as(tc.id, tool, ""))
				if !denied {
					v = hooks.Allow
				}
				checks["DeniesOutright "+tool] = v
			}
			for name, v := range checks {
				if v.Allowed == tc.bound {
					t.Errorf("%s: allowed=%v (%s), want the policy to restrict the caller: %v", name, v.Allowed, v.Reason, tc.bound)
				}
			}
			if v, denied := h.DeniesOutright(as(tc.id, "read_file", "")); denied {
				t.Errorf("read_file is denied outright: %+v", v)
			}
		})
	}
}

func mustBefore(t *testing.T, h *Hook, c *hooks.Call) hooks.Verdict {
	t.Helper()
	v, err := h.Before(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValidateRejectsInvalidSubjects(t *testing.T) {
	for _, s := range []hooks.Subjects{
		{Callers: []hooks.CallerSubject{{Kind: hooks.CallerServiceAccount, Name: "coder"}}},
		{Callers: []hooks.CallerSubject{{Kind: "Role", Name: "admin"}}},
		{Senders: []string{"bot-["}},
	} {
		if err := Validate(Config{Subjects: s}); !errors.Is(err, hooks.ErrInvalidSpec) && !errors.Is(err, hooks.ErrInvalidGlob) {
			t.Errorf("Validate(%+v) = %v, want an invalid spec or glob", s, err)
		}
	}
}
