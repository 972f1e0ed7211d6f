package hooks

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// Kind is one hook kind as its own package registers it (with RegisterKind):
// the name a pushed entry carries, how its spec is read, and how it is built.
// A configuration holds each entry's spec as opaque JSON; only the kind's
// package knows its shape.
type Kind struct {
	// Name is the kind's name, the API kind of the policies compiled into it.
	Name string
	// Decode reads a spec of the kind, rejecting unknown fields.
	Decode func(spec json.RawMessage) (Spec, error)
	// DecidesNothing marks a kind that never decides on a call before it
	// runs (the AuditLog, result policies): a list of such entries alone
	// decides nothing.
	DecidesNothing bool
}

// Spec is a decoded spec of one hook kind.
type Spec interface {
	// Build returns the hook of the entry e describes. With env.Validate
	// set it touches no file system and no runtime: what it checks is the
	// spec's validation. Errors wrap ErrInvalidGlob, ErrInvalidPath or
	// ErrInvalidSpec; failOpen says whether the hook's failures let calls through.
	Build(e *EntryRef, env *BuildEnv) (hk Hook, failOpen bool, err error)
}

// EntryRef is what a kind's Build is told of the entry it builds.
type EntryRef struct {
	// Name is the hook name callers see in denials.
	Name string
	// Policy is the object the entry was compiled from.
	Policy PolicyRef
}

// StateKey identifies the entry's policy across configurations: its uid, or
// its name when it has none (a file-loaded policy).
func (e *EntryRef) StateKey() string {
	if e.Policy.UID != "" {
		return e.Policy.UID
	}
	return e.Name
}

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{}
)

// RegisterKind registers a hook kind; its package calls it once, from init.
// A second kind of the same name panics.
func RegisterKind(k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[k.Name]; dup || k.Name == "" || k.Decode == nil {
		panic(fmt.Sprintf("hooks: kind %q registered twice or incomplete", k.Name))
	}
	kinds[k.Name] = k
}

// LookupKind returns the registered kind named name, or false.
func LookupKind(name string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// KindNames returns the registered kinds' names, sorted.
func KindNames() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]string, 0, len(kinds))
	for n := range kinds {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// DecodeSpec decodes a spec of type T with strictjson (every key spelled as
// T names it, at most once; no other key; nothing after the value); kinds'
// Decode functions use it. An absent spec is an empty T.
func DecodeSpec[T any, P interface {
	*T
	Spec
}](raw json.RawMessage) (Spec, error) {
	p := P(new(T))
	if len(raw) == 0 {
		return p, nil
	}
	if err := strictjson.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("spec: %w: %w", ErrInvalidSpec, err)
	}
	return p, nil
}

// RuntimeOf returns the first value of env.Runtime of type T: what a kind
// needs of the process that builds it (the contract state, the plugin
// runtime). False when there is none (validating, offline).
func RuntimeOf[T any](env *BuildEnv) (T, bool) {
	for _, r := range env.Runtime {
		if t, ok := r.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// LiveEntry is one entry of a configuration in force with its decoded spec,
// as the runtimes that keep state across configurations see it.
type LiveEntry struct {
	EntryRef
	Spec Spec
}

// OfflineNoter is a hook that stands in for a runtime this process does not
// have (a plugin, offline): OfflineNote says what that leaves undecided, or
// nothing.
type OfflineNoter interface {
	OfflineNote() string
}
