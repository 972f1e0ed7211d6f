package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Policies stored in the API server that bind one ServiceAccount by
// callers restrict that ServiceAccount's calls and not another's (which a
// policy without subjects binds), on a
// gateway that verifies callers' ServiceAccount tokens by TokenReview.
func TestPoliciesBindOnlyTheServiceAccountTheyName(t *testing.T) {
	ctx := context.Background()
	const ns, audience = "subjects", "toolhooks.dev/gateway"
	mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, sa := range []string{"bound", "free"} {
		mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bound := &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{{Kind: policyv1alpha1.CallerServiceAccount, Name: "bound"}}}
	auto := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-writes"},
		Spec: policyv1alpha1.AutonomyPolicySpec{Subjects: bound, Tools: &policyv1alpha1.ToolRules{Deny: []string{"write_file"}}}}
	contract := &policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "out-only"},
		Spec: policyv1alpha1.ContractPolicySpec{Subjects: bound, AllowedPaths: []string{filepath.Join(ws, "out")}}}
	// Without a policy binding every caller, the free ServiceAccount would be
	// bound by none and denied (noPolicyBindsCaller).
	everyone := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everyone"},
		Spec: policyv1alpha1.AutonomyPolicySpec{Mode: policyv1alpha1.AutonomyFull}}
	mustCreate(t, auto)
	mustCreate(t, contract)
	mustCreate(t, everyone)
	// The gateway's configuration is compiled from the objects as stored.
	var stored compile.Policies
	var al policyv1alpha1.AutonomyPolicyList
	var cl policyv1alpha1.ContractPolicyList
	if err := testEnv.Client.List(ctx, &al, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.Client.List(ctx, &cl, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	stored = compile.PoliciesOf(compile.ObjectsOf(al.Items...), compile.ObjectsOf(cl.Items...))
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: ns}, stored)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Fatalf("%s: %v", compile.HookName(o.Policy), o.Err)
		}
	}

	cs, err := kubernetes.NewForConfig(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	discard := audit.SinkFunc(func(context.Context, audit.Record) error { return nil })
	srv, err := gateway.New(gateway.Options{Workspace: ws, Logger: slog.New(slog.DiscardHandler), Audit: discard,
		Callers: &authn.Request{Tokens: &tokenreview.TokenReview{Client: cs.AuthenticationV1().TokenReviews(), Audience: audience, AnyUser: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if _, err := srv.Apply(ctx, cfg, "test"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	tokenOf := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	call := func(token, tool, args string) wire.ToolCallResponse {
		t.Helper()
		body := fmt.Sprintf(`{"sessionId":"s-1","tool":%q,"arguments":%s}`, tool, args)
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/tool-calls", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		var r wire.ToolCallResponse
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
			t.Fatalf("%s: HTTP %d %s", tool, resp.StatusCode, b)
		}
		return r
	}
	for _, sa := range []string{"bound", "free"} {
		tok := tokenOf(sa)
		file := filepath.Join(ws, sa+".txt")
		w := call(tok, "write_file", fmt.Sprintf(`{"path":%q,"content":"x"}`, sa+".txt"))
		_, statErr := os.Stat(file)
		r := call(tok, "read_file", `{"path":"notes.md"}`)
		if sa == "bound" {
			if w.Denial == nil || w.Denial.Rule != "toolDeny" || statErr == nil {
				t.Errorf("bound write_file: %+v, file written: %v", w, statErr == nil)
			}
			if r.Denial == nil || r.Denial.Policy == nil || r.Denial.Policy.Name != "out-only" {
				t.Errorf("bound read_file outside the contract's paths: %+v", r)
			}
			continue
		}
		if w.Status != "succeeded" || statErr != nil {
			t.Errorf("free write_file: %+v, %v", w, statErr)
		}
		if r.Status != "succeeded" || r.Result != "hello\n" {
			t.Errorf("free read_file: %+v", r)
		}
	}
}
