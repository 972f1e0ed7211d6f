package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the session limits (Options).
const (
	DefaultMaxSessions          = 2000 // about 35 KB each: a full table fits the chart's 512Mi
	DefaultMaxSessionsPerCaller = 100
)

// The caps a session-opening request can hit (the cap label of
// toolhooks_mcp_sessions_refused_total, and the cap of the refusal's data).
const (
	CapTotal  = "total"
	CapCaller = "caller"
)

// CodeSessionLimit is the JSON-RPC error code of a request refused because it
// would open a session over a cap (HTTP 429 for the caller's cap, 503 for the
// total one).
const CodeSessionLimit = -32029

// SessionLimitData is the data of a CodeSessionLimit error.
type SessionLimitData struct {
	// Cap is CapCaller or CapTotal.
	Cap string `json:"cap"`
	// Limit is the cap's value: how many sessions may be open at once.
	Limit int `json:"limit"`
	// IdleTimeoutSeconds is how long a session may be idle before the
	// gateway closes it (0: never; only DELETE closes sessions).
	IdleTimeoutSeconds float64 `json:"idleTimeoutSeconds"`
}

// sessionLimits caps the MCP sessions open at once, in total and per caller
// (the verified username; callers without a token share AnonymousSender's
// share).
//
// Every POST without an Mcp-Session-Id opens a session in the SDK's handler
// (an initialize, or a server/discover probe or stray request that the SDK
// answers and then closes its session), so each takes a reservation first, or
// is refused without reaching the SDK. The reservation travels in the
// request's context, which the SDK keeps as the session's context: the first
// method handled (claim) finds it there and binds it to the ServerSession.
// When the request returns, a reservation bound to no initialized session is
// released at once; one bound to an initialized session is released when the
// session ends (ServerSession.Wait returns: DELETE, the idle timeout or any
// other Close), or as soon as a DELETE of it has been answered. release is
// idempotent, so a slot is freed exactly once.
type sessionLimits struct {
	maxTotal, maxPerCaller int
	idle                   time.Duration

	live    prometheus.Gauge
	refused *prometheus.CounterVec

	mu        sync.Mutex
	total     int
	perCaller map[string]int
	byID      map[string]*reservation // reservations bound to a session, by session id
}

// reservation is one slot of the limits, held by a session or by a request
// that may open one.
type reservation struct {
	limits *sessionLimits
	caller string

	mu      sync.Mutex
	session *mcp.ServerSession
	settled bool // the request that took the reservation has returned

	released atomic.Bool
}

type reservationKey struct{}

func newSessionLimits(reg prometheus.Registerer, maxTotal, maxPerCaller int, idle time.Duration) (*sessionLimits, error) {
	l := &sessionLimits{
		maxTotal: maxTotal, maxPerCaller: maxPerCaller, idle: idle,
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolhooks_mcp_sessions",
			Help: "MCP sessions open (counting those whose initialize is in flight).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_mcp_sessions_refused_total",
			Help: "MCP requests without a session id (which open a session; an SDK client's connect sends a server/discover " +
				"probe and an initialize) refused by the cap they hit: caller (--mcp-max-sessions-per-caller) or total (--mcp-max-sessions).",
		}, []string{"cap"}),
		perCaller: map[string]int{},
		byID:      map[string]*reservation{},
	}
	for _, c := range []prometheus.Collector{l.live, l.refused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	l.refused.WithLabelValues(CapTotal)
	l.refused.WithLabelValues(CapCaller)
	return l, nil
}

// acquire takes a slot for caller, or returns the cap that is full.
func (l *sessionLimits) acquire(caller string) (*reservation, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.perCaller[caller] >= l.maxPerCaller:
		return nil, CapCaller
	case l.total >= l.maxTotal:
		return nil, CapTotal
	}
	l.perCaller[caller]++
	l.total++
	l.live.Inc()
	return &reservation{limits: l, caller: caller}, ""
}

// release frees r's slot; only its first call does anything.
func (r *reservation) release() {
	if !r.released.CompareAndSwap(false, true) {
		return
	}
	l := r.limits
	r.mu.Lock()
	ss := r.session
	r.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.perCaller[r.caller] - 1; n > 0 {
		l.perCaller[r.caller] = n
	} else {
		delete(l.perCaller, r.caller)
	}
	if ss != nil && l.byID[ss.ID()] == r {
		delete(l.byID, ss.ID())
	}
	l.live.Dec()
}

