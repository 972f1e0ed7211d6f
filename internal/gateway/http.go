package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolhooks/toolhooks/internal/authn"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/tracing"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// API names (the api label of toolhooks_decision_duration_seconds).
const (
	apiToolCalls = "tool-calls"
	apiDecisions = "decisions"
	apiResults   = "results"
)

// routes builds the HTTP API. Every answer but /metrics and /healthz is
// JSON; errors are {"error": "..."}. GET /v1/config is not authenticated: it
// reveals only the revision, issue time and hook count, which the controller
// reads to detect restarted pods.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tool-calls", s.handleToolCall)
	mux.HandleFunc("POST /v1/decisions", s.handleDecision)
	mux.HandleFunc("POST /v1/results", s.handleResult)
	mux.HandleFunc("PUT /v1/config", s.handlePutConfig)
	mux.HandleFunc("GET /v1/config", s.handleGetConfig)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{Registry: s.opts.Registry}))
	// The same paths with any other method: 405 with a JSON body.
	for path, allow := range map[string]string{
		"/v1/tool-calls": http.MethodPost, "/v1/decisions": http.MethodPost, "/v1/results": http.MethodPost, "/v1/config": "GET, PUT",
		"/healthz": http.MethodGet, "/readyz": http.MethodGet, "/metrics": http.MethodGet,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s", r.URL.Path))
	})
	return s.recoverer(tracing.Middleware(mux))
}

