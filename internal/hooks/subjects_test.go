package hooks_test

import (
	"errors"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

func TestSubjectsMatcher(t *testing.T) {
	sa := &hooks.Identity{Username: "system:serviceaccount:agents:coder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:agents", "system:authenticated"}}
	alice := &hooks.Identity{Username: "alice@example.com", Groups: []string{"platform-team"}}
	as := func(id *hooks.Identity) hooks.Call {
		if id == nil {
			return hooks.Call{SessionID: "s-1"}
		}
		return hooks.Call{SessionID: "s-1", SenderID: id.Username, Caller: id}
	}
	type S = hooks.Subjects
	type C = hooks.CallerSubject
	tests := []struct {
		name    string
		s       S
		call    hooks.Call
		want    bool
		wantErr error
	}{
		{"empty subjects match any call", S{}, hooks.Call{SessionID: "x"}, true, nil},
		{"light.* does not match switch.kitchen", S{Sessions: []string{"light.*"}}, hooks.Call{SessionID: "switch.kitchen"}, false, nil},
		{"light.* matches light.kitchen", S{Sessions: []string{"light.*"}}, hooks.Call{SessionID: "light.kitchen"}, true, nil},
		{"abc*def does not match abcZZZde", S{Senders: []string{"abc*def"}}, hooks.Call{SenderID: "abcZZZde"}, false, nil},
		{"abc*def matches abcZZZdef", S{Senders: []string{"abc*def"}}, hooks.Call{SenderID: "abcZZZdef"}, true, nil},
		{"a star does not cross a slash", S{Channels: []string{"slack/*"}}, hooks.Call{ChannelID: "slack/a/b"}, false, nil},
		{"a double star crosses slashes", S{Channels: []string{"slack/**"}}, hooks.Call{ChannelID: "slack/a/b"}, true, nil},
		{"all lists must match", S{Sessions: []string{"s-*"}, Senders: []string{"bob"}}, hooks.Call{SessionID: "s-1", SenderID: "alice"}, false, nil},
		{"any pattern of a list may match", S{Senders: []string{"bob", "al*"}}, hooks.Call{SenderID: "alice"}, true, nil},
		{"an invalid glob is rejected", S{Sessions: []string{"s-["}}, hooks.Call{}, false, hooks.ErrInvalidGlob},
		{"an empty glob is rejected", S{Channels: []string{""}}, hooks.Call{}, false, hooks.ErrInvalidGlob},

		{"a ServiceAccount matches its own username", S{Callers: []C{{Kind: "ServiceAccount", Namespace: "agents", Name: "coder"}}}, as(sa), true, nil},
		{"a ServiceAccount of another namespace does not match", S{Callers: []C{{Kind: "ServiceAccount", Namespace: "other", Name: "coder"}}}, as(sa), false, nil},
		{"a ServiceAccount name is not a glob", S{Callers: []C{{Kind: "ServiceAccount", Namespace: "agents", Name: "*"}}}, as(sa), false, nil},
		{"a ServiceAccount does not match a user spelled like its username", S{Callers: []C{{Kind: "ServiceAccount", Namespace: "agents", Name: "coder"}}},
			as(&hooks.Identity{Username: "system:serviceaccount:agents:coder:x"}), false, nil},
		{"a user matches its username exactly", S{Callers: []C{{Kind: "User", Name: "alice@example.com"}}}, as(alice), true, nil},
		{"a user does not match another case", S{Callers: []C{{Kind: "User", Name: "Alice@example.com"}}}, as(alice), false, nil},
		{"a user does not match a group of that name", S{Callers: []C{{Kind: "User", Name: "platform-team"}}}, as(alice), false, nil},
		{"a group matches one of the caller's groups", S{Callers: []C{{Kind: "Group", Name: "platform-team"}}}, as(alice), true, nil},
		{"a namespace's ServiceAccounts group binds them all", S{Callers: []C{{Kind: "Group", Name: "system:serviceaccounts:agents"}}}, as(sa), true, nil},
		{"a group does not match a username", S{Callers: []C{{Kind: "Group", Name: "alice@example.com"}}}, as(alice), false, nil},
		{"any caller entry may match", S{Callers: []C{{Kind: "User", Name: "bob"}, {Kind: "Group", Name: "platform-team"}}}, as(alice), true, nil},
		{"a call without a verified caller matches no caller", S{Callers: []C{{Kind: "User", Name: "alice@example.com"}, {Kind: "Group", Name: "platform-team"}}}, as(nil), false, nil},
		{"a call whose sender id names a user but has no verified caller does not match",
			S{Callers: []C{{Kind: "User", Name: "alice@example.com"}}}, hooks.Call{SenderID: "alice@example.com"}, false, nil},
		{"callers and globs must both match", S{Sessions: []string{"ci-*"}, Callers: []C{{Kind: "User", Name: "alice@example.com"}}}, as(alice), false, nil},
		{"an unknown kind is rejected", S{Callers: []C{{Kind: "Role", Name: "x"}}}, hooks.Call{}, false, hooks.ErrInvalidSpec},
		{"a caller without a name is rejected", S{Callers: []C{{Kind: "Group"}}}, hooks.Call{}, false, hooks.ErrInvalidSpec},
		{"a ServiceAccount without a namespace is rejected", S{Callers: []C{{Kind: "ServiceAccount", Name: "x"}}}, hooks.Call{}, false, hooks.ErrInvalidSpec},
		{"a user with a namespace is rejected", S{Callers: []C{{Kind: "User", Name: "x", Namespace: "ns"}}}, hooks.Call{}, false, hooks.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := hooks.NewSubjectMatcher(tt.s)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("NewSubjectMatcher error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Matches(&tt.call); got != tt.want {
				t.Fatalf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}
