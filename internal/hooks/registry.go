package hooks

import (
	"fmt"
	"sync"
)

// Registry collects native hooks: Go hooks that a custom gateway build
// registers in code. They run after the built-in and policy hooks, in
// registration order. A Registry is injected where it is needed (there is no
// global one), so tests and builds never share state. The zero value is an
// empty registry ready to use; it is safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	entries []Entry
	names   map[string]struct{}
}

// Register appends h as a denying, fail-closed native hook.
func (r *Registry) Register(h Hook) error {
	return r.RegisterEntry(Entry{Hook: h})
}

// RegisterEntry appends a native hook with its configuration (for example
// ActionWarn to run it in dry-run mode). It rejects a nil hook, an empty or
// already registered name (a denial names its hook, so names must be
// unambiguous) and an unknown action.
func (r *Registry) RegisterEntry(e Entry) error {
	if err := e.validate(); err != nil {
		return fmt.Errorf("registering native hook: %w", err)
	}
	name := e.Hook.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.names[name]; dup {
		return fmt.Errorf("registering native hook: hook %q is already registered", name)
	}
	if r.names == nil {
		r.names = map[string]struct{}{}
	}
	r.names[name] = struct{}{}
	r.entries = append(r.entries, e)
	return nil
}

// Entries returns a copy of the registered hooks in registration order, to
// append after the built-in hooks when building an Executor.
func (r *Registry) Entries() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.entries...)
}
