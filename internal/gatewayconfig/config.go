// Package gatewayconfig is the compiled form of the policies that select one
// gateway: an ordered hook list with a content-hash revision. The controller
// produces it (internal/compile), pushes it as JSON, and the gateway and the
// offline CLI turn it into executor entries with Build. It has no Kubernetes
// imports.
package gatewayconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
)

// Kind says which hook implementation an entry configures.
type Kind string

// Hook kinds, in the order the compiler places them.
const (
	KindAuditLog       Kind = "AuditLog"
	KindAutonomyPolicy Kind = "AutonomyPolicy"
	KindContractPolicy Kind = "ContractPolicy"
	KindPluginHook     Kind = "PluginHook"
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

// Hook is one entry of the list. Exactly one of Autonomy, Contract and Plugin
// is set, matching Kind (none for AuditLog).
type Hook struct {
	// Name is the hook name callers see in denials ("AutonomyPolicy/ns/name").
	Name string `json:"name"`
	// Kind selects the implementation.
	Kind Kind `json:"kind"`
	// Policy is the object the entry was compiled from.
	Policy hooks.PolicyRef `json:"policy,omitzero"`
	// Action is Deny (default) or Warn.
	Action hooks.EnforcementAction `json:"action,omitempty"`
	// Autonomy configures an AutonomyPolicy entry.
	Autonomy *Autonomy `json:"autonomy,omitempty"`
	// Contract configures a ContractPolicy entry.
	Contract *Contract `json:"contract,omitempty"`
	// Plugin configures a PluginHook entry.
	Plugin *Plugin `json:"plugin,omitempty"`
}

// Autonomy is an AutonomyPolicy's compiled spec.
type Autonomy struct {
	Mode                 string              `json:"mode,omitempty"`
	WorkspaceRoot        string              `json:"workspaceRoot,omitempty"`
	WorkspaceOnly        bool                `json:"workspaceOnly,omitempty"`
	ForbiddenPathGlobs   []string            `json:"forbiddenPathGlobs,omitempty"`
	AllowShell           bool                `json:"allowShell,omitempty"`
	AllowedShellCommands []string            `json:"allowedShellCommands,omitempty"`
	ShellDialects        []string            `json:"shellDialects,omitempty"`
	ToolAllow            []string            `json:"toolAllow,omitempty"`
	ToolDeny             []string            `json:"toolDeny,omitempty"`
	ReadOnlyTools        []string            `json:"readOnlyTools,omitempty"`
	PathArgs             map[string][]string `json:"pathArgs,omitempty"`
}

// Subjects selects the calls a contract binds by glob; empty lists match all.
type Subjects struct {
	Sessions []string `json:"sessions,omitempty"`
	Channels []string `json:"channels,omitempty"`
	Senders  []string `json:"senders,omitempty"`
}

// Capability grants a tool, optionally under path prefixes.
type Capability struct {
	Tool         string   `json:"tool"`
	AllowedPaths []string `json:"allowedPaths,omitempty"`
}

// RateLimit limits calls per sender and tool over any 60-second window.
type RateLimit struct {
	Tools              string `json:"tools"`
	PerSenderPerMinute int    `json:"perSenderPerMinute"`
}

// Contract is a ContractPolicy's compiled spec.
type Contract struct {
	Subjects           Subjects     `json:"subjects,omitzero"`
	MaxToolCalls       int          `json:"maxToolCalls,omitempty"`
	PerSender          *SenderLimit `json:"maxToolCallsPerSender,omitempty"`
	ScopedCapabilities []Capability `json:"scopedCapabilities,omitempty"`
	AllowedPaths       []string     `json:"allowedPaths,omitempty"`
	RateLimits         []RateLimit  `json:"rateLimits,omitempty"`
}

// SenderLimit bounds one caller's calls over a sliding window.
type SenderLimit struct {
	Calls        int   `json:"calls"`
	WindowMillis int64 `json:"windowMillis"`
}

// Plugin is a PluginHook's compiled spec. Its runtime lives in the gateway.
type Plugin struct {
	Before        bool         `json:"before,omitempty"`
	After         bool         `json:"after,omitempty"`
	HTTP          *PluginHTTP  `json:"http,omitempty"`
	Stdio         *PluginStdio `json:"stdio,omitempty"`
	TimeoutMillis int64        `json:"timeoutMillis"`
	// FailOpen is true for failurePolicy Ignore.
	FailOpen bool     `json:"failOpen,omitempty"`
	Tools    []string `json:"tools,omitempty"`
}

// PluginHTTP reaches a plugin over HTTP POST at URL.
type PluginHTTP struct {
	URL      string `json:"url"`
	CABundle string `json:"caBundle,omitempty"`
}

// PluginStdio runs a plugin process.
type PluginStdio struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// PushAudience is the audience of the ServiceAccount token the controller
// presents when pushing a configuration; gateways accept no other.
const PushAudience = "toolhooks.dev/gateway-config"

// MaxPluginTimeout bounds a plugin's before-phase timeout.
const MaxPluginTimeout = 30 * time.Second

// Validation error classes, for status reasons.
var (
	// ErrInvalidGlob marks a glob that does not parse.
	ErrInvalidGlob = errors.New("invalid glob")
	// ErrInvalidPath marks an unusable path.
	ErrInvalidPath = errors.New("invalid path")
	// ErrInvalidSpec marks any other invalid setting.
	ErrInvalidSpec = errors.New("invalid spec")
)

// Validate checks one entry with the executor's own validation, without
// touching the file system (the workspace exists on the gateway, not here).
// Errors wrap ErrInvalidGlob, ErrInvalidPath or ErrInvalidSpec.
func (h Hook) Validate() error {
	if h.Name == "" {
		return fmt.Errorf("hook has no name: %w", ErrInvalidSpec)
	}
	switch h.Action {
	case "", hooks.ActionDeny, hooks.ActionWarn:
	default:
		return fmt.Errorf("enforcement action %q (want Deny or Warn): %w", h.Action, ErrInvalidSpec)
	}
	set := 0
	for _, b := range []bool{h.Autonomy != nil, h.Contract != nil, h.Plugin != nil} {
		if b {
			set++
		}
	}
	want := 1
	if h.Kind == KindAuditLog {
		want = 0
	}
	if set != want {
		return fmt.Errorf("hook %s of kind %s must carry exactly %d spec: %w", h.Name, h.Kind, want, ErrInvalidSpec)
	}
	switch h.Kind {
	case KindAuditLog:
		return nil
	case KindAutonomyPolicy:
		if h.Autonomy == nil {
			break
		}
		return classify(autonomy.Validate(h.Autonomy.config(h.Name)))
	case KindContractPolicy:
		if h.Contract == nil {
			break
		}
		return h.Contract.validate()
	case KindPluginHook:
		if h.Plugin == nil {
			break
		}
		return h.Plugin.validate()
	}
	return fmt.Errorf("hook %s: unknown kind %q: %w", h.Name, h.Kind, ErrInvalidSpec)
}

// Validate checks every entry and that names are unique.
func (c *Config) Validate() error {
	seen := make(map[string]bool, len(c.Hooks))
	for _, h := range c.Hooks {
		if seen[h.Name] {
			return fmt.Errorf("duplicate hook name %q: %w", h.Name, ErrInvalidSpec)
		}
		seen[h.Name] = true
		if err := h.Validate(); err != nil {
			return fmt.Errorf("hook %s: %w", h.Name, err)
		}
	}
	if c.Revision != "" && c.Revision != ComputeRevision(c.Hooks) {
		return fmt.Errorf("revision %q does not match the hooks' content: %w", c.Revision, ErrInvalidSpec)
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

func (a *Autonomy) config(name string) autonomy.Config {
	return autonomy.Config{
		Name:                 name,
		Mode:                 a.Mode,
		WorkspaceRoot:        a.WorkspaceRoot,
		WorkspaceOnly:        a.WorkspaceOnly,
		ForbiddenPathGlobs:   a.ForbiddenPathGlobs,
		AllowShell:           a.AllowShell,
		AllowedShellCommands: a.AllowedShellCommands,
		ShellDialects:        a.ShellDialects,
		ToolAllow:            a.ToolAllow,
		ToolDeny:             a.ToolDeny,
		ReadOnlyTools:        a.ReadOnlyTools,
		PathArgs:             a.PathArgs,
	}
}

func (c *Contract) contract() *contract.Contract {
	caps := make([]contract.Capability, len(c.ScopedCapabilities))
	for i, cp := range c.ScopedCapabilities {
		caps[i] = contract.Capability{Tool: cp.Tool, AllowedPaths: cp.AllowedPaths}
	}
	out := &contract.Contract{MaxToolCalls: c.MaxToolCalls, ScopedCapabilities: caps, AllowedPaths: c.AllowedPaths}
	if c.PerSender != nil {
		out.PerSenderCalls, out.PerSenderWindow = c.PerSender.Calls, time.Duration(c.PerSender.WindowMillis)*time.Millisecond
	}
	return out
}

func (c *Contract) rules() []ratelimit.Rule {
	rules := make([]ratelimit.Rule, len(c.RateLimits))
	for i, r := range c.RateLimits {
		rules[i] = ratelimit.Rule{Tools: r.Tools, PerSenderPerMinute: r.PerSenderPerMinute}
	}
	return rules
}

func (c *Contract) validate() error {
	if _, err := contract.NewMatcher(contract.Subjects(c.Subjects)); err != nil {
		return classify(err)
	}
	if err := c.contract().Validate(); err != nil {
		return classify(err)
	}
	for _, r := range c.rules() {
		if err := r.Validate(); err != nil {
			return classify(err)
		}
	}
	return nil
}

func (p *Plugin) validate() error {
	if !p.Before && !p.After {
		return fmt.Errorf("plugin subscribes to no event: %w", ErrInvalidSpec)
	}
	if (p.HTTP == nil) == (p.Stdio == nil) {
		return fmt.Errorf("plugin needs exactly one of an http and a stdio transport: %w", ErrInvalidSpec)
	}
	if p.HTTP != nil {
		u, err := url.Parse(p.HTTP.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("plugin url %q is not an http or https URL: %w", p.HTTP.URL, ErrInvalidSpec)
		}
	}
	if p.Stdio != nil && p.Stdio.Command == "" {
		return fmt.Errorf("plugin stdio transport has no command: %w", ErrInvalidSpec)
	}
	if p.TimeoutMillis <= 0 || time.Duration(p.TimeoutMillis)*time.Millisecond > MaxPluginTimeout {
		return fmt.Errorf("plugin timeout %dms must be more than 0 and at most %s: %w", p.TimeoutMillis, MaxPluginTimeout, ErrInvalidSpec)
	}
	for _, g := range p.Tools {
		if !doublestar.ValidatePattern(g) {
			return fmt.Errorf("plugin tools pattern %q: %w", g, ErrInvalidGlob)
		}
	}
	return nil
}

// classify maps the executor packages' sentinel errors onto this package's classes,
// keeping the executor's message.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, autonomy.ErrInvalidGlob), errors.Is(err, contract.ErrInvalidGlob), errors.Is(err, doublestar.ErrBadPattern):
		return fmt.Errorf("%w: %w", ErrInvalidGlob, err)
	case errors.Is(err, autonomy.ErrInvalidPath), errors.Is(err, contract.ErrInvalidPath):
		return fmt.Errorf("%w: %w", ErrInvalidPath, err)
	default:
		return fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
}