// recoverer answers 500 instead of dropping the connection when a handler panics.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
				panic(rec)
			}
			s.log.ErrorContext(r.Context(), "Handler panicked", "method", r.Method, "path", r.URL.Path,
				"panic", rec, "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, "internal error")
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleToolCall(w http.ResponseWriter, r *http.Request) {
	call, ok := s.decodeCall(w, r, apiToolCalls)
	if !ok {
		return
	}
	res := s.run(r.Context(), apiToolCalls, call)
	writeJSON(w, http.StatusOK, wire.ToolCallResponse{
		Status:     string(res.Status),
		Result:     res.Output,
		Denial:     denialOf(res.Denial),
		Warnings:   warningsOf(res.Warnings),
		Approval:   approvalOf(res.Approval),
		Withheld:   denialOf(res.Withheld),
		Redactions: redactionsOf(res.Filtering),
		DurationMs: millis(res.Duration),
	})
}

func (s *Server) handleDecision(w http.ResponseWriter, r *http.Request) {
	call, ok := s.decodeCall(w, r, apiDecisions)
	if !ok {
		return
	}
	start := time.Now()
	res := s.cur.Load().exec.Evaluate(r.Context(), call)
	s.record(apiDecisions, call, &res, time.Since(start))
	writeDecision(w, &res)
}

// handleResult scans the result of a tool the caller ran itself with the
// result policies in force, audits it and answers what the model may see.
// With no policy in force the result is withheld: nothing says it is clean.
func (s *Server) handleResult(w http.ResponseWriter, r *http.Request) {
	id, ok := s.identify(w, r, apiResults)
	if !ok {
		return
	}
	var req wire.ResultRequest
	if status, err := s.decodeStrictBody(w, r, &req); err != nil {
		writeError(w, status, err.Error())
		call := refused(hooks.RuleMalformedRequest, err)
		if status == http.StatusRequestEntityTooLarge {
			call.ArgsErr = tooLargeErr(s.opts.MaxBodyBytes)
		}
		call.SenderID, call.Caller = id.Username, id
		s.refuseCall(r.Context(), apiResults, call)
		return
	}
	args := string(req.Arguments)
	if args == "" {
		args = "{}"
	}
	call := hooks.NewCall(req.Tool, args)
	call.SessionID, call.ChannelID, call.SenderID, call.CorrelationID = req.SessionID, req.ChannelID, req.SenderID, req.CorrelationID
	if req.Tool == "" {
		const msg = "tool is required"
		writeError(w, http.StatusBadRequest, msg)
		call.Args, call.ArgsErr = map[string]any{}, &hooks.Refusal{Rule: hooks.RuleMalformedRequest, Err: errors.New(msg)}
		call.SenderID, call.Caller = id.Username, id
		s.refuseCall(r.Context(), apiResults, call)
		return
	}
	if !s.bindCaller(w, r, apiResults, call, id) {
		return
	}
	a := s.cur.Load()
	start := time.Now()
	var res hooks.Result
	if a.noPolicy != "" {
		res = a.exec.Evaluate(r.Context(), call) // denied and audited with the no-policy reason
		d := res.Denial
		res = hooks.Result{Status: hooks.StatusWithheld, Output: hooks.WithheldText + d.Hook, Withheld: d}
	} else {
		res = a.exec.FilterResult(r.Context(), call, req.Result, req.Failed)
	}
	s.record(apiResults, call, &res, time.Since(start))
	writeJSON(w, http.StatusOK, wire.ResultResponse{
		Status:     string(res.Status),
		Result:     res.Output,
		Withheld:   denialOf(res.Withheld),
		Redactions: redactionsOf(res.Filtering),
	})
}

// run executes call through the executor in force (hooks, tool, hooks),
// counts it under api and hands its denials to the sink.
func (s *Server) run(ctx context.Context, api string, call *hooks.Call) hooks.Result {
	a := s.cur.Load()
	start := time.Now()
	var res hooks.Result
	if a.noPolicy != "" {
		res = a.exec.Evaluate(ctx, call) // the no-policy chain denies without looking the tool up
	} else {
		res = a.exec.Execute(ctx, call)
	}
	s.record(api, call, &res, time.Since(start)-res.Duration)
	return res
}

// record counts a call and hands its denials to the sink.
func (s *Server) record(api string, call *hooks.Call, res *hooks.Result, hookTime time.Duration) {
	s.metrics.observe(api, call, res, hookTime)
	s.denials.report(call, res)
}

// identify authenticates the caller of a request of api, answering 401
// (403) itself when the caller is not authenticated; the refusal is
// audited and counted as a denied call with no sender (rule
// Unauthenticated or Forbidden).
func (s *Server) identify(w http.ResponseWriter, r *http.Request, api string) (*hooks.Identity, bool) {
	id, err := s.opts.Callers.Authenticate(r)
	if err != nil {
		status, rule := http.StatusUnauthorized, hooks.RuleUnauthenticated
		if errors.Is(err, authn.ErrForbidden) {
			status, rule = http.StatusForbidden, hooks.RuleForbidden
		} else {
			w.Header().Set("WWW-Authenticate", authn.Challenge(r, err, ""))
		}
		s.metrics.unauthenticated.Inc()
		writeError(w, status, err.Error())
		s.refuseCall(r.Context(), api, refused(rule, err))
		return nil, false
	}
	return id, true
}

// bindCaller makes id the sender of call, a request of api; a body
// senderId naming anyone else is answered 400 (false), and the refusal is
// audited and counted as a denied call of id (rule SenderMismatch).
func (s *Server) bindCaller(w http.ResponseWriter, r *http.Request, api string, call *hooks.Call, id *hooks.Identity) bool {
	if call.SenderID != "" && call.SenderID != id.Username {
		err := fmt.Errorf("senderId %q is not the authenticated caller %q; omit senderId", call.SenderID, id.Username)
		writeError(w, http.StatusBadRequest, err.Error())
		call.Args, call.ArgsErr = map[string]any{}, &hooks.Refusal{Rule: hooks.RuleSenderMismatch, Err: err}
		call.SenderID, call.Caller = id.Username, id
		s.refuseCall(r.Context(), api, call)
		return false
	}
	call.SenderID, call.Caller = id.Username, id
	return true
}

// checkContentType requires Content-Type application/json. It makes a
// browser preflight any cross-origin request, which the gateway never
// approves: a web page cannot make a local gateway run tools (CSRF).
func checkContentType(r *http.Request) (int, error) {
	ct := r.Header.Get("Content-Type")
	if ct != contentTypeJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != contentTypeJSON {
			return http.StatusUnsupportedMediaType, fmt.Errorf("content type %q is not supported; send application/json", ct)
		}
	}
	return 0, nil
}

