package plugins

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// MaxTimeout bounds a plugin's before-phase timeout.
const MaxTimeout = 30 * time.Second

// Spec is a PluginHook's compiled spec: what the controller pushes to
// gateways (as JSON) and what a Manager builds a plugin's hook from.
type Spec struct {
	// Before and After are the events the plugin subscribes to.
	Before bool `json:"before,omitempty"`
	After  bool `json:"after,omitempty"`
	// HTTP and Stdio are the transports; exactly one is set.
	HTTP  *HTTPSpec  `json:"http,omitempty"`
	Stdio *StdioSpec `json:"stdio,omitempty"`
	// TimeoutMillis is the before-phase timeout, in (0, MaxTimeout].
	TimeoutMillis int64 `json:"timeoutMillis"`
	// FailOpen is true for failurePolicy Ignore.
	FailOpen bool `json:"failOpen,omitempty"`
	// Tools are doublestar globs of the tools the plugin is called for; none
	// means every tool.
	Tools []string `json:"tools,omitempty"`
}

// HTTPSpec reaches a plugin over HTTP POST at URL.
type HTTPSpec struct {
	URL string `json:"url"`
	// CABundle is the PEM bundle that verifies an https URL's certificate.
	CABundle string `json:"caBundle,omitempty"`
}

// StdioSpec runs a plugin process.
type StdioSpec struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Validate checks s without touching the file system or the network.
// Errors wrap hooks.ErrInvalidGlob or hooks.ErrInvalidSpec.
func Validate(s *Spec) error {
	if !s.Before && !s.After {
		return fmt.Errorf("plugin subscribes to no event: %w", hooks.ErrInvalidSpec)
	}
	if (s.HTTP == nil) == (s.Stdio == nil) {
		return fmt.Errorf("plugin needs exactly one of an http and a stdio transport: %w", hooks.ErrInvalidSpec)
	}
	if s.HTTP != nil {
		u, err := url.Parse(s.HTTP.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("plugin url %q is not an http or https URL: %w", s.HTTP.URL, hooks.ErrInvalidSpec)
		}
	}
	if s.Stdio != nil && s.Stdio.Command == "" {
		return fmt.Errorf("plugin stdio transport has no command: %w", hooks.ErrInvalidSpec)
	}
	if s.TimeoutMillis <= 0 || s.Timeout() > MaxTimeout {
		return fmt.Errorf("plugin timeout %dms must be more than 0 and at most %s: %w", s.TimeoutMillis, MaxTimeout, hooks.ErrInvalidSpec)
	}
	for _, g := range s.Tools {
		if !doublestar.ValidatePattern(g) {
			return fmt.Errorf("plugin tools pattern %q: %w", g, hooks.ErrInvalidGlob)
		}
	}
	return nil
}

// Subscribed reports whether the plugin's before-hook is called for tool: it
// subscribes to tool:before and tool matches one of its Tools globs (or it has none).
func (s *Spec) Subscribed(tool string) bool {
	return s.Before && s.MatchesTool(tool)
}

// MatchesTool reports whether the plugin's tools globs let tool through
// (no globs: every tool).
func (s *Spec) MatchesTool(tool string) bool {
	if len(s.Tools) == 0 {
		return true
	}
	for _, g := range s.Tools {
		if ok, err := doublestar.Match(g, tool); err == nil && ok {
			return true
		}
	}
	return false
}

// Timeout returns the plugin's before-phase timeout.
func (s *Spec) Timeout() time.Duration { return time.Duration(s.TimeoutMillis) * time.Millisecond }

// Ref is one PluginHook entry of a configuration.
type Ref struct {
	// Name is the entry's hook name.
	Name string
	// Policy is the PluginHook object the entry was compiled from.
	Policy hooks.PolicyRef
	// Spec is the entry's spec.
	Spec *Spec
}

// ErrRuntimeUnavailable is what the hook of Unavailable returns for the calls
// its plugin subscribes to: there is no plugin runtime here (the offline CLI,
// or a gateway built without one), so the entry's failure policy decides.
var ErrRuntimeUnavailable = errors.New("no plugin runtime is available here to call the plugin")

// Unavailable returns the hook of a PluginHook entry where no plugin can be
// called: it fails the before-calls the plugin subscribed to, so its failure
// policy applies to exactly those; other calls never reach a plugin.
func Unavailable(r Ref) hooks.Hook { return unavailable{name: r.Name, policy: r.Policy, spec: r.Spec} }

type unavailable struct {
	name   string
	policy hooks.PolicyRef
	spec   *Spec
}

var _ hooks.OfflineNoter = unavailable{}

// OfflineNote says which calls a plugin that fails open lets through
// uncalled; a Fail plugin's denials explain themselves.
func (p unavailable) OfflineNote() string {
	if !p.spec.Before || !p.spec.FailOpen {
		return ""
	}
	tools := "every tool"
	if len(p.spec.Tools) > 0 {
		tools = strings.Join(p.spec.Tools, ", ")
	}
	return fmt.Sprintf("%s %s/%s is not called offline; its failurePolicy Ignore allows the calls to %s",
		p.policy.Kind, p.policy.Namespace, p.policy.Name, tools)
}

func (p unavailable) Name() string { return p.name }

func (p unavailable) Before(_ context.Context, call *hooks.Call) (hooks.Verdict, error) {
	if !p.spec.Subscribed(call.Tool) {
		return hooks.Allow, nil
	}
	return hooks.Verdict{}, ErrRuntimeUnavailable
}

func (unavailable) After(context.Context, *hooks.Call, *hooks.Result) {}

// ToolNames returns the exact tool names (not globs) of the spec's tool filter.
func (s *Spec) ToolNames() []string { return hooks.ExactToolNames(s.Tools) }

// ToolNames returns the exact tool names of the plugin's tool filter.
func (p unavailable) ToolNames() []string { return p.spec.ToolNames() }

// ToolNames returns the exact tool names of the plugin's tool filter.
func (h *pluginHook) ToolNames() []string { return h.spec.ToolNames() }
