package mcpgate_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// send sends method to url with body and headers, and returns the status,
// the response's headers and its body.
func send(t *testing.T, method, url, body string, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// bearerChallenge parses the response's WWW-Authenticate as an OAuth client
// does and returns the Bearer challenge's parameters.
func bearerChallenge(t *testing.T, h http.Header) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		t.Fatalf("WWW-Authenticate %q: %v", h.Values("WWW-Authenticate"), err)
	}
	if len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: want one Bearer challenge", h.Values("WWW-Authenticate"))
	}
	return cs[0].Params
}

// TestRefusalsCarryABearerChallenge: a missing token, an invalid one and a
// Basic header are each refused with a 401 whose challenge names the
// endpoint's protected resource metadata, with error="invalid_token" when
// credentials were given; the metadata is served without a token and names
// the endpoint as its resource, as the SDK's OAuth client checks; nothing
// runs for a refused call, and each refused POST leaves one audit record.
func TestRefusalsCarryABearerChallenge(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	metadataURL := e.base + mcpgate.MetadataPath
	write := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"made.txt","content":"x"}}}`
	for name, tc := range map[string]struct {
		header      string
		invalid     bool
		description string
	}{
		"no token":      {},
		"invalid token": {header: "Bearer not-a-valid-token-at-all", invalid: true, description: "not recognised"},
		"basic":         {header: "Basic " + aliceToken, invalid: true, description: "a bearer token is required"},
	} {
		for _, body := range []string{rawInitialize, write} {
			headers := map[string]string{}
			if tc.header != "" {
				headers["Authorization"] = tc.header
			}
			status, h, text := send(t, http.MethodPost, e.url, body, headers)
			if status != http.StatusUnauthorized {
				t.Fatalf("%s: status %d (%s), want 401", name, status, text)
			}
			p := bearerChallenge(t, h)
			if p["realm"] != "toolhooks" || p["resource_metadata"] != metadataURL {
				t.Errorf("%s: challenge %v, want realm toolhooks and resource_metadata %s", name, p, metadataURL)
			}
			if !tc.invalid {
				if _, ok := p["error"]; ok {
					t.Errorf("%s: challenge %v has an error code, though no credentials were given", name, p)
				}
				continue
			}
			if p["error"] != "invalid_token" || !strings.Contains(p["error_description"], tc.description) {
				t.Errorf("%s: challenge %v, want error invalid_token described as %q", name, p, tc.description)
			}
			if !strings.Contains(text, "invalid token") {
				t.Errorf("%s: body %q does not say the token is invalid", name, text)
			}
		}
	}
	// Each refused POST is audited once, as a refusal of no verified caller.
	if got := refusals(e.audit); !maps.Equal(got, map[string]int{hooks.RuleUnauthenticated: 6}) {
		t.Fatalf("refused requests left the audit records %v, want 6 refusals by rule %s", got, hooks.RuleUnauthenticated)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "made.txt")); err == nil {
		t.Fatal("a refused call wrote its file")
	}

	for _, path := range []string{mcpgate.MetadataPath, mcpgate.MetadataRootPath} {
		md, err := oauthex.GetProtectedResourceMetadata(context.Background(), e.base+path, e.url, http.DefaultClient)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(md.AuthorizationServers) != 0 || len(md.BearerMethodsSupported) != 1 || md.BearerMethodsSupported[0] != "header" {
			t.Errorf("%s: metadata %+v, want no authorization servers (tokens come out of band) and bearer in the header", path, md)
		}
	}
	// With no authorization server named, OAuth clients try to register at
	// the endpoint's origin: the answer says how to connect instead.
	status, _, body := send(t, http.MethodPost, e.base+mcpgate.RegistrationPath, `{"redirect_uris":["http://localhost:1/cb"]}`, nil)
	var reg struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.Unmarshal([]byte(body), &reg); status != http.StatusBadRequest || err != nil || reg.Error != "invalid_client_metadata" ||
		!strings.Contains(reg.ErrorDescription, "invalid token") || !strings.Contains(reg.ErrorDescription, `"Authorization: Bearer <token>"`) {
		t.Errorf("client registration: %d %s", status, body)
	}
}

// TestV1RefusalsCarryABearerChallenge: the plain HTTP API's 401s carry the
// same challenge, without resource metadata.
func TestV1RefusalsCarryABearerChallenge(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.apply(codingPolicy)
	for _, path := range []string{"/v1/tool-calls", "/v1/decisions"} {
		body := `{"tool":"write_file","arguments":{"path":"made.txt","content":"x"}}`
		status, h, _ := send(t, http.MethodPost, e.base+path, body, nil)
		if p := bearerChallenge(t, h); status != http.StatusUnauthorized || p["realm"] != "toolhooks" || p["error"] != "" {
			t.Errorf("%s without a token: %d %v, want 401, realm toolhooks and no error code", path, status, p)
		}
		status, h, _ = send(t, http.MethodPost, e.base+path, body, map[string]string{"Authorization": "Basic " + aliceToken})
		if p := bearerChallenge(t, h); status != http.StatusUnauthorized || p["error"] != "invalid_token" || p["error_description"] == "" {
			t.Errorf("%s with Basic: %d %v, want 401 and error invalid_token with a description", path, status, p)
		}
	}
	if _, err := os.Stat(filepath.Join(e.ws, "made.txt")); err == nil {
		t.Fatal("a refused call wrote its file")
	}
}

// TestConfiguredResourceURL: with a public URL and an OIDC issuer, the
// challenge and the metadata name them whatever Host the request carries.
func TestConfiguredResourceURL(t *testing.T) {
	const public, issuer = "https://gateway.example/mcp", "https://issuer.example"
	e := newEnv(t, envOptions{tweak: func(o *mcpgate.Options) {
		o.ResourceURL, o.AuthorizationServers = public, []string{issuer}
	}})
	_, h, _ := send(t, http.MethodPost, e.url, rawInitialize, map[string]string{"Authorization": "Bearer nope-nope-nope"})
	if p := bearerChallenge(t, h); p["resource_metadata"] != "https://gateway.example"+mcpgate.MetadataPath {
		t.Errorf("challenge %v, want the public URL's metadata", p)
	}
	// Fetched through the test server, as a proxy in front would forward it.
	md, err := oauthex.GetProtectedResourceMetadata(context.Background(), e.base+mcpgate.MetadataPath, public, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != issuer {
		t.Errorf("authorization servers %v, want [%s]", md.AuthorizationServers, issuer)
	}
	for _, bad := range []string{"gateway.example/mcp", "ftp://gateway.example/mcp", "https://gateway.example/mcp?x=1"} {
		_, err := mcpgate.NewHandler(mcpgate.Options{Gateway: e.srv, ResourceURL: bad})
		if err == nil {
			t.Errorf("resource URL %q was accepted", bad)
		}
	}
	if _, err := mcpgate.NewHandler(mcpgate.Options{Gateway: e.srv, AuthorizationServers: []string{"issuer.example"}}); err == nil {
		t.Error("an authorization server that is not a URL was accepted")
	}
}
