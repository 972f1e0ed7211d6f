// Package tracing carries W3C trace context (traceparent, tracestate) in and
// out of the gateway: it reads it from the requests of the gateway's APIs and
// writes it into the requests the gateway makes to HTTP plugins and upstream
// MCP servers. The spans themselves are made by the hook executor
// (internal/hooks) with the global OpenTelemetry TracerProvider, which
// package otlp installs when tracing is switched on.
//
// Without a traceparent header nothing here allocates, so the decision path
// of a gateway that is not traced pays a map lookup per request.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator is the W3C Trace Context format.
var propagator = propagation.TraceContext{}

// headerTraceparent is the canonical form of the traceparent header.
const headerTraceparent = "Traceparent"

// Extract returns ctx carrying the remote span context of h's traceparent
// and tracestate headers; ctx itself when h has no traceparent or an
// invalid one.
func Extract(ctx context.Context, h http.Header) context.Context {
	if len(h[headerTraceparent]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject writes the span context of ctx into h as traceparent and
// tracestate; it does nothing when ctx carries no valid span context.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Middleware makes each request's context carry the span context of its
// traceparent header, so that the spans of the calls it makes are children
// of the caller's.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header[headerTraceparent]) != 0 {
			r = r.WithContext(Extract(r.Context(), r.Header))
		}
		next.ServeHTTP(w, r)
	})
}

// Transport is an http.RoundTripper that adds the trace context of each
// request's context to its headers before handing it to Next
// (http.DefaultTransport when nil). A request whose context carries no span
// goes out untouched.
type Transport struct {
	Next http.RoundTripper
}

// RoundTrip injects the trace context into a copy of r and sends it.
func (t Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	propagator.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return next.RoundTrip(r)
}
