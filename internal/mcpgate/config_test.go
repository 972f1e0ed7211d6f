package mcpgate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

func TestParseConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field":     {"upstreams:\n- name: a\n  stdio: {command: x}\n  comand: y\n", `unknown field "comand"`},
		"duplicate key":     {"upstreams:\n- name: a\n  name: b\n  stdio: {command: x}\n", "already set"},
		"bad name":          {"upstreams:\n- name: My_Server\n  stdio: {command: x}\n", `name "My_Server"`},
		"no transport":      {"upstreams:\n- name: a\n", "exactly one of stdio and http"},
		"both transports":   {"upstreams:\n- name: a\n  stdio: {command: x}\n  http: {url: 'http://h/'}\n", "exactly one"},
		"empty command":     {"upstreams:\n- name: a\n  stdio: {command: ' '}\n", "stdio.command is required"},
		"relative url":      {"upstreams:\n- name: a\n  http: {url: /mcp}\n", "absolute http or https URL"},
		"bad scheme":        {"upstreams:\n- name: a\n  http: {url: 'ftp://h/'}\n", "absolute http or https URL"},
		"bad timeout":       {"upstreams:\n- name: a\n  stdio: {command: x}\n  connectTimeout: soon\n", "connectTimeout"},
		"twice":             {"upstreams:\n- name: a\n  stdio: {command: x}\n- name: a\n  stdio: {command: y}\n", "configured twice"},
		"empty path arg":    {"upstreams:\n- name: a\n  stdio: {command: x}\n  tools: {t: {pathArgs: ['']}}\n", "empty argument name"},
		"not yaml":          {"upstreams: [", "invalid MCP upstreams YAML"},
		"wrong type":        {"upstreams: {name: a}\n", "invalid MCP upstreams YAML"},
		"unknown tool knob": {"upstreams:\n- name: a\n  stdio: {command: x}\n  tools: {t: {hidden: true}}\n", `unknown field "hidden"`},
	} {
		_, err := mcpgate.ParseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	c, err := mcpgate.ParseConfig([]byte("upstreams:\n- name: fs-1\n  http: {url: 'https://h/mcp', headers: {X: v}}\n  connectTimeout: 5s\n"))
	if err != nil || len(c.Upstreams) != 1 || c.Upstreams[0].HTTP.Headers["X"] != "v" {
		t.Fatalf("valid config: %+v, %v", c, err)
	}
}

func TestConnectErrors(t *testing.T) {
	up, _ := httpUpstream(t)
	for name, tc := range map[string]struct {
		cfg  mcpgate.UpstreamConfig
		want string
	}{
		"unknown configured tool": {mcpgate.UpstreamConfig{Name: "up", HTTP: &mcpgate.HTTPConfig{URL: up.URL},
			Tools: map[string]mcpgate.ToolConfig{"ech": {ReadOnly: true}}}, `tools.ech is configured but the upstream offers no such tool`},
		"missing command": {mcpgate.UpstreamConfig{Name: "gone", Stdio: &mcpgate.StdioConfig{Command: "/nonexistent/mcp-server"}},
			`upstream "gone": connecting`},
		"url down": {mcpgate.UpstreamConfig{Name: "down", HTTP: &mcpgate.HTTPConfig{URL: "http://127.0.0.1:1/mcp"}, ConnectTimeout: "5s"},
			`upstream "down": connecting`},
		"not mcp": {mcpgate.UpstreamConfig{Name: "shell", Stdio: &mcpgate.StdioConfig{Command: "/bin/sh", Args: []string{"-c", "echo hello; sleep 30"}},
			ConnectTimeout: "2s"}, `upstream "shell"`},
	} {
		_, err := mcpgate.Connect(context.Background(), &mcpgate.Config{Upstreams: []mcpgate.UpstreamConfig{tc.cfg}}, discard())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}
