package resultscan

import "github.com/toolhooks/toolhooks/internal/hooks"

// KindName is the kind of a ResultPolicy's entries.
const KindName = "ResultPolicy"

func init() {
	hooks.RegisterKind(hooks.Kind{Name: KindName, Decode: hooks.DecodeSpec[Spec], DecidesNothing: true})
}

// Build builds the entry's result filter; building is its validation.
func (s *Spec) Build(e *hooks.EntryRef, _ *hooks.BuildEnv) (hooks.Hook, bool, error) {
	h, err := Build(e.Name, s)
	if err != nil {
		return nil, false, err
	}
	return h, false, nil
}
