package contract

import (
	"errors"
	"fmt"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// ErrInvalidGlob is wrapped by the error of a subject pattern that is not a
// valid doublestar glob.
var ErrInvalidGlob = errors.New("invalid glob")

// Resolver decides which contract governs a call. Implementations must be
// safe for concurrent use and must not retain call.
type Resolver interface {
	// ContractFor returns the contract for call, or false when none applies.
	ContractFor(call *hooks.Call) (*Contract, bool)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(call *hooks.Call) (*Contract, bool)

// ContractFor calls f.
func (f ResolverFunc) ContractFor(call *hooks.Call) (*Contract, bool) { return f(call) }

// Subjects selects calls by session, channel and sender id globs
// (doublestar syntax: `*` stays within a `/`-separated segment, `**` crosses
// segments). An empty list matches any id; a call matches when it matches
// all three lists.
type Subjects struct {
	// Sessions are session id globs.
	Sessions []string
	// Channels are channel id globs.
	Channels []string
	// Senders are sender id globs.
	Senders []string
}

// Matcher is a validated Subjects. Its zero value matches every call.
type Matcher struct {
	s Subjects
}

// NewMatcher validates every pattern of s and returns a Matcher; an invalid
// pattern yields an error wrapping ErrInvalidGlob.
func NewMatcher(s Subjects) (*Matcher, error) {
	for _, l := range []struct {
		field string
		globs []string
	}{{"sessions", s.Sessions}, {"channels", s.Channels}, {"senders", s.Senders}} {
		for i, g := range l.globs {
			if g == "" || !doublestar.ValidatePattern(g) {
				return nil, fmt.Errorf("subjects %s[%d] %q: %w", l.field, i, g, ErrInvalidGlob)
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

// Binding binds a contract to the calls its subjects match.
type Binding struct {
	// Subjects selects the calls; nil selects every call.
	Subjects *Matcher
	// Contract governs the selected calls.
	Contract *Contract
}

// StaticResolver resolves a call to the contract of the first binding whose
// subjects match it. It is immutable and safe for concurrent use.
type StaticResolver struct {
	bindings []Binding
}

var _ Resolver = (*StaticResolver)(nil)

// NewStaticResolver validates every contract and returns a resolver that
// tries bindings in order.
func NewStaticResolver(bindings ...Binding) (*StaticResolver, error) {
	for i, b := range bindings {
		if err := b.Contract.Validate(); err != nil {
			return nil, fmt.Errorf("bindings[%d]: %w", i, err)
		}
	}
	return &StaticResolver{bindings: append([]Binding(nil), bindings...)}, nil
}

// ContractFor returns the contract of the first binding matching call.
func (r *StaticResolver) ContractFor(call *hooks.Call) (*Contract, bool) {
	for i := range r.bindings {
		if r.bindings[i].Subjects.Matches(call) {
			return r.bindings[i].Contract, true
		}
	}
	return nil, false
}
