package statestore

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// Reservations go to the server through a few connections of their own,
// each pipelined without pause: a writer goroutine sends every reservation
// waiting for it in one write, without waiting for the replies of earlier
// writes, and a reader goroutine matches the replies to them in order. So
// no reservation waits for another's round trip, and a busy gateway sends
// fewer, fuller writes.
//
// A reservation's deadline measures the store, not the gateway: its clock
// starts when the reservation is written. The script refuses to reserve
// once the server's clock has passed the deadline (mapped onto the
// server's clock by the health checks), so a reservation the server runs
// late takes nothing, whenever its reply is read. A waiting call gives up
// only when the store has sent nothing since the reservation was written
// for a whole deadline: a reply waiting in the socket because the gateway's
// own goroutines were busy is read, not counted against the store.
const (
	// maxPipelines bounds the connections of reservations: one per CPU the
	// gateway may use, as each has a writer and a reader goroutine.
	maxPipelines = 4
	// maxWrite is the most reservations sent in one write.
	maxWrite = 256
	// queueLen is the most reservations waiting to be written on one
	// connection; beyond it a call is refused unsent (the server is not
	// taking what it is sent).
	queueLen = 4096
	// dialTimeout bounds connecting and authenticating.
	dialTimeout = time.Second
)

// reserveOp is one reservation.
type reserveOp struct {
	keys []string
	args []string
	// deadline is the server-clock time (microseconds) after which the
	// script must not reserve, set when op is written; 0 when the server's
	// clock is not known yet.
	deadline int64

	// sent is when the op was written (UnixNano; 0 before); seen the
	// pipeline's bytes read when it was last checked.
	sent atomic.Int64
	seen atomic.Int64

	// budget is set when the reservation takes a session slot, which a
	// release can give back.
	budget bool

	// done is closed when out and err are set, once.
	done  chan struct{}
	state atomic.Int32 // opWaiting, opAnswered, opAbandoned
	out   string
	err   error
}

const (
	opWaiting int32 = iota
	opAnswered
	// opAbandoned: its caller gave up on it and denied the call; whatever
	// the server took for it is given back.
	opAbandoned
)

// answer sets op's outcome unless it has one, and reports whether it did.
func (op *reserveOp) answer(out string, err error) bool {
	if op.state.CompareAndSwap(opWaiting, opAnswered) {
		op.out, op.err = out, err
		close(op.done)
		return true
	}
	return false
}

// abandon marks op given up on unless it has been answered, and reports
// whether it did.
func (op *reserveOp) abandon() bool { return op.state.CompareAndSwap(opWaiting, opAbandoned) }

// settle answers op with the server's reply; when op's caller has given up
// on it, it gives back the session slot that an allowed reply took.
func (ps *pipelines) settle(op *reserveOp, out string, err error) {
	if !op.answer(out, err) && err == nil && op.budget && strings.HasPrefix(out, "ok") {
		ps.release(op)
	}
}

// failed answers op, written on a connection that failed before its reply
// came, and gives back whatever the server may have taken for it: its
// caller is told nothing was taken.
func (ps *pipelines) failed(op *reserveOp, err error) {
	op.answer("", notSent{err})
	if op.budget {
		ps.release(op)
	}
}

// dialer connects and authenticates one pipeline connection.
type dialer struct {
	addr               string
	username, password string
	db                 int
	tls                *tls.Config
}

// pipelines are the connections reservations are sent on.
type pipelines struct {
	pipes   []*pipeline
	next    atomic.Uint64
	timeout time.Duration
	sha     string
	// fallback runs a reservation whose script the server lost (NOSCRIPT)
	// by its text, on another connection.
	fallback func(ctx context.Context, op *reserveOp) (string, error)
	// suspect is told of a failure that may be the server's.
	suspect func()
	// serverClock returns the server's clock minus this host's, in
	// microseconds, once a health check has measured it.
	serverClock func() (int64, bool)
	// release gives back the session slot an op took, in the background.
	release func(op *reserveOp)
}

