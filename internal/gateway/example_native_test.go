package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/policyfile"
)

// A custom gateway build appends its own Go hooks after the compiled hook
// list (AuditLog, policies, PluginHooks): it passes them as Options.Native.
// A policy that denies a call decides before them; a call the policies allow
// still meets them.
func ExampleOptions_native() {
	// The build's own hook: never delete or drop a database.
	native := []hooks.Entry{{Hook: hooks.HookFuncs{
		HookName: "no-database-deletes",
		BeforeFunc: func(_ context.Context, call *hooks.Call) (hooks.Verdict, error) {
			if strings.HasPrefix(call.Tool, "delete_") || strings.HasPrefix(call.Tool, "drop_") {
				return hooks.Deny("NoDatabaseDeletes", "This build never deletes databases"), nil
			}
			return hooks.Allow, nil
		},
	}}}

	ws, err := os.MkdirTemp("", "workspace")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(ws) }()
	tool := func(name string) hooks.Tool {
		return hooks.ToolFunc{ToolName: name, Func: func(context.Context, map[string]any) (string, error) {
			return name + " done", nil
		}}
	}
	srv, err := gateway.New(gateway.Options{
		Workspace: ws,
		Tools:     []hooks.Tool{tool("query_database"), tool("delete_database"), tool("drop_database")},
		Audit:     audit.SinkFunc(func(context.Context, audit.Record) error { return nil }),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Native:    native,
		// Callers without a token are accepted as system:anonymous (development only).
		Callers: &authn.Request{AllowAnonymous: true},
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	// The configuration the controller would push (here applied directly): a
	// policy denying drop_*. Both it and the native hook would deny
	// drop_database; the policy, earlier in the list, decides.
	policies, err := policyfile.Parse([]byte(`apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata: {name: no-drops, namespace: default}
spec: {tools: {deny: ["drop_*"]}}
`), "policies.yaml")
	if err != nil {
		panic(err)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, policies)
	for _, o := range outcomes {
		if o.Err != nil {
			panic(o.Err)
		}
	}
	if _, err := srv.Apply(context.Background(), cfg, "example"); err != nil {
		panic(err)
	}

	api := httptest.NewServer(srv.Handler())
	defer api.Close()
	for _, tool := range []string{"query_database", "delete_database", "drop_database"} {
		resp, err := http.Post(api.URL+"/v1/tool-calls", "application/json",
			strings.NewReader(`{"sessionId":"s1","tool":"`+tool+`","arguments":{}}`))
		if err != nil {
			panic(err)
		}
		var r gateway.ToolCallResponse
		err = json.NewDecoder(resp.Body).Decode(&r)
		_ = resp.Body.Close()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s %q\n", tool, r.Status, r.Result)
		if r.Denial != nil {
			denial, _ := json.Marshal(r.Denial)
			fmt.Printf("  denial: %s\n", denial)
		}
	}
	// Output:
	// query_database: succeeded "query_database done"
	// delete_database: denied "Tool execution denied by hook: no-database-deletes"
	//   denial: {"hook":"no-database-deletes","rule":"NoDatabaseDeletes","reason":"This build never deletes databases","enforcementAction":"Deny"}
	// drop_database: denied "Tool execution denied by hook: AutonomyPolicy/default/no-drops"
	//   denial: {"hook":"AutonomyPolicy/default/no-drops","policy":{"kind":"AutonomyPolicy","namespace":"default","name":"no-drops"},"rule":"toolDeny","reason":"Tool \"drop_database\" matches the denied tool pattern \"drop_*\".","enforcementAction":"Deny"}
}
