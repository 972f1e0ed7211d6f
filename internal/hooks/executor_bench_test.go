package hooks_test

import (
	"context"
	"io"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// noopHook allows everything and observes nothing.
type noopHook struct{ name string }

func (h *noopHook) Name() string { return h.name }
func (h *noopHook) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (h *noopHook) After(context.Context, *hooks.Call, *hooks.Result) {}

func noops(n int) []hooks.Entry {
	entries := make([]hooks.Entry, n)
	for i := range entries {
		entries[i] = hooks.Entry{Hook: &noopHook{name: "noop"}}
	}
	return entries
}

func discardAudit() hooks.Entry {
	return hooks.Entry{Hook: audit.New(audit.SinkFunc(func(context.Context, audit.Record) error { return nil }))}
}

// beforePhaseCases are the hook chains whose before phase is benchmarked.
// Add the built-in policy hooks here (AuditLog + Autonomy + ContractScope +
// rate limit) to benchmark the full chain on the same calls.
var beforePhaseCases = []struct {
	name    string
	entries func() []hooks.Entry
}{
	{name: "empty chain", entries: func() []hooks.Entry { return nil }},
	{name: "5 no-op hooks", entries: func() []hooks.Entry { return noops(5) }},
	{name: "AuditLog", entries: func() []hooks.Entry { return []hooks.Entry{discardAudit()} }},
	{name: "AuditLog and 4 no-op hooks", entries: func() []hooks.Entry {
		return append([]hooks.Entry{discardAudit()}, noops(4)...)
	}},
}

// benchCalls are the calls benchmarked; arguments are parsed once, outside the loop.
var benchCalls = []struct {
	name string
	tool string
	args string
}{
	{name: "no path", tool: "web_search", args: `{"query":"go generics"}`},
}

// BenchmarkBeforePhase measures the before phase alone (Executor.Decide) with
// each chain on each call; its allocations are the per-call cost of deciding.
func BenchmarkBeforePhase(b *testing.B) {
	for _, chain := range beforePhaseCases {
		for _, c := range benchCalls {
			b.Run(chain.name+"/"+c.name, func(b *testing.B) {
				e := mustExecutor(b, chain.entries(), nil)
				call := hooks.NewCall(c.tool, c.args)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if res := e.Decide(ctx, call); res.Status != hooks.StatusAllowed {
						b.Fatalf("call was not allowed: %+v", res)
					}
				}
			})
		}
	}
}

// BenchmarkBeforePhaseParallel is BenchmarkBeforePhase from all CPUs at once,
// to show that the executor has no shared contended state.
func BenchmarkBeforePhaseParallel(b *testing.B) {
	e := mustExecutor(b, append([]hooks.Entry{discardAudit()}, noops(4)...), nil)
	call := hooks.NewCall("web_search", `{"query":"go generics"}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if res := e.Decide(ctx, call); res.Status != hooks.StatusAllowed {
				b.Errorf("call was not allowed: %+v", res)
				return
			}
		}
	})
}

// BenchmarkExecute measures a whole call: before phase, a trivial tool, and
// the after phase with the AuditLog writing JSON (to io.Discard) or to a
// sink that drops records.
func BenchmarkExecute(b *testing.B) {
	tools := []hooks.Tool{hooks.ToolFunc{ToolName: "web_search", Func: func(context.Context, map[string]any) (string, error) {
		return "results", nil
	}}}
	cases := []struct {
		name    string
		entries []hooks.Entry
		opts    []hooks.Option
	}{
		{name: "AuditLog discarding records, no timeout", entries: []hooks.Entry{discardAudit()},
			opts: []hooks.Option{hooks.WithToolTimeout(0)}},
		{name: "AuditLog discarding records, default timeout", entries: []hooks.Entry{discardAudit()}},
		{name: "AuditLog writing JSON, default timeout",
			entries: []hooks.Entry{{Hook: audit.New(audit.NewJSONSink(io.Discard))}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := mustExecutor(b, c.entries, tools, c.opts...)
			call := hooks.NewCall("web_search", `{"query":"go generics"}`)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := e.Execute(ctx, call); res.Status != hooks.StatusSucceeded {
					b.Fatalf("call did not succeed: %+v", res)
				}
			}
		})
	}
}

// BenchmarkParseArgs measures parsing a typical argument object once per call.
func BenchmarkParseArgs(b *testing.B) {
	const args = `{"path":"/workspace/src/main.go","offset":120,"limit":200,"encoding":"utf-8"}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hooks.ParseArgs(args); err != nil {
			b.Fatal(err)
		}
	}
}
