// Package gatewayconfig is the compiled form of the policies that select one
// gateway: an ordered hook list with a content-hash revision. The controller
// produces it (internal/compile) and pushes it as JSON; the gateway and the
// offline CLI turn it into executor entries with Build. Each entry carries
// the spec of one hook kind, declared, validated and built by that kind's own
// package; this package holds the list, its revision and the table of kinds.
// It has no Kubernetes imports.
package gatewayconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
	"github.com/toolhooks/toolhooks/internal/plugins"
)

// Config is one gateway's ordered hook list.
type Config struct {
	// Revision is the content hash of Hooks (see ComputeRevision).
	Revision string `json:"revision"`
	// Hooks run in order: AuditLog first, then policies.
	Hooks []Hook `json:"hooks"`
	// IssuedAt is when the pusher issued this configuration, in Unix
	// nanoseconds. It is not part of the revision: a gateway rejects a push
	// issued before the one in force, so a replayed old push cannot roll it back.
	IssuedAt int64 `json:"issuedAt,omitempty"`
}

// Hook is one entry of the list. It carries the spec of its Kind and no
// other (none for AuditLog).
type Hook struct {
	// Name is the hook name callers see in denials ("AutonomyPolicy/ns/name").
	Name string `json:"name"`
	// Kind selects the implementation.
	Kind Kind `json:"kind"`
	// Policy is the object the entry was compiled from.
	Policy hooks.PolicyRef `json:"policy,omitzero"`
	// Action is Deny (default) or Warn.
	Action hooks.EnforcementAction `json:"action,omitempty"`
	// RequireDecisionLog makes the entry unenforceable on a gateway that does
	// not write the decision log.
	RequireDecisionLog bool `json:"requireDecisionLog,omitempty"`
	// Autonomy is an AutonomyPolicy entry's spec.
	Autonomy *autonomy.Config `json:"autonomy,omitempty"`
	// Contract is a ContractPolicy entry's spec.
	Contract *contract.Spec `json:"contract,omitempty"`
	// Plugin is a PluginHook entry's spec.
	Plugin *plugins.Spec `json:"plugin,omitempty"`
	// Result is a ResultPolicy entry's spec.
	Result *resultscan.Spec `json:"result,omitempty"`
}

// PushAudience is the audience of the ServiceAccount token the controller
// presents when pushing a configuration; gateways accept no other.
const PushAudience = "toolhooks.dev/gateway-config"

// Validate checks one entry with its kind's own validation, without touching
// the file system (the workspace exists on the gateway, not here). Errors
// wrap hooks.ErrInvalidGlob, hooks.ErrInvalidPath or hooks.ErrInvalidSpec.
func (h *Hook) Validate() error {
	if h.Name == "" {
		return fmt.Errorf("hook has no name: %w", hooks.ErrInvalidSpec)
	}
	switch h.Action {
	case "", hooks.ActionDeny, hooks.ActionWarn:
	default:
		return fmt.Errorf("enforcement action %q (want Deny or Warn): %w", h.Action, hooks.ErrInvalidSpec)
	}
	k, ok := kinds[h.Kind]
	if !ok {
		return fmt.Errorf("hook %s: unknown kind %q: %w", h.Name, h.Kind, hooks.ErrInvalidSpec)
	}
	set := 0
	for _, other := range kinds {
		if other.hasSpec != nil && other.hasSpec(h) {
			set++
		}
	}
	want := 1
	if k.hasSpec == nil {
		want = 0
	}
	if set != want || (want == 1 && !k.hasSpec(h)) {
		return fmt.Errorf("hook %s of kind %s must carry exactly %d spec, of its kind: %w", h.Name, h.Kind, want, hooks.ErrInvalidSpec)
	}
	if k.validate == nil {
		return nil
	}
	return k.validate(h)
}

// DecidesCalls reports whether c holds a hook that decides on calls before
// they run: a list of the AuditLog and result policies alone decides
// nothing, so that a gateway given only those does not allow every call.
func (c *Config) DecidesCalls() bool {
	for _, h := range c.Hooks {
		if k, ok := kinds[h.Kind]; !ok || !k.decidesNothing {
			return true
		}
	}
	return false
}

// Validate checks every entry and that names are unique.
func (c *Config) Validate() error {
	seen := make(map[string]bool, len(c.Hooks))
	for i := range c.Hooks {
		h := &c.Hooks[i]
		if seen[h.Name] {
			return fmt.Errorf("duplicate hook name %q: %w", h.Name, hooks.ErrInvalidSpec)
		}
		seen[h.Name] = true
		if err := h.Validate(); err != nil {
			return fmt.Errorf("hook %s: %w", h.Name, err)
		}
	}
	if c.Revision != "" && c.Revision != ComputeRevision(c.Hooks) {
		return fmt.Errorf("revision %q does not match the hooks' content: %w", c.Revision, hooks.ErrInvalidSpec)
	}
	return nil
}

// ComputeRevision is the content hash of an ordered hook list: the same list
// gives the same revision, any change a new one.
func ComputeRevision(list []Hook) string {
	b, err := json.Marshal(list)
	if err != nil { // plain data types: cannot happen
		panic(fmt.Sprintf("marshal hook list: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// Plugins returns the configuration's PluginHook entries.
func (c *Config) Plugins() []plugins.Ref {
	var out []plugins.Ref
	for _, h := range c.Hooks {
		if h.Plugin != nil {
			out = append(out, plugins.Ref{Name: h.Name, Policy: h.Policy, Spec: h.Plugin})
		}
	}
	return out
}

// contracts returns the configuration's ContractPolicy specs by state key.
func (c *Config) contracts() map[string]*contract.Spec {
	out := map[string]*contract.Spec{}
	for _, h := range c.Hooks {
		if h.Contract != nil {
			out[h.stateKey()] = h.Contract
		}
	}
	return out
}

// stateKey identifies the entry's policy across configurations: its uid, or
// its name when it has none (a file-loaded policy).
func (h *Hook) stateKey() string {
	if h.Policy.UID != "" {
		return h.Policy.UID
	}
	return h.Name
}
