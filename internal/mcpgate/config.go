package mcpgate

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the upstream MCP servers file (--mcp-upstreams), strict YAML:
//
//	upstreams:
//	- name: fs                      # tools are exposed as fs_<tool>
//	  stdio:                        # or http: {url: https://..., headers: {...}}
//	    command: node
//	    args: [/srv/fs/index.js, /workspace]
//	    env: {KEY: value}           # added to PATH, HOME, TMPDIR, LANG
//	    dir: /workspace
//	  connectTimeout: 30s           # default 30s
//	  tools:                        # optional, keyed by the upstream's tool name
//	    read_text_file: {readOnly: true}
//	    search_files: {readOnly: true, pathArgs: [root]}
type Config struct {
	Upstreams []UpstreamConfig `json:"upstreams"`
}

// UpstreamConfig is one upstream MCP server. Exactly one of Stdio and HTTP is set.
type UpstreamConfig struct {
	// Name prefixes the upstream's tools (<name>_<tool>): lower-case letters,
	// digits and "-", starting with a letter, at most 32 characters.
	Name string `json:"name"`
	// Stdio runs the server as a child process speaking MCP on stdin/stdout.
	Stdio *StdioConfig `json:"stdio,omitempty"`
	// HTTP reaches the server over streamable HTTP.
	HTTP *HTTPConfig `json:"http,omitempty"`
	// ConnectTimeout bounds connecting and listing the tools (default 30s).
	ConnectTimeout string `json:"connectTimeout,omitempty"`
	// Tools declare, per upstream tool name, what the policies should know.
	Tools map[string]ToolConfig `json:"tools,omitempty"`
}

// StdioConfig runs an upstream process.
type StdioConfig struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
}

// HTTPConfig reaches a streamable-HTTP upstream.
type HTTPConfig struct {
	URL string `json:"url"`
	// Headers are sent with every request (an Authorization header, say).
	Headers map[string]string `json:"headers,omitempty"`
}

// ToolConfig declares what the autonomy hook should know about an upstream tool.
type ToolConfig struct {
	// PathArgs are argument names carrying paths, beyond the default ones
	// (path, file_path, cwd, working_directory, paths, files, target,
	// source, destination), checked like the built-in tools' paths.
	PathArgs []string `json:"pathArgs,omitempty"`
	// ReadOnly says the tool changes nothing, so readonly mode allows it.
	// Unlisted upstream tools are mutating for readonly mode.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// DefaultConnectTimeout bounds connecting to an upstream when ConnectTimeout is empty.
const DefaultConnectTimeout = 30 * time.Second

var upstreamName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// LoadConfig reads and validates an upstreams file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading MCP upstreams: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes strict YAML (unknown fields and duplicate keys are
// errors) and validates it.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("invalid MCP upstreams YAML: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks names, transports and timeouts, naming the offending upstream.
func (c *Config) Validate() error {
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		if err := u.validate(); err != nil {
			if u.Name == "" {
				return fmt.Errorf("upstreams[%d]: %w", i, err)
			}
			return fmt.Errorf("upstream %q: %w", u.Name, err)
		}
		if seen[u.Name] {
			return fmt.Errorf("upstream %q is configured twice", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}

func (u *UpstreamConfig) validate() error {
	if !upstreamName.MatchString(u.Name) {
		return fmt.Errorf("name %q must be lower-case letters, digits and \"-\", start with a letter, at most 32 characters", u.Name)
	}
	switch {
	case (u.Stdio == nil) == (u.HTTP == nil):
		return errors.New("set exactly one of stdio and http")
	case u.Stdio != nil && strings.TrimSpace(u.Stdio.Command) == "":
		return errors.New("stdio.command is required")
	case u.HTTP != nil:
		p, err := url.Parse(u.HTTP.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("http.url %q must be an absolute http or https URL", u.HTTP.URL)
		}
	}
	if _, err := u.connectTimeout(); err != nil {
		return err
	}
	for name, t := range u.Tools {
		if name == "" {
			return errors.New("tools: an empty tool name")
		}
		if slices.Contains(t.PathArgs, "") {
			return fmt.Errorf("tools.%s.pathArgs: an empty argument name", name)
		}
	}
	return nil
}

func (u *UpstreamConfig) connectTimeout() (time.Duration, error) {
	if u.ConnectTimeout == "" {
		return DefaultConnectTimeout, nil
	}
	d, err := time.ParseDuration(u.ConnectTimeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("connectTimeout %q must be a positive duration such as 30s", u.ConnectTimeout)
	}
	return d, nil
}
