package statestore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/statestore"
	"github.com/toolhooks/toolhooks/internal/statestore/redistest"
)

// BenchmarkReserve is one allowed reservation (a session budget and a rate
// limit) per op against a loopback redis-server, from b.RunParallel's
// goroutines over 64 sessions: the client's cost per call and the
// throughput of one store.
func BenchmarkReserve(b *testing.B) {
	srv := redistest.Start(b, "--appendfsync", "everysec")
	b.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer func() { _ = c.Close() }()
		out, _ := c.Info(context.Background(), "commandstats").Result()
		b.Log(out)
	})
	s, err := statestore.New(statestore.Options{Address: srv.Addr, Timeout: generous})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	for s.Ready() != nil {
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			c := call(fmt.Sprint("s", i%64), "alice", "read_file")
			r := &contract.Reservation{ID: fmt.Sprint("r", i), Call: c, Policy: "p", Session: c.SessionID, MaxToolCalls: 1 << 30,
				RateRules: "rules", RatePerMinute: 1 << 30}
			if v, err := s.Reserve(context.Background(), r); err != nil || !v.Allowed {
				b.Fatalf("%+v %v", v, err)
			}
		}
	})
}