func newPipelines(d dialer, timeout time.Duration, sha string, fallback func(context.Context, *reserveOp) (string, error),
	suspect func(), serverClock func() (int64, bool), release func(*reserveOp)) *pipelines {
	ps := &pipelines{timeout: timeout, sha: sha, fallback: fallback, suspect: suspect, serverClock: serverClock, release: release}
	for range min(max(runtime.GOMAXPROCS(0), 1), maxPipelines) {
		p := &pipeline{ps: ps, dial: d, queue: make(chan *reserveOp, queueLen), stopped: make(chan struct{})}
		ps.pipes = append(ps.pipes, p)
		go p.write()
	}
	return ps
}

func (ps *pipelines) stop() {
	for _, p := range ps.pipes {
		close(p.stopped)
	}
}

// errStalled is the error of a reservation the server did not answer in time.
var errStalled = errors.New("the state store sent nothing for the whole deadline")

// reserve sends op and waits for its reply: until the server answers,
// until it has sent nothing on op's connection for the deadline since op
// was written (or its writer has been stuck in a write that long), or
// until ctx ends. Every error wraps contract.ErrNotSent: an op given up on
// takes nothing, as the script refuses to reserve after the deadline, and
// one that the server took all the same (its reply was on its way) is
// given back when its reply comes or its connection fails.
func (ps *pipelines) reserve(ctx context.Context, op *reserveOp) (string, error) {
	op.done = make(chan struct{})
	p := ps.pipes[ps.next.Add(1)%uint64(len(ps.pipes))]
	select {
	case p.queue <- op:
	default:
		return "", notSent{errors.New("too many reservations waiting to be sent")}
	}
	timer := time.NewTimer(ps.timeout)
	defer timer.Stop()
	due := time.Now().Add(ps.timeout)
	secondLook := false
	for {
		select {
		case <-op.done:
			return op.out, op.err
		case <-ctx.Done():
			if !op.abandon() {
				<-op.done
				return op.out, op.err
			}
			return "", notSent{ctx.Err()}
		case <-timer.C:
		}
		wait, err := p.check(op, ps.timeout)
		if late := time.Since(due); err != nil && !secondLook && late > ps.timeout/10 {
			// This goroutine ran late, the whole process perhaps stopped (a
			// paused VM, a CPU throttled); the server, stopped with it, is
			// given a moment to answer before it is judged.
			secondLook, wait, err = true, ps.timeout/10, nil
		}
		if err != nil {
			if !op.abandon() {
				// The reply came in while this goroutine waited to run.
				<-op.done
				return op.out, op.err
			}
			return "", notSent{err}
		}
		timer.Reset(wait)
		due = time.Now().Add(wait)
	}
}

// pipeline is one connection's writer, and the reader of its current link.
type pipeline struct {
	ps      *pipelines
	dial    dialer
	queue   chan *reserveOp
	stopped chan struct{}

	// link is the current connection (nil before the first or after one
	// broke); only the writer sets it.
	mu   sync.Mutex
	link *link
	// writing is when the writer began the write it is in (UnixNano; 0
	// when it is not writing).
	writing atomic.Int64
}

// link is one connection and the ops written on it, oldest first.
type link struct {
	conn    net.Conn
	raw     syscall.RawConn // of the TCP connection under TLS, for FIONREAD
	mu      sync.Mutex
	pending []*reserveOp
	broken  bool
	// read counts the bytes the reader has read from the connection.
	read atomic.Int64
}

// check decides what a waiting op does when its timer fires: it waits on
// (for how long) while the deadline has not passed since it was written or
// the server is still sending on its connection, and gives up with an error
// when the server has sent nothing for the deadline.
func (p *pipeline) check(op *reserveOp, timeout time.Duration) (time.Duration, error) {
	now := time.Now().UnixNano()
	sent := op.sent.Load()
	if sent == 0 {
		// Still queued in this gateway: not the store's time, unless the
		// writer has been stuck that long writing to it.
		if w := p.writing.Load(); w != 0 && now-w >= int64(timeout) {
			p.ps.suspect()
			return 0, fmt.Errorf("%w: writing to it took longer than the deadline (%s)", errStalled, timeout)
		}
		return timeout, nil
	}
	if left := sent + int64(timeout) - now; left > 0 {
		return time.Duration(left), nil
	}
	p.mu.Lock()
	l := p.link
	p.mu.Unlock()
	if l != nil && l.sending(op) {
		return timeout, nil
	}
	p.ps.suspect()
	return 0, fmt.Errorf("%w (%s)", errStalled, timeout)
}

