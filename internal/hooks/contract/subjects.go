package contract

import (
	"fmt"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// Subjects selects calls by session, channel and sender id globs
// (doublestar syntax: `*` stays within a `/`-separated segment, `**` crosses
// segments). An empty list matches any id; a call matches when it matches
// all three lists.
type Subjects struct {
	// Sessions are session id globs.
	Sessions []string `json:"sessions,omitempty"`
	// Channels are channel id globs.
	Channels []string `json:"channels,omitempty"`
	// Senders are sender id globs.
	Senders []string `json:"senders,omitempty"`
}

// Matcher is a validated Subjects. Its zero value matches every call.
type Matcher struct {
	s Subjects
}

// NewMatcher validates every pattern of s and returns a Matcher; an invalid
// pattern yields an error wrapping hooks.ErrInvalidGlob.
func NewMatcher(s Subjects) (*Matcher, error) {
	for _, l := range []struct {
		field string
		globs []string
	}{{"sessions", s.Sessions}, {"channels", s.Channels}, {"senders", s.Senders}} {
		for i, g := range l.globs {
			if g == "" || !doublestar.ValidatePattern(g) {
				return nil, fmt.Errorf("subjects %s[%d] %q: %w", l.field, i, g, hooks.ErrInvalidGlob)
			}
		}
	}
	c := Subjects{
		Sessions: append([]string(nil), s.Sessions...),
		Channels: append([]string(nil), s.Channels...),
		Senders:  append([]string(nil), s.Senders...),
	}
	return &Matcher{s: c}, nil
}

// Matches reports whether call's session, channel and sender all match. A
// nil Matcher matches every call.
func (m *Matcher) Matches(call *hooks.Call) bool {
	if m == nil {
		return true
	}
	return anyGlob(m.s.Sessions, call.SessionID) &&
		anyGlob(m.s.Channels, call.ChannelID) &&
		anyGlob(m.s.Senders, call.SenderID)
}

// anyGlob reports whether id matches one of globs; an empty list matches.
func anyGlob(globs []string, id string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		// Patterns were validated by NewMatcher; an error cannot match.
		if ok, err := doublestar.Match(g, id); ok && err == nil {
			return true
		}
	}
	return false
}
