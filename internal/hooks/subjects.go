package hooks

import (
	"fmt"
	"slices"

	"github.com/bmatcuk/doublestar/v4"
)

// The kinds of a CallerSubject, as RBAC names the subjects of a binding.
const (
	// CallerServiceAccount names a Kubernetes ServiceAccount by namespace and name.
	CallerServiceAccount = "ServiceAccount"
	// CallerUser names a verified username exactly.
	CallerUser = "User"
	// CallerGroup names one of a verified caller's groups exactly.
	CallerGroup = "Group"
)

// Subjects selects the calls a policy binds. Sessions, channels and senders
// are globs on the call's ids (doublestar syntax: `*` stays within a
// `/`-separated segment, `**` crosses segments); callers name verified
// identities exactly. An empty list matches every call; a call is bound when
// every non-empty list matches it (callers: any one entry).
type Subjects struct {
	// Sessions are session id globs.
	Sessions []string `json:"sessions,omitempty"`
	// Channels are channel id globs.
	Channels []string `json:"channels,omitempty"`
	// Senders are sender id (verified username) globs.
	Senders []string `json:"senders,omitempty"`
	// Callers are verified identities, any one of which binds a call.
	Callers []CallerSubject `json:"callers,omitempty"`
}

// CallerSubject names a verified caller as an RBAC binding's subject does.
type CallerSubject struct {
	// Kind is CallerServiceAccount, CallerUser or CallerGroup.
	Kind string `json:"kind"`
	// Name is the ServiceAccount's name, the username or the group.
	Name string `json:"name"`
	// Namespace is the ServiceAccount's namespace (required for that kind,
	// empty for the others).
	Namespace string `json:"namespace,omitempty"`
}

// IsZero reports whether s selects every call.
func (s Subjects) IsZero() bool {
	return len(s.Sessions) == 0 && len(s.Channels) == 0 && len(s.Senders) == 0 && len(s.Callers) == 0
}

// SubjectMatcher is a validated Subjects. A nil *SubjectMatcher matches
// every call.
type SubjectMatcher struct {
	s Subjects
}

// NewSubjectMatcher validates s and returns its matcher; nil when s selects
// every call. An invalid glob yields an error wrapping ErrInvalidGlob, an
// invalid caller one wrapping ErrInvalidSpec.
func NewSubjectMatcher(s Subjects) (*SubjectMatcher, error) {
	if err := ValidateSubjects(s); err != nil {
		return nil, err
	}
	if s.IsZero() {
		return nil, nil
	}
	return &SubjectMatcher{s: Subjects{
		Sessions: slices.Clone(s.Sessions),
		Channels: slices.Clone(s.Channels),
		Senders:  slices.Clone(s.Senders),
		Callers:  slices.Clone(s.Callers),
	}}, nil
}

// ValidateSubjects checks every glob and caller of s.
func ValidateSubjects(s Subjects) error {
	for _, l := range []struct {
		field string
		globs []string
	}{{"sessions", s.Sessions}, {"channels", s.Channels}, {"senders", s.Senders}} {
		for i, g := range l.globs {
			if g == "" || !doublestar.ValidatePattern(g) {
				return fmt.Errorf("subjects %s[%d] %q: %w", l.field, i, g, ErrInvalidGlob)
			}
		}
	}
	for i, c := range s.Callers {
		if err := c.validate(); err != nil {
			return fmt.Errorf("subjects callers[%d]: %w", i, err)
		}
	}
	return nil
}

func (c CallerSubject) validate() error {
	if c.Name == "" {
		return fmt.Errorf("%s without a name: %w", c.Kind, ErrInvalidSpec)
	}
	switch c.Kind {
	case CallerServiceAccount:
		if c.Namespace == "" {
			return fmt.Errorf("ServiceAccount %q without a namespace: %w", c.Name, ErrInvalidSpec)
		}
	case CallerUser, CallerGroup:
		if c.Namespace != "" {
			return fmt.Errorf("%s %q with a namespace (only a ServiceAccount has one): %w", c.Kind, c.Name, ErrInvalidSpec)
		}
	default:
		return fmt.Errorf("kind %q (want ServiceAccount, User or Group): %w", c.Kind, ErrInvalidSpec)
	}
	return nil
}

// Matches reports whether m binds call: its session, channel and sender ids
// match their globs and, when callers are named, its verified caller is one
// of them. A call without a verified caller matches no caller.
func (m *SubjectMatcher) Matches(call *Call) bool {
	if m == nil {
		return true
	}
	return anyGlob(m.s.Sessions, call.SessionID) &&
		anyGlob(m.s.Channels, call.ChannelID) &&
		anyGlob(m.s.Senders, call.SenderID) &&
		m.matchesCaller(call.Caller)
}

func (m *SubjectMatcher) matchesCaller(id *Identity) bool {
	if len(m.s.Callers) == 0 {
		return true
	}
	if id == nil {
		return false
	}
	for _, c := range m.s.Callers {
		if c.matches(id) {
			return true
		}
	}
	return false
}

func (c CallerSubject) matches(id *Identity) bool {
	switch c.Kind {
	case CallerServiceAccount:
		ns, name, ok := id.ServiceAccount()
		return ok && ns == c.Namespace && name == c.Name
	case CallerUser:
		return id.Username == c.Name
	case CallerGroup:
		return slices.Contains(id.Groups, c.Name)
	}
	return false
}

// anyGlob reports whether id matches one of globs; an empty list matches.
func anyGlob(globs []string, id string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		// Patterns were validated by NewSubjectMatcher; an error cannot match.
		if ok, err := doublestar.Match(g, id); ok && err == nil {
			return true
		}
	}
	return false
}
