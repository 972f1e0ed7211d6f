package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// errNoRedis explains what to do when redis-server is missing.
var errNoRedis = errors.New("the cluster demo runs a real redis-server as the gateways' shared state store " +
	"(budgets and rate limits exact across them), and none is installed: run hack/test-deps.sh, " +
	"which installs Debian's redis-server (the plain `make demo` does not need it)")

// redisServer is the redis-server of the cluster demo.
type redisServer struct {
	*process
	addr string
}

// startRedis runs redis-server on 127.0.0.1:port with its data under dir
// (no snapshots, an append-only file, never evicting a key) and waits until
// it answers PING. It is stopped like the demo's other processes.
func startRedis(ctx context.Context, port int, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedis
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startProcess(ctx, "redis-server", bin, []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "yes", "--maxmemory-policy", "noeviction",
		"--daemonize", "no", "--logfile", "",
	}, nil)
	if err != nil {
		return nil, err
	}
	r := &redisServer{process: p, addr: addr}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(addr)
		if err == nil {
			return r, nil
		}
		if exited := p.exited(); exited != nil {
			return nil, fmt.Errorf("%w\n%s", exited, tail(p.stdout.String()))
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("redis-server on %s does not answer PING after 10s (%v); its log:\n%s", addr, err, tail(p.stdout.String()))
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ping sends PING to the Redis server at addr and expects PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// redisDir is where the demo's redis-server keeps its data.
func redisDir(d demoDirs) string { return filepath.Join(d.root, "redis") }