// bind makes ss the holder of r, unless r already has one or its request has
// returned (a request handled after that belongs to a session settle closed).
func (r *reservation) bind(ss *mcp.ServerSession) {
	r.mu.Lock()
	ok := r.session == nil && !r.settled
	if ok {
		r.session = ss
	}
	r.mu.Unlock()
	if !ok {
		return
	}
	l := r.limits
	l.mu.Lock()
	if !r.released.Load() {
		l.byID[ss.ID()] = r
	}
	l.mu.Unlock()
}

// settle hands r over when its request has returned: to the session it is
// bound to until that ends, else back to the limits. A session that was not
// initialized is closed first (as the SDK closes it too): only an initialized
// session outlives the request that opened it.
func (r *reservation) settle() {
	r.mu.Lock()
	r.settled = true
	ss := r.session
	r.mu.Unlock()
	if ss == nil || ss.InitializeParams() == nil {
		if ss != nil {
			_ = ss.Close()
		}
		r.release()
		return
	}
	go func() {
		_ = ss.Wait()
		r.release()
	}()
}

// releaseID releases the reservation of the session id, if one is bound to it.
func (l *sessionLimits) releaseID(id string) {
	l.mu.Lock()
	r := l.byID[id]
	l.mu.Unlock()
	if r != nil {
		r.release()
	}
}

// claim is a receiving middleware binding a session to the reservation of
// the request that opened it, which the session's context holds. It binds on
// any method, not only initialize, so that no session outlives its request
// without a slot.
func (l *sessionLimits) claim(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := ctx.Value(reservationKey{}).(*reservation); ok && r.limits == l {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				r.bind(ss)
			}
		}
		return next(ctx, method, req)
	}
}

// middleware enforces the limits in front of the SDK's handler.
func (l *sessionLimits) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		switch {
		case r.Method == http.MethodPost && id == "":
			res, full := l.acquire(callerOf(auth.TokenInfoFromContext(r.Context())).Username)
			if res == nil {
				l.refuse(w, r, full)
				return
			}
			defer res.settle()
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reservationKey{}, res)))
		case r.Method == http.MethodDelete && id != "":
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r)
			if sw.status == http.StatusNoContent { // the SDK closed the session
				l.releaseID(id)
			}
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// refuse answers a request over the cap full: 429 for the caller's cap, 503
// for the total, with a JSON-RPC error (the request's id when it is one
// request) that says which cap, its value, and when idle sessions close.
func (l *sessionLimits) refuse(w http.ResponseWriter, r *http.Request, full string) {
	l.refused.WithLabelValues(full).Inc()
	data := SessionLimitData{Cap: full, Limit: l.maxPerCaller, IdleTimeoutSeconds: l.idle.Seconds()}
	status := http.StatusTooManyRequests
	msg := fmt.Sprintf("MCP session refused: this caller already has %d open sessions, the cap per caller", l.maxPerCaller)
	if full == CapTotal {
		data.Limit, status = l.maxTotal, http.StatusServiceUnavailable
		msg = fmt.Sprintf("MCP session refused: the gateway already has %d open sessions, the cap in total", l.maxTotal)
	}
	if l.idle > 0 {
		msg += fmt.Sprintf("; sessions idle for %s are closed (or end one with DELETE)", l.idle)
	} else {
		msg += "; idle sessions are never closed: end one with DELETE"
	}
	var reqID jsonrpc.ID
	if r.Body != nil {
		// strictMessages, in front, read every POST body within the limit
		// and replaced it with the bytes it read.
		if body, err := io.ReadAll(r.Body); err == nil {
			if m, err := jsonrpc.DecodeMessage(body); err == nil {
				if req, ok := m.(*jsonrpc.Request); ok {
					reqID = req.ID
				}
			}
		}
	}
	raw, _ := json.Marshal(data)
	writeRPCError(w, status, reqID, &jsonrpc.Error{Code: CodeSessionLimit, Message: msg, Data: raw})
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// checkSessionLimits validates the limits of Options, filling in defaults.
func checkSessionLimits(o *Options) error {
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerCaller == 0 {
		o.MaxSessionsPerCaller = min(DefaultMaxSessionsPerCaller, o.MaxSessions)
	}
	switch {
	case o.MaxSessions < 0 || o.MaxSessionsPerCaller < 0:
		return errors.New("mcp: the session limits must be positive")
	case o.MaxSessionsPerCaller > o.MaxSessions:
		return fmt.Errorf("mcp: %d sessions per caller is more than %d in total", o.MaxSessionsPerCaller, o.MaxSessions)
	case o.SessionIdleTimeout < 0:
		return errors.New("mcp: the session idle timeout must not be negative")
	}
	return nil
}
