package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
)

// BenchmarkToolCallResult4K measures POST /v1/tool-calls of read_file on a
// 4 KB source file over loopback HTTP with the built-in chain, without and
// with a result policy scanning read_file's result with the secrets rule
// set, one request in flight: the p50 and p99 latency the client sees, so
// the difference is what the scan adds.
// Run: go test -run '^$' -bench ToolCallResult4K -benchmem ./internal/gateway
func BenchmarkToolCallResult4K(b *testing.B) {
	for _, scan := range []bool{false, true} {
		b.Run(fmt.Sprintf("resultPolicy=%v", scan), func(b *testing.B) { benchToolCallResult(b, scan) })
	}
}

func benchToolCallResult(b *testing.B, scan bool) {
	srv, _ := benchGateway(b)
	ws := specOf[*autonomy.Config](b, srv.Config().Hooks[1]).WorkspaceRoot
	// 4 KB of ordinary Go source: the standard library's HTTP server.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "src", "net", "http", "server.go"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "src", "main.go"), src[20000:20000+4096], 0o644); err != nil {
		b.Fatal(err)
	}
	if scan {
		cfg := *srv.Config()
		cfg.Hooks = append(slices.Clone(cfg.Hooks), gatewayconfig.Hook{Name: "ResultPolicy/default/secrets", Kind: resultscan.KindName,
			Spec: gatewayconfig.MarshalSpec(&resultscan.Spec{Tools: []string{"read_file"}, Detectors: []string{resultscan.SetSecrets}})})
		cfg.Revision, cfg.IssuedAt = "", cfg.IssuedAt+1
		if _, err := srv.Apply(b.Context(), &cfg, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	client := hs.Client()
	body := []byte(`{"sessionId":"s","tool":"read_file","arguments":{"path":"src/main.go"}}`)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/tool-calls", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", benchAuthorization)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		lat = append(lat, time.Since(t0))
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"status":"succeeded"`)) || len(out) < 4096 {
			b.Fatalf("%d %.200s", resp.StatusCode, out)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
