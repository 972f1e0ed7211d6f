package autonomy

import "github.com/toolhooks/toolhooks/internal/hooks"

// KindName is the kind of an AutonomyPolicy's entries.
const KindName = "AutonomyPolicy"

func init() {
	hooks.RegisterKind(hooks.Kind{Name: KindName, Decode: hooks.DecodeSpec[Config]})
}

// Build builds the entry's hook (see the package Build); validating, it
// checks the rules without touching the file system (Validate).
func (c *Config) Build(e *hooks.EntryRef, env *hooks.BuildEnv) (hooks.Hook, bool, error) {
	if env.Validate {
		return nil, false, Validate(*c)
	}
	h, err := Build(e.Name, *c, *env)
	if err != nil {
		return nil, false, err
	}
	return h, false, nil
}
