package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many keep-alive clients at once are served at most maxConns connections
// at a time; the others wait and are served as connections close.
func TestListenCapsConcurrentConnections(t *testing.T) {
	const maxConns, clients = 2, 12
	ln, err := listen("127.0.0.1:0", maxConns, 0)
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

// One client address holds at most perIP connections; the ones beyond are
// closed as they arrive, and a place comes back when a connection closes.
func TestListenCapsConnectionsPerAddress(t *testing.T) {
	const perIP = 3
	ln, err := listen("127.0.0.1:0", 100, perIP)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	get := func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	var held []net.Conn
	for i := range perIP {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if err := get(c); err != nil {
			t.Fatalf("connection %d within the cap: %v", i, err)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := get(over); err == nil {
		t.Error("a connection over the address's cap was served")
	}
	_ = over.Close()
	_ = held[0].Close()
	// The place comes back once the server has seen the close.
	var lastErr error
	for range 200 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		lastErr = get(c)
		_ = c.Close()
		if lastErr == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no connection served after one of the address's closed: %v", lastErr)
}
