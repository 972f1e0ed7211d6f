package gateway

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// DenialSink is told of every denial and every warn-mode would-deny
// (d.Action == hooks.ActionWarn), for example to record it as a Kubernetes
// Event on the policy object (d.Policy). Denials the gateway makes itself
// (hook "gateway", "arguments" or "context") carry no policy. Calls are made
// one at a time from a single goroutine, off the request path, with a
// context that ends when the Server is closed; a slow sink only makes the
// gateway drop denials (counted in toolhooks_denial_events_dropped_total),
// never slows a call. call is a copy without the arguments: their content
// never leaves the gateway this way.
type DenialSink interface {
	Denied(ctx context.Context, call *hooks.Call, d hooks.Decision)
}

// DenialSinkFunc adapts a function to DenialSink.
type DenialSinkFunc func(ctx context.Context, call *hooks.Call, d hooks.Decision)

// Denied calls f.
func (f DenialSinkFunc) Denied(ctx context.Context, call *hooks.Call, d hooks.Decision) {
	f(ctx, call, d)
}

// ResultSink is an optional interface of a DenialSink that is also told
// what the result policies found in a call's result: f is one policy's
// findings (rules, counts and bytes, never the values), and withheld its
// decision when that policy withheld the result. Calls are made as the
// DenialSink's are.
type ResultSink interface {
	ResultFiltered(ctx context.Context, call *hooks.Call, f hooks.ResultFiltering, withheld *hooks.Decision)
}

type denialEvent struct {
	call *hooks.Call
	d    hooks.Decision
	// filtering, when set, makes this a ResultSink event (d unused but
	// for withheld).
	filtering *hooks.ResultFiltering
	withheld  bool
}

// denialQueue hands denials to a DenialSink from one goroutine.
type denialQueue struct {
	sink    DenialSink
	mask    func(context.Context, string) string // masks reasons; nil keeps them
	ch      chan denialEvent
	log     *slog.Logger
	m       *metrics
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	closing sync.Once
}

func newDenialQueue(sink DenialSink, size int, mask func(context.Context, string) string, log *slog.Logger, m *metrics) *denialQueue {
	q := &denialQueue{sink: sink, mask: mask, log: log, m: m, done: make(chan struct{})}
	if sink == nil {
		close(q.done)
		return q
	}
	q.ch = make(chan denialEvent, size)
	q.ctx, q.cancel = context.WithCancel(context.Background())
	go q.run()
	return q
}

// report queues the denial, the warnings and the result filters' findings
// of res, dropping what does not fit.
func (q *denialQueue) report(call *hooks.Call, res *hooks.Result) {
	if q.sink == nil || (res.Denial == nil && len(res.Warnings) == 0 && len(res.Filtering) == 0) {
		return
	}
	c := *call
	c.Args, c.ArgsJSON, c.ArgsErr = nil, "", nil
	if res.Denial != nil {
		q.enqueue(denialEvent{call: &c, d: *res.Denial})
	}
	for _, w := range res.Warnings {
		q.enqueue(denialEvent{call: &c, d: w})
	}
	if _, ok := q.sink.(ResultSink); !ok {
		return
	}
	for i := range res.Filtering {
		f := res.Filtering[i]
		withheld := res.Withheld != nil && res.Withheld.Hook == f.Hook
		if len(f.Findings) == 0 && !withheld {
			continue // scanned, nothing found
		}
		ev := denialEvent{call: &c, filtering: &f, withheld: withheld}
		if withheld {
			ev.d = *res.Withheld
		}
		q.enqueue(ev)
	}
}

func (q *denialQueue) enqueue(ev denialEvent) {
	select {
	case q.ch <- ev:
	default:
		q.m.droppedDenials.Inc()
	}
}

func (q *denialQueue) run() {
	defer close(q.done)
	for {
		select {
		case <-q.ctx.Done():
			return
		case ev := <-q.ch:
			q.deliver(ev)
		}
	}
}

func (q *denialQueue) deliver(ev denialEvent) {
	defer func() {
		if r := recover(); r != nil {
			q.log.Error("Denial sink panicked", "hook", ev.d.Hook, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if q.mask != nil {
		ev.d.Reason = q.mask(q.ctx, ev.d.Reason)
	}
	if ev.filtering != nil {
		var withheld *hooks.Decision
		if ev.withheld {
			withheld = &ev.d
		}
		q.sink.(ResultSink).ResultFiltered(q.ctx, ev.call, *ev.filtering, withheld)
		return
	}
	q.sink.Denied(q.ctx, ev.call, ev.d)
}

func (q *denialQueue) close() {
	q.closing.Do(func() {
		if q.cancel != nil {
			q.cancel()
		}
	})
	<-q.done
}
