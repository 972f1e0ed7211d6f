package mcpgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// maxMessageBytes bounds a JSON-RPC request body the strict check reads.
const maxMessageBytes = 8 << 20

// JSON names of a JSON-RPC message and of tools/call's params.
var (
	messageKeys    = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	callParamsKeys = []string{"name", "arguments", "_meta"}
)

// strictMessages rejects, before the MCP SDK decodes them (encoding/json
// matches keys case-insensitively and turns invalid UTF-8 into U+FFFD),
// POST bodies that are not valid UTF-8, and JSON-RPC messages (or batch
// members) whose keys, or whose tools/call params' keys, repeat or differ
// from the protocol's names only in case, or whose top-level strings hold
// an escaped lone surrogate. Bodies that are not valid JSON go on to the
// SDK, which rejects them.
func strictMessages(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxMessageBytes+1))
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > maxMessageBytes {
			http.Error(w, fmt.Sprintf("request body is larger than %d bytes", maxMessageBytes), http.StatusRequestEntityTooLarge)
			return
		}
		if err := checkMessages(body); err != nil {
			http.Error(w, "malformed JSON-RPC message: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// checkMessages checks one message or a batch (see strictMessages).
func checkMessages(body []byte) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: the body is not valid UTF-8", strictjson.ErrStrict)
	}
	if !json.Valid(body) {
		return nil // the SDK answers malformed JSON itself
	}
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(t, &batch); err != nil {
			return err
		}
		for _, m := range batch {
			if err := checkMessage(m); err != nil {
				return err
			}
		}
		return nil
	}
	return checkMessage(t)
}

func checkMessage(m []byte) error {
	fields, err := strictjson.CheckObject(m, strictjson.Options{Keys: messageKeys, AllowUnknown: true})
	if err != nil {
		return err
	}
	var method string
	if raw, ok := fields["method"]; ok {
		_ = json.Unmarshal(raw, &method)
	}
	if raw, ok := fields["params"]; ok && method == "tools/call" && len(raw) > 0 && raw[0] == '{' {
		if _, err := strictjson.CheckObject(raw, strictjson.Options{Keys: callParamsKeys, AllowUnknown: true}); err != nil {
			return fmt.Errorf("tools/call params: %w", err)
		}
	}
	return nil
}
