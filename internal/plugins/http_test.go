package plugins

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// denyShellHandler answers hook_before like the deny-shell plugin, and hook_after with null.
func denyShellHandler(_ http.ResponseWriter, req *request) any {
	if req.Method == methodBefore && req.Params.ToolName == "shell" {
		return map[string]any{"allow": false, "reason": "no shell over http"}
	}
	return true
}

func TestHTTPPluginDecides(t *testing.T) {
	var rs rpcServer
	srv := httptest.NewServer(rs.handler(denyShellHandler))
	defer srv.Close()
	m := newManager(t, Options{})
	h := spec("http-deny-shell", Spec{HTTP: &HTTPSpec{URL: srv.URL}})
	ex := executor(t, m, h)
	res := ex.Execute(context.Background(), newCall("shell", `{"command":"ls"}`))
	if res.Status != hooks.StatusDenied || res.Denial.Rule != RuleDenied || res.Denial.Reason != "no shell over http" {
		t.Fatalf("shell: %s %+v; want denied with the plugin's reason", res.Status, res.Denial)
	}
	if res := ex.Execute(context.Background(), newCall("read_file", `{}`)); res.Status != hooks.StatusSucceeded {
		t.Fatalf("read_file: %s %+v", res.Status, res.Denial)
	}
	eventually(t, "the after-event arrives", func() bool { return rs.count(methodAfter) == 1 })
}

func TestHTTPPluginOverTLSWithACABundle(t *testing.T) {
	var rs rpcServer
	srv := httptest.NewTLSServer(rs.handler(denyShellHandler))
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	m := newManager(t, Options{})

	trusted := build(t, m, spec("tls", Spec{HTTP: &HTTPSpec{URL: srv.URL, CABundle: caPEM}}))
	v, err := trusted.Before(context.Background(), newCall("shell", `{}`))
	if err != nil || v.Allowed || v.Reason != "no shell over http" {
		t.Fatalf("verdict %+v, error %v; want the plugin's denial over TLS", v, err)
	}

	untrusted := build(t, m, spec("tls-no-ca", Spec{HTTP: &HTTPSpec{URL: srv.URL}}))
	_, err = untrusted.Before(context.Background(), newCall("shell", `{}`))
	wantKind(t, err, KindUnavailable)
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error %q does not say the certificate is not trusted", err)
	}

	if _, err := m.Build(spec("bad-ca", Spec{HTTP: &HTTPSpec{URL: srv.URL, CABundle: "junk"}})); err == nil {
		t.Fatal("a CA bundle without a certificate was accepted")
	}
}

