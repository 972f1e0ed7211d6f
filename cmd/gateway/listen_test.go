package main

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// Many keep-alive clients at once are served at most maxConns connections
// at a time; the others wait and are served as connections close.
func TestListenCapsConcurrentConnections(t *testing.T) {
	const maxConns, clients = 2, 12
	ln, err := listen("127.0.0.1:0", maxConns)
	if err != nil {
		t.Fatal(err)
	}
	var open, peak atomic.Int64
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				n := open.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		},
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{}} // its own connection
			defer c.CloseIdleConnections()
			for range 3 {
				resp, err := c.Get("http://" + ln.Addr().String() + "/")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > maxConns || p == 0 {
		t.Errorf("%d connections served at once, want at most %d", p, maxConns)
	}
}
