// Package opa measures OPA evaluating a Rego version of the built-in
// benchmark chain's policy on the same 3-command shell call, the figure
// the built-in chain (go test -bench BuiltinChain ./internal/hooks) is
// compared with. It is its own module so that OPA is no dependency of the
// project: cd hack/bench/opa && go test -bench . -benchmem
package opa

import (
	"context"
	_ "embed"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

//go:embed policy.rego
var policy string

func BenchmarkOPAShellPipeline(b *testing.B) {
	ctx := context.Background()
	q, err := rego.New(rego.Query("data.toolhooks.allow"), rego.Module("policy.rego", policy)).PrepareForEval(ctx)
	if err != nil {
		b.Fatal(err)
	}
	input := map[string]any{
		"workspace": "/workspace",
		"tool":      "shell",
		"arguments": map[string]any{"command": "git log --oneline | grep fix | head -n 5", "cwd": "src"},
	}
	deny := map[string]any{
		"workspace": "/workspace",
		"tool":      "shell",
		"arguments": map[string]any{"command": "cat .env | grep KEY", "cwd": "src"},
	}
	for name, in := range map[string]map[string]any{"allowed": input, "denied": deny} {
		rs, err := q.Eval(ctx, rego.EvalInput(in))
		if err != nil || len(rs) != 1 || rs[0].Expressions[0].Value.(bool) != (name == "allowed") {
			b.Fatalf("%s call: %v %v", name, rs, err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		rs, err := q.Eval(ctx, rego.EvalInput(input))
		if err != nil || len(rs) != 1 || rs[0].Expressions[0].Value != true {
			b.Fatalf("the call was not allowed: %v %v", rs, err)
		}
	}
}
