// Package otlp switches the gateway's tracing on from the standard
// OpenTelemetry environment variables: it installs an SDK TracerProvider
// exporting over OTLP/HTTP (protobuf) as the global provider, which the hook
// executors built afterwards use.
//
// Tracing is off unless OTEL_TRACES_EXPORTER is "otlp", or it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
// OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true keep it off. The
// exporter reads the other OTEL_EXPORTER_OTLP_* variables (headers,
// timeout, compression, certificates), the provider reads OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG (default: parentbased_always_on) and the
// batcher OTEL_BSP_*; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the
// service (default service.name toolhooks-gateway).
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is the service.name of the gateway's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const DefaultServiceName = "toolhooks-gateway"

// Environment variables read to decide whether tracing is on.
const (
	EnvTracesExporter  = "OTEL_TRACES_EXPORTER"
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	defaultHTTPTraceEP = "http://localhost:4318/v1/traces"
)

// Tracing is the gateway's tracing as Start set it up.
type Tracing struct {
	// Enabled is true when spans are exported.
	Enabled bool
	// Endpoint is where they go (Enabled only).
	Endpoint string
	// Reason says why tracing is off (not Enabled).
	Reason string
	tp     *sdktrace.TracerProvider
}

// Shutdown flushes the spans not yet exported and stops the exporter; it
// does nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// LogAttrs describe t for the startup log.
func (t *Tracing) LogAttrs() []any {
	if !t.Enabled {
		return []any{"tracing", false, "reason", t.Reason}
	}
	return []any{"tracing", true, "endpoint", t.Endpoint}
}

// Start reads the environment and, when tracing is switched on, installs an
// SDK TracerProvider exporting over OTLP/HTTP as the global provider (and
// W3C Trace Context as the global propagator). Export errors are logged to
// log. Call it before building anything that makes spans.
func Start(ctx context.Context, log *slog.Logger) (*Tracing, error) {
	on, reason, err := enabled(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !on {
		return &Tracing{Reason: reason}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("Tracing error", "error", err)
		}))
	}
	return &Tracing{Enabled: true, Endpoint: endpoint(os.Getenv), tp: tp}, nil
}

// enabled decides from the environment whether tracing is on, and if not, why.
func enabled(getenv func(string) string) (on bool, reason string, err error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false, EnvSDKDisabled + " is true", nil
	}
	switch exporter := strings.TrimSpace(getenv(EnvTracesExporter)); exporter {
	case "otlp":
	case "none":
		return false, EnvTracesExporter + " is none", nil
	case "":
		if getenv(EnvEndpoint) == "" && getenv(EnvTracesEndpoint) == "" {
			return false, "neither " + EnvTracesExporter + "=otlp nor an OTLP endpoint is set", nil
		}
	default:
		return false, "", fmt.Errorf("%s=%s: the gateway exports traces only with otlp (or none)", EnvTracesExporter, exporter)
	}
	protocol := getenv(EnvTracesProtocol)
	if protocol == "" {
		protocol = getenv(EnvProtocol)
	}
	if protocol != "" && protocol != "http/protobuf" {
		return false, "", fmt.Errorf("OTLP protocol %q: the gateway exports traces only over http/protobuf", protocol)
	}
	return true, "", nil
}

// endpoint is the URL the exporter posts spans to, as it derives it from
// the environment.
func endpoint(getenv func(string) string) string {
	if ep := getenv(EnvTracesEndpoint); ep != "" {
		return ep
	}
	if ep := getenv(EnvEndpoint); ep != "" {
		return strings.TrimSuffix(ep, "/") + "/v1/traces"
	}
	return defaultHTTPTraceEP
}
