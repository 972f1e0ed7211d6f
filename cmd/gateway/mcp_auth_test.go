package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// TestMCPAuthAndOriginFlags builds the handler as the gateway does from its
// flags (static tokens and an OIDC issuer, an allowed origin) and checks the
// 401 challenges of /mcp and /v1/tool-calls for a missing token, an invalid
// one and a Basic header, the metadata naming the issuer, and the origin rule.
func TestMCPAuthAndOriginFlags(t *testing.T) {
	ws := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens: [{identity: ci, token: ci-token-0123456789abcdef}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const issuer = "https://issuer.example"
	a := authFlags{tokensFile: tokens}
	a.oidc.IssuerURL, a.oidc.Audience = issuer, "toolhooks"
	logger := slog.New(slog.DiscardHandler)
	callers, err := a.build(nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	rec := &audit.Memory{}
	srv, err := gateway.New(gateway.Options{Workspace: ws, Audit: rec, Logger: logger, Callers: callers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	m := mcpFlags{enabled: true, deniedTools: "mark", allowedOrigins: " https://app.example , "}
	h, err := m.handler(srv, nil, a.issuers(), logger)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	metadataURL := hs.URL + mcpgate.MetadataPath

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	refusedPosts := 0
	for name, tc := range map[string]struct{ header, wantError string }{
		"missing": {},
		"invalid": {"Bearer not-a-token-of-anyone", "invalid_token"},
		"basic":   {"Basic Y2k6Y2ktdG9rZW4=", "invalid_token"},
	} {
		for _, path := range []string{mcpgate.Path, "/v1/tool-calls"} {
			body := `{"tool":"list_dir","arguments":{}}`
			if path == mcpgate.Path {
				body = initialize
			}
			req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			refusedPosts++
			cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
			if resp.StatusCode != http.StatusUnauthorized || err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
				t.Fatalf("%s token, %s: %d, WWW-Authenticate %q (%v)", name, path, resp.StatusCode, resp.Header.Values("WWW-Authenticate"), err)
			}
			p := cs[0].Params
			if p["realm"] != "toolhooks" || p["error"] != tc.wantError || (tc.wantError != "") != (p["error_description"] != "") {
				t.Errorf("%s token, %s: challenge %v", name, path, p)
			}
			if wantMD := map[bool]string{true: metadataURL}[path == mcpgate.Path]; p["resource_metadata"] != wantMD {
				t.Errorf("%s token, %s: resource_metadata %q, want %q", name, path, p["resource_metadata"], wantMD)
			}
		}
	}
	md, err := oauthex.GetProtectedResourceMetadata(context.Background(), metadataURL, hs.URL+mcpgate.Path, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != issuer {
		t.Errorf("authorization servers %v, want [%s]", md.AuthorizationServers, issuer)
	}

	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "https://app.example": http.StatusNoContent} {
		req, _ := http.NewRequest(http.MethodOptions, hs.URL+mcpgate.Path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("preflight from %s: status %d, want %d", origin, resp.StatusCode, want)
		}
	}
	// Each refused POST left one audit record of its refusal; the refused
	// preflight is no call and left none.
	recs := rec.Records()
	for _, r := range recs {
		if r.Denial == nil || r.Denial.Hook != hooks.RequestHookName || r.Denial.Rule != hooks.RuleUnauthenticated || r.SenderID != "" {
			t.Errorf("a refused request's audit record %+v", r)
		}
	}
	if len(recs) != refusedPosts {
		t.Errorf("%d refused requests left %d audit records, want one each", refusedPosts, len(recs))
	}
}

func TestMCPOriginAndResourceFlagErrors(t *testing.T) {
	ws := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"origins without MCP":  {[]string{"--allow-anonymous", "--mcp-allowed-origins", "https://a.example"}, "need --mcp"},
		"resource without MCP": {[]string{"--allow-anonymous", "--mcp-resource-url", "https://gw.example/mcp"}, "need --mcp"},
		"wildcard origin":      {[]string{"--mcp", "--allow-anonymous", "--mcp-allowed-origins", "*"}, `allowed origin "*"`},
		"origin with a path":   {[]string{"--mcp", "--allow-anonymous", "--mcp-allowed-origins", "https://a.example/app"}, "allowed origin"},
		"relative resource":    {[]string{"--mcp", "--allow-anonymous", "--mcp-resource-url", "gw.example/mcp"}, "resource URL"},
	} {
		args := append([]string{"--workspace", ws, "--listen", "127.0.0.1:0"}, tc.args...)
		err := run(context.Background(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}
