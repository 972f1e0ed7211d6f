package plugins

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// benchHooks returns a before-only hook for an allow-all stdio (JavaScript,
// through the bridge) and HTTP plugin on loopback.
func benchHooks(b *testing.B) map[string]hooks.Hook {
	m := newManager(b, Options{})
	var rs rpcServer
	srv := httptest.NewServer(rs.handler(func(http.ResponseWriter, *request) any { return true }))
	b.Cleanup(srv.Close)
	return map[string]hooks.Hook{
		"stdio": build(b, m, spec("bench-stdio", Spec{Before: true, Stdio: nodePlugin(b, "allow.mjs", nil)})),
		"http":  build(b, m, spec("bench-http", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}})),
	}
}

// BenchmarkBefore measures one plugin's before-phase call, one at a time,
// and reports its p50 and p99 latency.
func BenchmarkBefore(b *testing.B) {
	for _, name := range []string{"stdio", "http"} {
		b.Run(name, func(b *testing.B) {
			hk := benchHooks(b)[name]
			call := newCall("read_file", `{"path":"a.txt"}`)
			ctx := context.Background()
			for range 200 { // warm up: process start, JIT, connections
				if _, err := hk.Before(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				v, err := hk.Before(ctx, call)
				lat = append(lat, time.Since(start))
				if err != nil || !v.Allowed {
					b.Fatalf("verdict %+v, error %v", v, err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkBeforeParallel measures throughput with 64 concurrent calls on one plugin.
func BenchmarkBeforeParallel(b *testing.B) {
	for _, name := range []string{"stdio", "http"} {
		b.Run(name, func(b *testing.B) {
			hk := benchHooks(b)[name]
			ctx := context.Background()
			for range 200 {
				if _, err := hk.Before(ctx, newCall("read_file", `{}`)); err != nil {
					b.Fatal(err)
				}
			}
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				call := newCall("read_file", `{"path":"a.txt"}`)
				for pb.Next() {
					if v, err := hk.Before(ctx, call); err != nil || !v.Allowed {
						b.Errorf("verdict %+v, error %v", v, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkTimeoutOvershoot measures how far past its 200 ms timeout a call
// to a plugin that never answers in time returns (the bound: 50 ms).
func BenchmarkTimeoutOvershoot(b *testing.B) {
	m := newManager(b, Options{BreakerThreshold: 1 << 30})
	const timeout = 200 * time.Millisecond
	hk := build(b, m, spec("bench-sleepy", Spec{Before: true, TimeoutMillis: timeout.Milliseconds(),
		Stdio: nodePlugin(b, "sleepy.mjs", map[string]string{"SLEEP_MS": "5000"})}))
	ctx := context.Background()
	// Start the process: node's start-up can itself exceed the timeout.
	for i := 0; ; i++ {
		if _, err := hk.Before(ctx, newCall("read_file", `{}`)); err == nil {
			break
		} else if i == 50 {
			b.Fatalf("plugin never answered: %v", err)
		}
	}
	var worst time.Duration
	for b.Loop() {
		start := time.Now()
		_, err := hk.Before(ctx, newCall("slow", `{}`))
		over := time.Since(start) - timeout
		if FailureKind(err) != KindTimeout {
			b.Fatalf("error %v, want a timeout", err)
		}
		worst = max(worst, over)
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-overshoot-ms")
}
