package mcpgate_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// writeCall is a tools/call that creates name in the workspace.
func writeCall(name string) string {
	return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"` + name + `","content":"x"}}}`
}

// sessionHeaders are the headers of a request in session with alice's token and origin ("" for none).
func sessionHeaders(session, origin string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"}
	if origin != "" {
		h["Origin"] = origin
	}
	return h
}

// TestForeignOriginsAreRefused: a request whose Origin is neither the
// endpoint's own nor listed is refused with 403 and a JSON-RPC error,
// whatever its method and with a valid token, and its call does not run;
// requests without Origin, from the own origin and from a listed origin
// run, and only the listed origin gets CORS headers and a preflight answer.
func TestForeignOriginsAreRefused(t *testing.T) {
	const listed = "https://app.example"
	e := newEnv(t, envOptions{tweak: func(o *mcpgate.Options) { o.AllowedOrigins = []string{listed} }})
	e.apply(codingPolicy)
	session := mustOpen(t, e, aliceToken)
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(e.ws, name))
		return err == nil
	}

	for _, foreign := range []string{"https://evil.example", "null", "http://127.0.0.1", "https://app.example.evil", e.base + "/x", "http://" + strings.ToUpper("localhost")} {
		status, h, body := send(t, http.MethodPost, e.url, writeCall("foreign.txt"), sessionHeaders(session, foreign))
		var msg struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if status != http.StatusForbidden || json.Unmarshal([]byte(body), &msg) != nil || msg.Error.Code != mcpgate.CodeOriginRefused ||
			!strings.Contains(body, `"id":null`) ||
			!strings.Contains(msg.Error.Message, "not allowed") {
			t.Errorf("Origin %q: %d %s, want 403 with a JSON-RPC error", foreign, status, body)
		}
		if h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("Origin %q got CORS headers", foreign)
		}
		for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodOptions} {
			if status, _, _ := send(t, method, e.url, "", sessionHeaders(session, foreign)); status != http.StatusForbidden {
				t.Errorf("%s with Origin %q: status %d, want 403", method, foreign, status)
			}
		}
	}
	if status, _, _ := send(t, http.MethodPost, e.url, rawInitialize, map[string]string{"Authorization": "Bearer " + aliceToken, "Origin": "https://evil.example"}); status != http.StatusForbidden {
		t.Errorf("initialize from a foreign origin: status %d, want 403", status)
	}
	// Each refused POST is audited once (GET, DELETE and preflights are no calls).
	if got := refusals(e.audit); exists("foreign.txt") || !maps.Equal(got, map[string]int{hooks.RuleForeignOrigin: 7}) {
		t.Fatalf("a call from a foreign origin ran (file written: %v) or was not audited once as refused: %v", exists("foreign.txt"), got)
	}
	// The session still works: the refusals did not end it.
	for name, origin := range map[string]string{"none.txt": "", "own.txt": e.base, "listed.txt": listed} {
		status, h, body := send(t, http.MethodPost, e.url, writeCall(name), sessionHeaders(session, origin))
		if status != http.StatusOK || !exists(name) {
			t.Fatalf("Origin %q: %d %s, and the file was not written", origin, status, body)
		}
		if got, want := h.Get("Access-Control-Allow-Origin"), map[bool]string{true: listed}[origin == listed]; got != want {
			t.Errorf("Origin %q: Access-Control-Allow-Origin %q, want %q", origin, got, want)
		}
	}
	if got := refusals(e.audit); got["calls"] != 3 {
		t.Errorf("audit records %v, want one per allowed call (3) besides the refusals", got)
	}

	status, h, _ := send(t, http.MethodOptions, e.url, "", map[string]string{
		"Origin": listed, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type, mcp-session-id"})
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != listed ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight from the listed origin: %d %v", status, h)
	}
	for _, want := range []string{"Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Headers"), want) {
			t.Errorf("preflight allows headers %q, want %s among them", h.Get("Access-Control-Allow-Headers"), want)
		}
	}
	// A listed origin still needs a token.
	if status, h, _ := send(t, http.MethodPost, e.url, writeCall("anon.txt"), map[string]string{"Origin": listed}); status != http.StatusUnauthorized ||
		!strings.Contains(h.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") || exists("anon.txt") {
		t.Errorf("listed origin without a token: %d %v", status, h)
	}
}

// TestOwnOriginOfAConfiguredURL: with a public URL, the own origin is its
// origin, not whatever Host a request names (DNS rebinding sends the
// attacker's name as Host and Origin alike).
func TestOwnOriginOfAConfiguredURL(t *testing.T) {
	e := newEnv(t, envOptions{tweak: func(o *mcpgate.Options) { o.ResourceURL = "https://gateway.example:8443/mcp" }})
	e.apply(codingPolicy)
	session := mustOpen(t, e, aliceToken)
	if status, _, body := send(t, http.MethodPost, e.url, writeCall("own.txt"), sessionHeaders(session, "https://GATEWAY.example:8443")); status != http.StatusOK {
		t.Errorf("the public URL's origin: %d %s", status, body)
	}
	if status, _, _ := send(t, http.MethodPost, e.url, writeCall("host.txt"), sessionHeaders(session, e.base)); status != http.StatusForbidden {
		t.Errorf("the Host's origin besides the public URL's: status %d, want 403", status)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "host.txt")); err == nil {
		t.Error("the refused call wrote its file")
	}
}

func TestAllowedOriginsAreChecked(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, bad := range []string{"*", "app.example", "https://app.example/path", "ftp://app.example", "https://app.example?q", "null"} {
		if _, err := mcpgate.NewHandler(mcpgate.Options{Gateway: e.srv, AllowedOrigins: []string{bad}}); err == nil {
			t.Errorf("allowed origin %q was accepted", bad)
		}
	}
}
