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
	// Counted around the capped listener: a connection is open from the
	// moment Accept hands it out until its Close begins, so a place given
	// back by the cap is never counted twice. (The server's ConnState hook
	// reports a close only after the place is given back, and would.)
	var open, peak atomic.Int64
	counted := &countingListener{Listener: ln, open: &open, peak: &peak}
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
	}
	go func() { _ = hs.Serve(counted) }()
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

// countingListener counts the connections it has handed out and not yet
// begun to close, and the most at once.
type countingListener struct {
	net.Listener
	open, peak *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countedConn{Conn: c, open: l.open}, nil
}

type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
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
