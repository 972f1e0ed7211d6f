package plugins

import "github.com/toolhooks/toolhooks/internal/hooks"

// KindName is the kind of a PluginHook's entries.
const KindName = "PluginHook"

func init() {
	hooks.RegisterKind(hooks.Kind{Name: KindName, Decode: hooks.DecodeSpec[Spec]})
}

// Factory builds the runtime hook of a PluginHook entry. A gateway puts its
// plugin host's in the build's Runtime; without one, every plugin fails, so
// its failure policy applies.
type Factory func(r Ref) (hooks.Hook, error)

// Build validates s and builds the entry's hook with the Factory of
// env.Runtime, or Unavailable without one.
func (s *Spec) Build(e *hooks.EntryRef, env *hooks.BuildEnv) (hooks.Hook, bool, error) {
	if err := Validate(s); err != nil || env.Validate {
		return nil, false, err
	}
	ref := Ref{Name: e.Name, Policy: e.Policy, Spec: s}
	f, ok := hooks.RuntimeOf[Factory](env)
	if !ok || f == nil {
		return Unavailable(ref), s.FailOpen, nil
	}
	h, err := f(ref)
	return h, s.FailOpen, err
}

// Refs returns the PluginHook entries of live.
func Refs(live []hooks.LiveEntry) []Ref {
	var out []Ref
	for _, e := range live {
		if s, ok := e.Spec.(*Spec); ok {
			out = append(out, Ref{Name: e.Name, Policy: e.Policy, Spec: s})
		}
	}
	return out
}