// sending reports whether the server has sent bytes that the reader has
// not read, or the reader has read some since op's last check.
func (l *link) sending(op *reserveOp) bool {
	if read := l.read.Load(); op.seen.Swap(read) != read {
		return true
	}
	n := 0
	if l.raw != nil {
		_ = l.raw.Control(func(fd uintptr) {
			n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		})
	}
	return n > 0
}

// write sends the queued ops, all that are waiting at once, reconnecting
// when the connection broke.
func (p *pipeline) write() {
	batch := make([]*reserveOp, 0, maxWrite)
	var buf []byte
	for {
		select {
		case <-p.stopped:
			p.mu.Lock()
			if p.link != nil {
				p.link.close()
			}
			p.mu.Unlock()
			return
		case op := <-p.queue:
			batch = append(batch[:0], op)
		}
	fill:
		for len(batch) < maxWrite {
			select {
			case op := <-p.queue:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		// Ops whose callers gave up before they were written are not sent.
		batch = slices.DeleteFunc(batch, func(op *reserveOp) bool { return op.state.Load() == opAbandoned })
		if len(batch) == 0 {
			continue
		}
		p.writing.Store(time.Now().UnixNano())
		l, err := p.connected()
		if err != nil {
			p.writing.Store(0)
			for _, op := range batch {
				op.answer("", notSent{err})
			}
			p.ps.suspect()
			continue
		}
		now := time.Now()
		// The script's deadline: the deadline from now, on the server's clock.
		deadline := int64(0)
		if offset, ok := p.ps.serverClock(); ok {
			deadline = now.Add(p.ps.timeout).UnixMicro() + offset
		}
		if !l.push(batch, now, deadline) {
			p.writing.Store(0)
			for _, op := range batch {
				op.answer("", notSent{errors.New("the connection broke")})
			}
			continue
		}
		buf = buf[:0]
		for _, op := range batch {
			buf = p.appendEvalSha(buf, op)
		}
		_ = l.conn.SetWriteDeadline(now.Add(max(p.ps.timeout, dialTimeout)))
		_, err = l.conn.Write(buf)
		p.writing.Store(0)
		if err != nil {
			// The reader fails every op written on the link.
			l.close()
			p.ps.suspect()
		}
	}
}

// push appends batch to the ops waiting for replies, stamped sent at now
// with the script's deadline, unless the link broke.
func (l *link) push(batch []*reserveOp, now time.Time, deadline int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		return false
	}
	read := l.read.Load()
	for _, op := range batch {
		op.deadline = deadline
		op.sent.Store(now.UnixNano())
		op.seen.Store(read)
	}
	l.pending = append(l.pending, batch...)
	return true
}

func (l *link) close() {
	l.mu.Lock()
	l.broken = true
	l.mu.Unlock()
	_ = l.conn.Close()
}

// connected returns the current link, dialing a new one if there is none
// or it broke.
func (p *pipeline) connected() (*link, error) {
	p.mu.Lock()
	l := p.link
	p.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		broken := l.broken
		l.mu.Unlock()
		if !broken {
			return l, nil
		}
	}
	l, err := p.dial.connect()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.link = l
	p.mu.Unlock()
	go l.readReplies(p.ps)
	return l, nil
}

// appendEvalSha appends op's EVALSHA command, with its deadline as the
// last argument.
func (p *pipeline) appendEvalSha(b []byte, op *reserveOp) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(3+len(op.keys)+len(op.args)+1), 10)
	b = append(b, "\r\n$7\r\nEVALSHA\r\n"...)
	b = appendBulk(b, p.ps.sha)
	b = appendBulk(b, strconv.Itoa(len(op.keys)))
	for _, k := range op.keys {
		b = appendBulk(b, k)
	}
	for _, a := range op.args {
		b = appendBulk(b, a)
	}
	var d [20]byte
	return appendBulk(b, string(strconv.AppendInt(d[:0], op.deadline, 10)))
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, "\r\n"...)
	b = append(b, s...)
	return append(b, "\r\n"...)
}

