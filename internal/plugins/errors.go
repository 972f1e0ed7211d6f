package plugins

import (
	"errors"
	"fmt"
)

// Kind classifies a plugin failure. It is the prefix of the error a plugin
// hook returns (so the executor's denial reason names it), the "kind" label
// of toolhooks_plugin_failures_total, and the "kind" key of the logs.
type Kind string

// Failure kinds.
const (
	// KindTimeout: the plugin did not reply within its timeout.
	KindTimeout Kind = "pluginTimeout"
	// KindUnavailable: the plugin could not be reached (connection refused,
	// process not running or being restarted, plugin removed).
	KindUnavailable Kind = "pluginUnavailable"
	// KindCrashed: the plugin process exited while the call was waiting.
	KindCrashed Kind = "pluginCrashed"
	// KindError: the plugin replied with an error (or, over HTTP, a non-2xx status).
	KindError Kind = "pluginError"
	// KindBadReply: the reply was malformed: not JSON, no result, or a result
	// that is neither a boolean nor {allow: boolean, reason?: string}.
	KindBadReply Kind = "pluginBadReply"
	// KindCircuitOpen: the plugin's circuit breaker is open after repeated
	// failures; it was not called.
	KindCircuitOpen Kind = "circuitOpen"
)

// RuleDenied is the rule of the verdict of a plugin that denied a call.
const RuleDenied = "pluginDenied"

// Error is a failed plugin call. Its text starts with the kind, so that a
// denial reason built from it ("Hook X failed: pluginTimeout: ...") says which.
type Error struct {
	// Kind classifies the failure.
	Kind Kind
	// Err is the underlying cause.
	Err error
}

// Error returns "<kind>: <cause>".
func (e *Error) Error() string { return string(e.Kind) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// FailureKind returns the kind of a plugin failure, or "" when err is not one.
func FailureKind(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	return ""
}

// fail returns an *Error of kind k with a formatted cause.
func fail(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}
