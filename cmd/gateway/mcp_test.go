package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

func TestMCPFlagErrors(t *testing.T) {
	ws := t.TempDir()
	tokens := filepath.Join(ws, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens: [{identity: a, token: short}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	upstreams := filepath.Join(ws, "upstreams.yaml")
	if err := os.WriteFile(upstreams, []byte("upstreams: [{name: Bad}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no authentication":         {[]string{"--mcp"}, "callers cannot authenticate"},
		"no authentication, no MCP": {nil, "callers cannot authenticate"},
		"upstreams alone":           {[]string{"--allow-anonymous", "--mcp-upstreams", upstreams}, "--mcp-upstreams needs --mcp"},
		"bad tokens":                {[]string{"--mcp", "--auth-tokens-file", tokens}, "at least 16 bytes"},
		"bad upstreams":             {[]string{"--mcp", "--allow-anonymous", "--mcp-upstreams", upstreams}, `name "Bad"`},
		"bad denied mode":           {[]string{"--mcp", "--allow-anonymous", "--mcp-denied-tools", "grey"}, `not "grey"`},
		"negative token cache TTL": {[]string{"--mcp", "--allow-anonymous", "--auth-token-cache-ttl", "-1s"},
			"--auth-token-cache-ttl must not be negative"},
		"OIDC without audience": {[]string{"--auth-oidc-issuer-url", "https://issuer.example"}, "an issuer URL and an audience are required"},
	} {
		args := append([]string{"--workspace", ws, "--listen", "127.0.0.1:0"}, tc.args...)
		err := run(context.Background(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestTheGatewayBinaryServesMCP runs the gateway binary with --mcp and a
// tokens file and calls it with the go-sdk client.
func TestTheGatewayBinaryServesMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp, bin := buildGateway(t)
	ws, policies := filepath.Join(tmp, "ws"), filepath.Join(tmp, "policies")
	for _, d := range []string{ws, policies} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(ws, "notes.txt"):        "hello\n",
		filepath.Join(ws, "id.pem"):           "key\n",
		filepath.Join(tmp, "tokens.yaml"):     "tokens:\n- {identity: ci-agent, token: ci-agent-token-0123456789}\n",
		filepath.Join(policies, "agent.yaml"): "apiVersion: policy.toolhooks.dev/v1alpha1\nkind: AutonomyPolicy\nmetadata: {name: agent}\nspec:\n  workspace: {root: " + ws + ", only: true}\n  forbiddenPathGlobs: [\"**/*.pem\"]\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, bin, "--listen", "127.0.0.1:0", "--workspace", ws, "--policies", policies,
		"--mcp", "--auth-tokens-file", filepath.Join(tmp, "tokens.yaml"), "--mcp-max-sessions-per-caller", "1", "--mcp-max-sessions", "5")

	resp, err := http.Post(g.base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp without a token: %d, want 401", resp.StatusCode)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"ci-agent-token-0123456789"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	for args, want := range map[string]string{
		`{"path":"notes.txt"}`: "hello\n",
		`{"path":"id.pem"}`:    "Tool execution denied by hook: AutonomyPolicy/default/agent",
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		// A denial's text goes on with the policy, rule and reason lines.
		if tc, _ := res.Content[0].(*mcp.TextContent); tc == nil || strings.SplitN(tc.Text, "\n", 2)[0] != strings.TrimSuffix(want, "\n") ||
			res.IsError != strings.HasPrefix(want, "Tool execution denied") || res.IsError && !strings.Contains(tc.Text, "\nRule: forbiddenPathGlobs\n") {
			t.Errorf("read_file %s: %+v", args, res)
		}
	}
	// The caller's cap of one session: a second is refused and counted.
	if _, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"ci-agent-token-0123456789"}}, MaxRetries: -1}, nil); err == nil ||
		!strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("a second session over --mcp-max-sessions-per-caller 1: %v", err)
	}
	resp, err = http.Get(g.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{"\ntoolhooks_mcp_sessions 1\n", `toolhooks_mcp_sessions_refused_total{cap="caller"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	_ = cs.Close()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(); err != nil {
		t.Errorf("the gateway exited with %v after SIGTERM", err)
	}
	if !strings.Contains(g.stdout.String(), `"channelId":"mcp"`) || !strings.Contains(g.stdout.String(), `"senderId":"ci-agent"`) {
		t.Errorf("audit records lack the MCP channel and sender:\n%s", g.stdout.String())
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTokenCacheTTLBoundsRevocation proves against a real API server
// what --auth-token-cache-ttl bounds: two callers' ServiceAccount tokens are
// accepted; once both ServiceAccounts are deleted, the caller behind a TTL
// of 0 is refused as soon as the API server refuses the token (it caches
// successful authentications itself for a few seconds), while the caller
// behind a TTL of a minute is still accepted then.
func TestTokenCacheTTLBoundsRevocation(t *testing.T) {
	env := testenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	ctx := t.Context()
	// initialize asks h to open an MCP session with token; it returns the status.
	initialize := func(h http.Handler, token string) int {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
			`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	type caller struct {
		h     http.Handler
		token string
	}
	callers := map[string]*caller{}
	for sa, ttl := range map[string]time.Duration{"uncached": 0, "cached": time.Minute} {
		token := serviceAccountToken(t, cs, sa, DefaultAudience)
		h, _ := clusterGateway(t, cs, ttl, logger)
		if code := initialize(h, token); code != http.StatusOK {
			t.Fatalf("%s: initialize with a valid token: %d, want 200", sa, code)
		}
		callers[sa] = &caller{h: h, token: token}
	}
	for sa := range callers {
		if err := cs.CoreV1().ServiceAccounts("default").Delete(ctx, sa, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	for initialize(callers["uncached"].h, callers["uncached"].token) != http.StatusUnauthorized {
		if time.Since(deleted) > 40*time.Second {
			t.Fatal("the uncached caller's token is still accepted 40s after its ServiceAccount was deleted")
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("uncached caller refused %s after its ServiceAccount was deleted", time.Since(deleted).Round(100*time.Millisecond))
	if time.Since(deleted) < 50*time.Second {
		if code := initialize(callers["cached"].h, callers["cached"].token); code != http.StatusOK {
			t.Errorf("cached caller within its minute: %d, want 200 (from the cache)", code)
		}
	}
}

// serviceAccountToken creates the ServiceAccount default/name and returns a
// token of it bound to audience.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, name, audience string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// clusterGateway is the gateway's handler (with /mcp) as cluster mode wires
// it: callers authenticated by TokenReview with the default audience.
func clusterGateway(t *testing.T, cs kubernetes.Interface, ttl time.Duration, logger *slog.Logger) (http.Handler, *gateway.Server) {
	t.Helper()
	a := authFlags{audience: DefaultAudience, tokenCacheTTL: ttl}
	callers, err := a.build(cs.AuthenticationV1().TokenReviews(), logger)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Options{Workspace: t.TempDir(), Audit: audit.NewJSONSink(io.Discard), Logger: logger, Callers: callers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	m := mcpFlags{enabled: true, deniedTools: "mark"}
	h, err := m.handler(srv, nil, a.issuers(), logger)
	if err != nil {
		t.Fatal(err)
	}
	return h, srv
}

// TestServiceAccountCallersAgainstARealAPIServer: two ServiceAccounts call
// POST /v1/decisions with their tokens (reviewed by a real kube-apiserver);
// a ContractPolicy binding only one of them denies that one's reads and not
// the other's, and an unscoped policy binds everyone else. Neither can pose
// as the other by senderId, a token for another audience and a missing token
// are refused.
func TestServiceAccountCallersAgainstARealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	h, srv := clusterGateway(t, cs, time.Minute, logger)
	policies, err := policyfile.Parse([]byte(`apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: restricted-only, namespace: default}
spec:
  subjects: {senders: ["system:serviceaccount:default:restricted"]}
  allowedPaths: ["/nonexistent-root"]
---
apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: everyone, namespace: default}
spec:
  maxToolCalls: 1000
`), "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, policies)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	if _, err := srv.Apply(t.Context(), cfg, "test"); err != nil {
		t.Fatal(err)
	}
	restricted := serviceAccountToken(t, cs, "restricted", DefaultAudience)
	free := serviceAccountToken(t, cs, "free", DefaultAudience)
	otherAudience := serviceAccountToken(t, cs, "free", "someone-else")
	decide := func(token, body string) (int, string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/decisions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	read := `{"sessionId":"s","tool":"read_file","arguments":{"path":"a.txt"}}`
	if code, body := decide(restricted, read); code != http.StatusOK || !strings.Contains(body, `"allowed":false`) ||
		!strings.Contains(body, "restricted-only") {
		t.Errorf("restricted caller: %d %s, want a denial by restricted-only", code, body)
	}
	if code, body := decide(free, read); code != http.StatusOK || !strings.Contains(body, `"allowed":true`) {
		t.Errorf("free caller: %d %s, want allowed", code, body)
	}
	spoof := `{"sessionId":"s","senderId":"system:serviceaccount:default:free","tool":"read_file","arguments":{"path":"a.txt"}}`
	if code, body := decide(restricted, spoof); code != http.StatusBadRequest {
		t.Errorf("restricted caller posing as free: %d %s, want 400", code, body)
	}
	if code, _ := decide(otherAudience, read); code != http.StatusUnauthorized {
		t.Errorf("token of another audience: %d, want 401", code)
	}
	if code, _ := decide("", read); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
}
