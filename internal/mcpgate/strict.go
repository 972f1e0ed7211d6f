package mcpgate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// The JSON names of a JSON-RPC message and of tools/call's params.
var (
	messageOptions    = strictjson.Options{Keys: []string{"jsonrpc", "id", "method", "params", "result", "error"}, AllowUnknown: true}
	callParamsOptions = strictjson.Options{Keys: []string{"name", "arguments", "_meta"}, AllowUnknown: true}
)

// strictMessages rejects, before the MCP SDK decodes them (encoding/json
// matches keys case-insensitively, keeps the last of a repeated key and
// turns invalid UTF-8 and lone surrogates into U+FFFD), POST bodies that
// are not valid UTF-8 or hold an escaped lone surrogate anywhere, and
// JSON-RPC messages (or batch members) whose keys, or whose tools/call
// params' keys, repeat or differ from the protocol's names only in case.
// So the SDK hands on exactly the arguments text strictjson reads; the
// executor parses it with strictjson and denies (and audits) arguments
// that repeat a key. Bodies that are not JSON at all go on to the SDK,
// which rejects them.
//
// A body over limit bytes (the gateway's request body limit, the same for
// every API) is answered 413 and refused unread; like every refusal it is
// audited (auditRefusals).
func strictMessages(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			msg := "reading the request body: " + err.Error()
			noteRefusal(r, &hooks.Refusal{Rule: hooks.RuleMalformedRequest, Err: errors.New(msg)})
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		if int64(len(body)) > limit {
			noteRefusal(r, gateway.TooLargeError(limit))
			http.Error(w, fmt.Sprintf("request body is larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		calls, err := checkMessages(body)
		if !calls {
			noteNoCall(r)
		}
		if err != nil {
			msg := "malformed JSON-RPC message: " + err.Error()
			noteRefusal(r, &hooks.Refusal{Rule: hooks.RuleMalformedRequest, Err: errors.New(msg)})
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// checkMessages checks one message or a batch (see strictMessages). It
// reports whether the body may hold a tools/call: false only for one
// message (or a batch) that names other methods alone.
func checkMessages(body []byte) (calls bool, err error) {
	err = strictjson.DecodeLooseRaw(body, func(d *strictjson.Decoder) error {
		if d.Kind() == '[' {
			return d.Array(func() error { return checkMessage(d, &calls) })
		}
		return checkMessage(d, &calls)
	})
	if errors.Is(err, strictjson.ErrSyntax) {
		return true, nil // not JSON at all: the SDK answers it itself
	}
	return calls || err != nil, err
}

// checkMessage reads one message, setting *calls when it is a tools/call
// (or names no method).
func checkMessage(d *strictjson.Decoder, calls *bool) error {
	var method string
	var params []byte
	err := d.Object(&messageOptions, func(key string) (err error) {
		switch {
		case key == "method" && d.Kind() == '"':
			method, err = d.String()
		case key == "params":
			params, err = d.Raw()
		default:
			err = d.Skip()
		}
		return err
	})
	if method == "" || method == methodCallTool {
		*calls = true
	}
	if err != nil || method != methodCallTool || len(params) == 0 || params[0] != '{' {
		return err
	}
	if err := strictjson.DecodeLooseRaw(params, func(d *strictjson.Decoder) error {
		return d.Object(&callParamsOptions, func(string) error { return d.Skip() })
	}); err != nil {
		return fmt.Errorf("tools/call params: %w", err)
	}
	return nil
}