// readReplies answers the link's ops in order until the connection fails,
// then fails the ops still waiting on it.
func (l *link) readReplies(ps *pipelines) {
	r := bufio.NewReaderSize(countingReader{l}, 16<<10)
	var err error
	for {
		var out string
		var replyErr error
		out, replyErr, err = readReply(r)
		if err != nil {
			break
		}
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.mu.Unlock()
			err = errors.New("a reply to no command")
			break
		}
		op := l.pending[0]
		l.pending[0] = nil
		l.pending = l.pending[1:]
		l.mu.Unlock()
		if replyErr != nil && len(replyErr.Error()) >= 8 && replyErr.Error()[:8] == "NOSCRIPT" {
			// The server lost its scripts (restarted, SCRIPT FLUSH) since
			// the last health check loaded them: send this one whole.
			ps.suspect()
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), ps.timeout)
				defer cancel()
				out, err := ps.fallback(ctx, op)
				if err != nil && !errors.Is(err, redis.Nil) && !isReplyError(err) {
					ps.failed(op, err)
					return
				}
				ps.settle(op, out, err)
			}()
			continue
		}
		ps.settle(op, out, replyErr)
	}
	l.mu.Lock()
	l.broken = true
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	_ = l.conn.Close()
	for _, op := range pending {
		ps.failed(op, fmt.Errorf("the connection to the state store failed: %w", err))
	}
}

// isReplyError reports whether err is the server's error reply (the
// script failed, taking nothing), not a failure to reach it.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

type countingReader struct{ l *link }

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.l.conn.Read(b)
	c.l.read.Add(int64(n))
	return n, err
}

// errProtocol is a reply this client does not expect.
var errProtocol = errors.New("unexpected reply from the state store")

// readReply reads one RESP2 reply: a simple or bulk string or integer as
// out, an error reply as replyErr; err is a failure of the connection.
func readReply(r *bufio.Reader) (out string, replyErr, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return "", nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", nil, errProtocol
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':':
		return string(body), nil, nil
	case '-':
		return "", errors.New(string(body)), nil
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > 1<<20 {
			return "", nil, errProtocol
		}
		if n == -1 {
			return "", errors.New("nil reply"), nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", nil, err
		}
		return string(b[:n]), nil, nil
	}
	return "", nil, errProtocol
}

// connect dials, authenticates and selects the database, and returns the
// link (its reader not started).
func (d dialer) connect() (*link, error) {
	nd := net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	tcp, err := nd.Dial("tcp", d.addr)
	if err != nil {
		return nil, err
	}
	l := &link{conn: tcp}
	if tc, ok := tcp.(*net.TCPConn); ok {
		l.raw, _ = tc.SyscallConn()
	}
	if d.tls != nil {
		cfg := d.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(d.addr)
		}
		tc := tls.Client(tcp, cfg)
		_ = tc.SetDeadline(time.Now().Add(dialTimeout))
		if err := tc.Handshake(); err != nil {
			_ = tcp.Close()
			return nil, err
		}
		l.conn = tc
	}
	var hello []byte
	n := 0
	switch {
	case d.username != "":
		hello = appendCommand(hello, "AUTH", d.username, d.password)
		n++
	case d.password != "":
		hello = appendCommand(hello, "AUTH", d.password)
		n++
	}
	if d.db != 0 {
		hello = appendCommand(hello, "SELECT", strconv.Itoa(d.db))
		n++
	}
	if n > 0 {
		_ = l.conn.SetDeadline(time.Now().Add(dialTimeout))
		if _, err := l.conn.Write(hello); err != nil {
			_ = l.conn.Close()
			return nil, err
		}
		r := bufio.NewReader(l.conn)
		for i := range n {
			_, replyErr, err := readReply(r)
			if err == nil {
				err = replyErr
			}
			if err == nil && i == n-1 && r.Buffered() > 0 {
				err = errProtocol
			}
			if err != nil {
				_ = l.conn.Close()
				return nil, fmt.Errorf("authenticating to the state store: %w", err)
			}
		}
	}
	_ = l.conn.SetDeadline(time.Time{})
	return l, nil
}

func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}