func TestHTTPConnectionsAreReused(t *testing.T) {
	var rs rpcServer
	srv := httptest.NewUnstartedServer(rs.handler(denyShellHandler))
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	m := newManager(t, Options{})
	hk := build(t, m, spec("keepalive", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}}))
	for range 20 {
		if _, err := hk.Before(context.Background(), newCall("read_file", `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 sequential calls opened %d connections, want 1", n)
	}
}

func TestHTTPFailureKinds(t *testing.T) {
	tests := []struct {
		name   string
		handle func(w http.ResponseWriter, req *request) any
		want   Kind
	}{
		{"a server error is pluginError", func(w http.ResponseWriter, _ *request) any {
			http.Error(w, "boom", http.StatusInternalServerError)
			return nil
		}, KindError},
		{"an error reply is pluginError", func(w http.ResponseWriter, req *request) any {
			_, _ = w.Write([]byte(`{"id":"` + req.ID + `","error":{"code":-1,"message":"nope"}}`))
			return nil
		}, KindError},
		{"a body that is not JSON is pluginBadReply", func(w http.ResponseWriter, _ *request) any {
			_, _ = w.Write([]byte("<html>"))
			return nil
		}, KindBadReply},
		{"a non-boolean allow is pluginBadReply", func(http.ResponseWriter, *request) any {
			return map[string]any{"allow": "yes"}
		}, KindBadReply},
		{"a string result is pluginBadReply", func(http.ResponseWriter, *request) any { return "allow" }, KindBadReply},
		{"an ALLOW beside allow is pluginBadReply", func(w http.ResponseWriter, req *request) any {
			_, _ = w.Write([]byte(`{"id":"` + req.ID + `","result":{"allow":false,"ALLOW":true}}`))
			return nil
		}, KindBadReply},
		{"a second result is pluginBadReply", func(w http.ResponseWriter, req *request) any {
			_, _ = w.Write([]byte(`{"id":"` + req.ID + `","result":{"allow":false},"result":true}`))
			return nil
		}, KindBadReply},
		{"a Result beside result is pluginBadReply", func(w http.ResponseWriter, req *request) any {
			_, _ = w.Write([]byte(`{"id":"` + req.ID + `","result":true,"Result":false}`))
			return nil
		}, KindBadReply},
		{"a slow server is pluginTimeout", func(http.ResponseWriter, *request) any {
			time.Sleep(time.Second)
			return true
		}, KindTimeout},
	}
	m := newManager(t, Options{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs rpcServer
			srv := httptest.NewServer(rs.handler(tt.handle))
			defer srv.Close()
			h := spec("http-"+string(rune('a'+i)), Spec{TimeoutMillis: 200, HTTP: &HTTPSpec{URL: srv.URL}})
			_, err := build(t, m, h).Before(context.Background(), newCall("read_file", `{}`))
			wantKind(t, err, tt.want)
			if got := failures(m, h.Name, tt.want); got != 1 {
				t.Errorf("%s failures = %v, want 1", tt.want, got)
			}
		})
	}
	t.Run("a closed port is pluginUnavailable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := build(t, m, spec("http-closed", Spec{HTTP: &HTTPSpec{URL: srv.URL}})).
			Before(context.Background(), newCall("read_file", `{}`))
		wantKind(t, err, KindUnavailable)
	})
}

// clock is a settable clock for the circuit breaker.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestCircuitBreakerOpensAndHalfOpens(t *testing.T) {
	var healthy atomic.Bool
	var rs rpcServer
	srv := httptest.NewServer(rs.handler(func(w http.ResponseWriter, _ *request) any {
		if !healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return nil
		}
		return true
	}))
	defer srv.Close()
	clk := &clock{now: time.Unix(1000, 0)}
	m := newManager(t, Options{BreakerThreshold: 3, BreakerCooldown: 10 * time.Second, Now: clk.Now})
	h := spec("flaky", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}})
	hk := build(t, m, h)
	call := func() error {
		_, err := hk.Before(context.Background(), newCall("read_file", `{}`))
		return err
	}
	state := func() State { return m.States()[h.Name] }

	for range 3 {
		wantKind(t, call(), KindError)
	}
	if state() != StateOpen {
		t.Fatalf("after 3 failures the state is %s, want open", state())
	}
	wantKind(t, call(), KindCircuitOpen)
	if n := rs.count(methodBefore); n != 3 {
		t.Fatalf("the open circuit called the plugin: %d calls, want 3", n)
	}

	clk.advance(10 * time.Second)
	if state() != StateHalfOpen {
		t.Fatalf("after the cool-down the state is %s, want half-open", state())
	}
	wantKind(t, call(), KindError) // the probe fails: open again
	if state() != StateOpen {
		t.Fatalf("after a failed probe the state is %s, want open", state())
	}
	wantKind(t, call(), KindCircuitOpen)

	clk.advance(10 * time.Second)
	healthy.Store(true)
	if err := call(); err != nil { // the probe succeeds: closed
		t.Fatalf("probe: %v", err)
	}
	if state() != StateClosed {
		t.Fatalf("after a good probe the state is %s, want closed", state())
	}
	if got := failures(m, h.Name, KindCircuitOpen); got != 2 {
		t.Errorf("circuitOpen failures = %v, want 2", got)
	}
}

func TestCircuitOpenAppliesTheFailurePolicyAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	m := newManager(t, Options{BreakerThreshold: 1, BreakerCooldown: time.Hour})
	open := spec("open-ignore", Spec{Before: true, FailOpen: true, HTTP: &HTTPSpec{URL: srv.URL}})
	closed := spec("open-fail", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL + "/x"}})
	for _, h := range []Ref{open, closed} {
		ex := executor(t, m, h)
		_ = ex.Execute(context.Background(), newCall("read_file", `{}`)) // opens the circuit
		res := ex.Execute(context.Background(), newCall("read_file", `{}`))
		if h.Spec.FailOpen && res.Status != hooks.StatusSucceeded {
			t.Errorf("%s: %s %+v; want succeeded", h.Name, res.Status, res.Denial)
		}
		if !h.Spec.FailOpen && (res.Status != hooks.StatusDenied || !strings.Contains(res.Denial.Reason, string(KindCircuitOpen))) {
			t.Errorf("%s: %s %+v; want denied as circuitOpen", h.Name, res.Status, res.Denial)
		}
	}
}

func TestAfterQueueOverflowIsCounted(t *testing.T) {
	release := make(chan struct{})
	var rs rpcServer
	srv := httptest.NewServer(rs.handler(func(_ http.ResponseWriter, req *request) any {
		if req.Method == methodAfter {
			<-release
		}
		return true
	}))
	defer srv.Close()
	defer close(release)
	m := newManager(t, Options{AfterQueueSize: 2})
	h := spec("slow-after", Spec{After: true, TimeoutMillis: 30000, HTTP: &HTTPSpec{URL: srv.URL}})
	hk := build(t, m, h)
	res := &hooks.Result{Status: hooks.StatusSucceeded, Output: "ok", Duration: time.Millisecond}
	hk.After(context.Background(), newCall("read_file", `{}`), res)
	eventually(t, "the first after-event reaches the plugin", func() bool { return rs.count(methodAfter) == 1 })
	start := time.Now()
	for range 9 {
		hk.After(context.Background(), newCall("read_file", `{}`), res)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("queueing after-events blocked for %s", d)
	}
	if got := counter(m.m.afterDropped.WithLabelValues(h.Name)); got != 7 {
		t.Fatalf("dropped after-events = %v, want 7 (1 in flight, 2 queued)", got)
	}
}

func TestToolFilter(t *testing.T) {
	var rs rpcServer
	srv := httptest.NewServer(rs.handler(func(http.ResponseWriter, *request) any { return false }))
	defer srv.Close()
	m := newManager(t, Options{})
	h := spec("filtered", Spec{Tools: []string{"shell", "write_*"}, HTTP: &HTTPSpec{URL: srv.URL}})
	ex := executor(t, m, h)
	tests := []struct {
		tool   string
		denied bool
	}{
		{"read_file", false},
		{"shell", true},
		{"write_file", true},
	}
	for _, tt := range tests {
		res := ex.Execute(context.Background(), newCall(tt.tool, `{}`))
		if (res.Status == hooks.StatusDenied) != tt.denied {
			t.Errorf("%s: status %s, want denied=%v", tt.tool, res.Status, tt.denied)
		}
	}
	if n := rs.count(methodBefore); n != 2 {
		t.Fatalf("the plugin was asked %d times, want 2 (read_file is outside its tools)", n)
	}
	if n := rs.count(methodAfter); n != 0 {
		t.Fatalf("the plugin got %d after-events for tools it denied or does not match", n)
	}
}
