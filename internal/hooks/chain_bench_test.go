package hooks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
)

// builtinChain is the benchmark chain: AuditLog, Autonomy with 20
// forbidden globs and 20 shell globs, ContractScope with a scoped contract
// and a budget, and a rate limit.
func builtinChain(b *testing.B, ws string) []hooks.Entry {
	b.Helper()
	forbidden := []string{"**/.env", "**/*.pem", "**/id_rsa*", "**/.git/config", "**/.ssh/**"}
	for i := len(forbidden); i < 20; i++ {
		forbidden = append(forbidden, fmt.Sprintf("%s/secret-%02d/**", ws, i))
	}
	shell := []string{"git status", "git diff *", "git log *", "grep *", "head *", "ls", "ls *", "cat *", "go test *", "go build *"}
	for i := len(shell); i < 20; i++ {
		shell = append(shell, fmt.Sprintf("tool%02d *", i))
	}
	auto, err := autonomy.New(autonomy.Config{Name: "AutonomyPolicy/bench/coding", WorkspaceRoot: ws, WorkspaceOnly: true,
		ForbiddenPathGlobs: forbidden, AllowShell: true, AllowedShellCommands: shell})
	if err != nil {
		b.Fatal(err)
	}
	scope, err := contract.New(contract.Config{Name: "ContractPolicy/bench/budget", Contract: &contract.Contract{
		MaxToolCalls: contract.MaxToolCallsLimit,
		AllowedPaths: []string{ws},
		ScopedCapabilities: []contract.Capability{
			{Tool: "read_file", AllowedPaths: []string{ws}}, {Tool: "shell"}, {Tool: "web_search"},
		},
	}, WorkspaceRoot: ws})
	if err != nil {
		b.Fatal(err)
	}
	limit, err := ratelimit.New(ratelimit.Config{Name: "ContractPolicy/bench/rate", Rules: []ratelimit.Rule{{Tools: "*", PerSenderPerMinute: 1 << 30}}})
	if err != nil {
		b.Fatal(err)
	}
	return []hooks.Entry{discardAudit(), {Hook: auto}, {Hook: scope}, {Hook: limit}}
}

// BenchmarkBuiltinChain measures the whole decision (before phase, then the
// after phase that settles the budget and writes the audit record to a
// discarding sink) through the built-in chain on the three calls.
func BenchmarkBuiltinChain(b *testing.B) {
	benchBuiltinChain(b)
}

// BenchmarkBuiltinChainTraced is BenchmarkBuiltinChain with tracing on:
// every decision sampled (AlwaysSample) and its spans handed to an exporter
// that drops them.
func BenchmarkBuiltinChainTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	benchBuiltinChain(b, hooks.WithTracerProvider(tp))
}

// benchBuiltinChain runs the calls of BenchmarkBuiltinChain through an
// executor built with opts.
func benchBuiltinChain(b *testing.B, opts ...hooks.Option) {
	ws := b.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "src", "pkg", "sub"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "src", "pkg", "sub", "main.go"), []byte("package sub\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	e := mustExecutor(b, builtinChain(b, ws), nil, opts...)
	calls := []struct{ name, tool, args string }{
		{"no path", "web_search", `{"query":"go generics"}`},
		{"read_file with a 4-segment path", "read_file", `{"path":"src/pkg/sub/main.go"}`},
		{"3-command shell pipeline", "shell", `{"command":"git log --oneline | grep fix | head -n 5","cwd":"src"}`},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			call := hooks.NewCall(c.tool, c.args)
			call.SessionID, call.SenderID = "bench-session", "bench-sender"
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := e.Evaluate(ctx, call); res.Status != hooks.StatusAllowed {
					b.Fatalf("call was not allowed: %+v", res.Denial)
				}
			}
		})
	}
}
