package mcpgate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// CodeOriginRefused is the JSON-RPC error code of a request refused (HTTP
// 403) because its Origin is not allowed.
const CodeOriginRefused = -32030

// corsAllowHeaders are the request headers a listed origin may send.
const corsAllowHeaders = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"

// corsExposeHeaders are the response headers a listed origin may read.
const corsExposeHeaders = "Mcp-Session-Id, WWW-Authenticate"

// origins guards the endpoint against requests from foreign web origins
// (DNS rebinding, cross-site requests from a browser): a request with an
// Origin header that is neither the endpoint's own origin nor listed is
// refused with 403, before authentication and before anything runs, and
// whatever its method (net/http's CrossOriginProtection, which the SDK
// offers, lets GET through and trusts Sec-Fetch-Site, so it is not used).
// Requests without Origin (non-browser clients) pass. Listed origins get
// CORS headers, and their preflight OPTIONS is answered here.
type origins struct {
	res     *resource
	allowed []string // normalized (see normOrigin)
}

// newOrigins checks the allowed origins: exact http(s) origins, no path.
func newOrigins(res *resource, allowed []string) (*origins, error) {
	o := &origins{res: res}
	for _, a := range allowed {
		n, ok := normOrigin(a)
		if !ok {
			return nil, fmt.Errorf("mcp: allowed origin %q: want scheme://host[:port] (http or https, no path, no wildcard)", a)
		}
		o.allowed = append(o.allowed, n)
	}
	return o, nil
}

// normOrigin returns origin s as lower-case scheme://host[:port] without
// the scheme's default port; false when s is not an http(s) origin.
func normOrigin(s string) (string, bool) {
	u, err := absoluteURL(s)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return "", false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == schemeHTTP && port == "80") || (scheme == schemeHTTPS && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, true
	}
	return scheme + "://" + host, true
}

// middleware applies the origin rules in front of next.
func (o *origins) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.Header.Get("Origin")
		if raw == "" && len(r.Header.Values("Origin")) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		origin, ok := normOrigin(raw)
		own, _ := normOrigin(o.res.origin(r))
		listed := ok && slices.Contains(o.allowed, origin)
		switch {
		case len(r.Header.Values("Origin")) > 1 || !ok || (origin != own && !listed):
			noteRefusal(r, &hooks.Refusal{Rule: hooks.RuleForeignOrigin, Err: fmt.Errorf("origin %q is not allowed", raw)})
			refuseOrigin(w, raw)
			return
		case !listed: // the endpoint's own origin: no CORS needed
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", raw)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		next.ServeHTTP(w, r)
	})
}

// refuseOrigin answers 403 with a JSON-RPC error naming the origin (id
// null: the request is not read).
func refuseOrigin(w http.ResponseWriter, origin string) {
	msg := fmt.Sprintf("origin %q is not allowed: only requests without Origin, from the gateway's own origin "+
		"or from one of its allowed origins are accepted", origin)
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	out, err := json.Marshal(struct {
		Version string    `json:"jsonrpc"`
		ID      *int      `json:"id"` // always null
		Error   *rpcError `json:"error"`
	}{Version: "2.0", Error: &rpcError{Code: CodeOriginRefused, Message: msg}})
	if err != nil {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(out)
}
