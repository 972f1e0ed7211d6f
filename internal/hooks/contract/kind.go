package contract

import "github.com/toolhooks/toolhooks/internal/hooks"

// KindName is the kind of a ContractPolicy's entries.
const KindName = "ContractPolicy"

func init() {
	hooks.RegisterKind(hooks.Kind{Name: KindName, Decode: hooks.DecodeSpec[Spec]})
}

// Build validates s and builds the entry's hook, its counters kept in the
// *State of env.Runtime (none: counted by this hook alone).
func (s *Spec) Build(e *hooks.EntryRef, env *hooks.BuildEnv) (hooks.Hook, bool, error) {
	if err := Validate(s); err != nil || env.Validate {
		return nil, false, err
	}
	state, _ := hooks.RuntimeOf[*State](env)
	h, err := Build(e.Name, e.StateKey(), s, *env, state)
	return h, false, err
}

// RetainLive forgets, in s, the contract policies live does not hold.
func (s *State) RetainLive(live []hooks.LiveEntry) {
	keep := map[string]*Spec{}
	for _, e := range live {
		if spec, ok := e.Spec.(*Spec); ok {
			keep[e.StateKey()] = spec
		}
	}
	s.Retain(keep)
}
