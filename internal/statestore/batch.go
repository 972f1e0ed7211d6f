package statestore

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching: the reservations of calls that arrive together are sent to the
// server in one pipeline (one write, one read on each side) instead of one
// round trip each. Each of batchWorkers goroutines takes the reservations
// waiting when it is free, up to maxBatch, so a lone call goes out at once
// and a busy gateway sends fewer, fuller writes.
const (
	batchWorkers = 4
	maxBatch     = 64
)

// reserveOp is one reservation waiting to be sent.
type reserveOp struct {
	deadline time.Time
	keys     []string
	args     []any
	cmd      *redis.Cmd
	// done is closed when out and err are set.
	done chan struct{}
	out  string
	err  error
}

// batcher sends reserveOps in pipelines.
type batcher struct {
	client  *redis.Client
	ops     chan *reserveOp
	stopped chan struct{}
}

func newBatcher(client *redis.Client) *batcher {
	b := &batcher{client: client, ops: make(chan *reserveOp, batchWorkers*maxBatch), stopped: make(chan struct{})}
	for range batchWorkers {
		go b.work()
	}
	return b
}

func (b *batcher) stop() { close(b.stopped) }

// reserve sends op with the reservations waiting beside it and returns its
// reply; it gives up when ctx ends (the reservation may still be sent).
func (b *batcher) reserve(ctx context.Context, op *reserveOp) (string, error) {
	op.done = make(chan struct{})
	select {
	case b.ops <- op:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case <-op.done:
		return op.out, op.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (b *batcher) work() {
	batch := make([]*reserveOp, 0, maxBatch)
	for {
		select {
		case <-b.stopped:
			return
		case op := <-b.ops:
			batch = append(batch[:0], op)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case op := <-b.ops:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		b.send(batch)
	}
}

// send runs batch in one pipeline, bounded by its earliest deadline, and
// answers each reservation.
func (b *batcher) send(batch []*reserveOp) {
	deadline := batch[0].deadline
	for _, op := range batch[1:] {
		if op.deadline.Before(deadline) {
			deadline = op.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, _ = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, op := range batch {
			op.cmd = reserveScript.EvalSha(ctx, p, op.keys, op.args...)
		}
		return nil
	})
	for _, op := range batch {
		op.out, op.err = op.cmd.Text()
		if op.err != nil && strings.HasPrefix(op.err.Error(), "NOSCRIPT") {
			// The server lost its scripts (restarted, SCRIPT FLUSH) since
			// the last health check loaded them: send this one whole.
			op.out, op.err = reserveScript.Eval(ctx, b.client, op.keys, op.args...).Text()
		}
		close(op.done)
	}
}
