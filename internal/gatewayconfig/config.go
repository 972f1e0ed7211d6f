// Package gatewayconfig is the compiled form of the policies that select one
// gateway: an ordered hook list with a content-hash revision. The controller
// produces it (internal/compile) and pushes it as JSON; the gateway and the
// offline CLI turn it into executor entries with Build. Each entry carries
// the spec of one hook kind as opaque JSON: the kind's own package registers
// how it is read and built (hooks.RegisterKind), and this package knows no
// kind but the AuditLog, the list's own first entry.
// It has no Kubernetes imports.
package gatewayconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
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

// Hook is one entry of the list: its name, kind and policy, and the spec of
// its kind (none for the AuditLog), which only the kind's package reads.
type Hook struct {
	// Name is the hook name callers see in denials ("AutonomyPolicy/ns/name").
	Name string `json:"name"`
	// Kind selects the implementation: KindAuditLog or a registered kind.
	Kind Kind `json:"kind"`
	// Policy is the object the entry was compiled from.
	Policy hooks.PolicyRef `json:"policy,omitzero"`
	// Action is Deny (default) or Warn.
	Action hooks.EnforcementAction `json:"action,omitempty"`
	// RequireDecisionLog makes the entry unenforceable on a gateway that does
	// not write the decision log.
	RequireDecisionLog bool `json:"requireDecisionLog,omitempty"`
	// Spec is the kind's spec, as its package encodes it.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// specKeysOfOldPushes are where controllers before the opaque spec put each
// kind's spec. A push that carries one comes from an older controller: it
// is refused with a message that says so, never read without its spec.
var specKeysOfOldPushes = []string{"autonomy", "contract", "plugin", "result"}

// UnmarshalJSON reads an entry with strictjson (every key spelled as Hook
// names it, at most once; no other key); an entry in the format of an older
// controller is refused as such.
func (h *Hook) UnmarshalJSON(b []byte) error {
	type plain Hook
	err := strictjson.Unmarshal(b, (*plain)(h))
	if err == nil {
		return nil
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) == nil {
		for _, k := range specKeysOfOldPushes {
			if _, old := keys[k]; old {
				return fmt.Errorf("%w: hook entry carries its spec under %q, the format of an older controller; "+
					"upgrade the controller to the gateway's version", ErrOldFormat, k)
			}
		}
	}
	return err
}

// ErrOldFormat marks a configuration in the format of an older controller.
var ErrOldFormat = errors.New("configuration in an older format")

// PushAudience is the audience of the ServiceAccount token the controller
// presents when pushing a configuration; gateways accept no other.
const PushAudience = "toolhooks.dev/gateway-config"

// MarshalSpec encodes a kind's spec for Hook.Spec.
func MarshalSpec(spec hooks.Spec) json.RawMessage {
	b, err := json.Marshal(spec)
	if err != nil { // plain data types: cannot happen
		panic(fmt.Sprintf("marshal spec: %v", err))
	}
	return b
}

// Decode returns h's spec, read by its kind's package.
func (h *Hook) Decode() (hooks.Spec, error) {
	k, ok := hooks.LookupKind(string(h.Kind))
	if !ok {
		return nil, fmt.Errorf("unknown kind %q: %w", h.Kind, hooks.ErrInvalidSpec)
	}
	return k.Decode(h.Spec)
}

// decodeChecked checks what every entry shares and returns its spec (nil
// for the AuditLog).
func (h *Hook) decodeChecked() (hooks.Spec, error) {
	if h.Name == "" {
		return nil, fmt.Errorf("hook has no name: %w", hooks.ErrInvalidSpec)
	}
	switch h.Action {
	case "", hooks.ActionDeny, hooks.ActionWarn:
	default:
		return nil, fmt.Errorf("enforcement action %q (want Deny or Warn): %w", h.Action, hooks.ErrInvalidSpec)
	}
	if h.Kind == KindAuditLog {
		if len(h.Spec) != 0 {
			return nil, fmt.Errorf("the %s hook carries no spec: %w", KindAuditLog, hooks.ErrInvalidSpec)
		}
		return nil, nil
	}
	return h.Decode()
}

func (h *Hook) ref() *hooks.EntryRef { return &hooks.EntryRef{Name: h.Name, Policy: h.Policy} }

// DecidesCalls reports whether c holds a hook that decides on calls before
// they run: a list of the AuditLog and result policies alone decides
// nothing, so that a gateway given only those does not allow every call.
func (c *Config) DecidesCalls() bool {
	for _, h := range c.Hooks {
		if h.Kind == KindAuditLog {
			continue
		}
		if k, ok := hooks.LookupKind(string(h.Kind)); !ok || !k.DecidesNothing {
			return true
		}
	}
	return false
}

// checkList checks that names are unique and that the revision hashes the
// content.
func (c *Config) checkList() error {
	seen := make(map[string]bool, len(c.Hooks))
	for i := range c.Hooks {
		h := &c.Hooks[i]
		if seen[h.Name] {
			return fmt.Errorf("duplicate hook name %q: %w", h.Name, hooks.ErrInvalidSpec)
		}
		seen[h.Name] = true
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

// Live returns c's entries with their decoded specs (none for the AuditLog),
// for the runtimes that keep state across configurations.
func (c *Config) Live() []hooks.LiveEntry {
	out := make([]hooks.LiveEntry, 0, len(c.Hooks))
	for i := range c.Hooks {
		h := &c.Hooks[i]
		if h.Kind == KindAuditLog {
			continue
		}
		if spec, err := h.Decode(); err == nil {
			out = append(out, hooks.LiveEntry{EntryRef: *h.ref(), Spec: spec})
		}
	}
	return out
}

// SpecAs returns h's spec as a T, or the zero T when h holds no valid spec
// of that type.
func SpecAs[T hooks.Spec](h Hook) T {
	var zero T
	if h.Kind == KindAuditLog {
		return zero
	}
	spec, err := h.Decode()
	if err != nil {
		return zero
	}
	t, _ := spec.(T)
	return t
}