// decodeStrictBody requires Content-Type application/json and decodes one
// JSON value of at most MaxBodyBytes from the body with strictjson.Unmarshal:
// keys spelled exactly as v's JSON names, each at most once at every depth,
// no unknown key, valid UTF-8, nothing after the value. It returns the
// status to answer on error.
func (s *Server) decodeStrictBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	if status, err := checkContentType(r); err != nil {
		return status, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, readCloser{r.Body}, s.opts.MaxBodyBytes))
	if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than %d bytes", tooBig.Limit)
	}
	if err != nil {
		return http.StatusBadRequest, fmt.Errorf("malformed JSON body: reading the body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return http.StatusBadRequest, errors.New("request body is empty; send a JSON object")
	}
	if err := strictjson.Unmarshal(body, v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("malformed JSON body: %w", err)
	}
	return 0, nil
}

// readCloser gives a reader a Close that does nothing (the server closes
// request bodies).
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	st := s.Status()
	anonymous := s.opts.Callers != nil && s.opts.Callers.AllowAnonymous
	if reason := s.NotReadyReason(); reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, wire.ReadyResponse{Revision: st.Revision, Reason: reason, Sandbox: s.opts.Sandbox.Status(),
			AnonymousCallers: anonymous, StateStore: s.stateStoreStatus()})
		return
	}
	writeJSON(w, http.StatusOK, wire.ReadyResponse{Ready: true, Revision: st.Revision, Sandbox: s.opts.Sandbox.Status(),
		AnonymousCallers: anonymous, StateStore: s.stateStoreStatus()})
}

func (s *Server) handleGetConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

func (s *Server) handlePutConfig(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if s.opts.Authenticator == nil {
		s.reject(w, r, http.StatusForbidden, RejectForbidden, "", errors.New("configuration pushes are disabled: no authenticator is configured"))
		return
	}
	identity, err := s.opts.Authenticator.Authenticate(r)
	if err != nil {
		if errors.Is(err, ErrForbidden) {
			s.reject(w, r, http.StatusForbidden, RejectForbidden, identity, err)
		} else {
			w.Header().Set("WWW-Authenticate", authn.Challenge(r, err, ""))
			s.reject(w, r, http.StatusUnauthorized, RejectUnauthenticated, identity, err)
		}
		return
	}
	var cfg gatewayconfig.Config
	if status, err := s.decodeStrictBody(w, r, &cfg); err != nil {
		reason := RejectMalformed
		if status == http.StatusRequestEntityTooLarge {
			reason = RejectTooLarge
		}
		s.reject(w, r, status, reason, identity, err)
		return
	}
	res, err := s.Apply(ctx, &cfg, "push")
	switch {
	case errors.Is(err, ErrStaleConfig):
		s.reject(w, r, http.StatusConflict, RejectStale, identity, err)
	case err != nil:
		s.reject(w, r, http.StatusUnprocessableEntity, RejectInvalid, identity, err)
	default:
		if res.Changed {
			s.log.InfoContext(ctx, "Configuration pushed", "identity", identity, "revision", res.Revision)
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// reject answers a refused push, counts and logs it.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, status int, reason, identity string, err error) {
	s.metrics.rejections.WithLabelValues(reason).Inc()
	s.log.WarnContext(r.Context(), "Configuration push rejected", "reason", reason, "status", status,
		"identity", identity, "remoteAddr", r.RemoteAddr, "error", err)
	writeError(w, status, "configuration rejected: "+err.Error())
}

// contentTypeJSON is the media type of every JSON request and answer.
const contentTypeJSON = "application/json"

// contentTypeJSONHeader is the Content-Type header value of every JSON answer.
var contentTypeJSONHeader = []string{contentTypeJSON}

// allowedBody is the answer of an allowed decision without warnings.
var allowedBody = mustJSONLine(decisionResponse(&hooks.Result{Status: hooks.StatusAllowed}))

func mustJSONLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error: encoding the response"}`)
	}
	writeBody(w, status, append(b, '\n'))
}

// autoContentLength is the largest body for which net/http sets
// Content-Length itself: a handler's writes up to its buffer size
// (bufferBeforeChunkingSize, 2048 bytes) are held until the handler
// returns, and the length is then known. TestAnswersCarryContentLength
// checks it.
const autoContentLength = 2048

// writeBody answers with a JSON body that ends with a newline.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSONHeader // never modified; saves an allocation per answer
	if len(body) > autoContentLength {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.ErrorResponse{Error: msg})
}
