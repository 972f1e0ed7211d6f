package mcpgate_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// npmDir holds the pinned third-party MCP packages (make mcp-npm installs them).
func npmDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "hack", "mcp-npm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the third-party MCP tests need Node.js (.ci/run installs it)")
	}
	for _, pkg := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/server-filesystem",
		"@modelcontextprotocol/server-everything", "@modelcontextprotocol/inspector", "mcp-remote"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("%s is not installed in %s/node_modules: run `make mcp-npm` (npm ci from the lock file)", pkg, dir)
		}
	}
	return dir
}

type npmClientOutput struct {
	SessionID string `json:"sessionId"`
	Tools     []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Meta        map[string]any `json:"meta"`
	} `json:"tools"`
	Results []struct {
		Name    string `json:"name"`
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
		Meta    struct {
			Denial *wire.Denial `json:"toolhooks.dev/denial"`
		} `json:"meta"`
	} `json:"results"`
}

// TestThirdPartyFilesystemServerAndTypeScriptClient fronts the npm
// @modelcontextprotocol/server-filesystem (stdio) and calls through the
// gateway with a client written with @modelcontextprotocol/sdk.
func TestThirdPartyFilesystemServerAndTypeScriptClient(t *testing.T) {
	dir := npmDir(t)
	ws := t.TempDir()
	ws, _ = filepath.EvalSymlinks(ws)
	cfg, err := mcpgate.ParseConfig([]byte(`upstreams:
- name: fs
  stdio:
    command: node
    args: ["` + filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js") + `", "` + ws + `"]
  connectTimeout: 60s
  tools:
    read_text_file: {readOnly: true}
    list_directory: {readOnly: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvIn(t, ws, envOptions{upstreams: cfg})
	e.apply(`apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: readonly-fs}
spec:
  mode: ReadOnly
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env"]
`)
	calls := []map[string]any{
		{"name": "fs_read_text_file", "arguments": map[string]any{"path": filepath.Join(ws, "README.md")}},
		{"name": "fs_read_text_file", "arguments": map[string]any{"path": filepath.Join(ws, "config/.env")}},
		{"name": "fs_write_file", "arguments": map[string]any{"path": filepath.Join(ws, "new.txt"), "content": "x"}},
		{"name": "fs_read_text_file", "arguments": map[string]any{"path": "/etc/hostname"}},
		// Tool errors: the built-in's and the upstream's.
		{"name": "read_file", "arguments": map[string]any{"path": "missing.txt"}},
		{"name": "fs_read_text_file", "arguments": map[string]any{"path": filepath.Join(ws, "missing.txt")}},
	}
	callsJSON, _ := json.Marshal(calls)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "client.mjs"), e.url, aliceToken, string(callsJSON))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, stderr.String())
	}
	var got npmClientOutput
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}

	listed := map[string]string{}
	for _, tool := range got.Tools {
		listed[tool.Name] = tool.Description
	}
	if d, ok := listed["fs_read_text_file"]; !ok || strings.HasPrefix(d, mcpgate.DeniedMarker) {
		t.Errorf("fs_read_text_file: listed=%v description=%q", ok, d)
	}
	if d, ok := listed["fs_write_file"]; !ok || !strings.HasPrefix(d, mcpgate.DeniedMarker) {
		t.Errorf("fs_write_file in readonly mode: listed=%v description=%q, want marked", ok, d)
	}

	hook := "AutonomyPolicy/default/readonly-fs"
	r := got.Results
	if len(r) != 6 {
		t.Fatalf("results: %+v", r)
	}
	// The upstream's text passes through; its structuredContent is not
	// repeated as text, since the result has text of its own.
	if r[0].IsError || r[0].Text != "# project\n" {
		t.Errorf("read inside the workspace: isError=%v text=%q", r[0].IsError, r[0].Text)
	}
	for i, rule := range map[int]string{1: autonomy.RuleForbiddenPaths, 2: autonomy.RuleReadOnly, 3: autonomy.RuleWorkspaceOnly} {
		d := r[i].Meta.Denial // the filesystem tools have output schemas: the denial is in _meta only
		// The text, all that many hosts give the model, holds the reason too.
		want := ""
		if d != nil {
			want = hooks.DenialText + hook + "\nPolicy: default/readonly-fs\nRule: " + rule + "\nReason: " + d.Reason
		}
		if !r[i].IsError || r[i].Text != want || d == nil || d.Rule != rule || d.Hook != hook || d.Reason == "" {
			t.Errorf("%s %v: isError=%v text=%q denial=%+v, want rule %s", calls[i]["name"], calls[i]["arguments"], r[i].IsError, r[i].Text, d, rule)
		}
	}
	if !r[4].IsError || r[4].Text != "Error: read_file: missing.txt does not exist" {
		t.Errorf("read_file of a missing file: isError=%v text=%q", r[4].IsError, r[4].Text)
	}
	if !r[5].IsError || !strings.Contains(r[5].Text, "ENOENT") || r[5].Meta.Denial != nil {
		t.Errorf("fs_read_text_file of a missing file: isError=%v text=%q", r[5].IsError, r[5].Text)
	}
	recs := e.audit.Records()
	for i, tool := range []string{"read_file", "fs_read_text_file"} {
		if rec := recs[len(recs)-2+i]; rec.Tool != tool || rec.Outcome != hooks.StatusFailed {
			t.Errorf("audit of %s of a missing file: %+v", tool, rec)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("the denied write happened: %v", err)
	}
	if rec := lastRecord(t, e.audit); rec.SessionID != got.SessionID || rec.SenderID != "alice" || rec.ChannelID != mcpgate.ChannelID {
		t.Errorf("audit record %+v, client session %q", rec, got.SessionID)
	}
}
