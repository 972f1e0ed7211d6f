package hooks

import (
	"errors"
	"fmt"

	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// ErrInvalidArguments is wrapped by every error ParseArgs returns, so callers
// can tell malformed arguments apart with errors.Is.
var ErrInvalidArguments = errors.New("invalid tool arguments")

// NewCall returns a Call for tool with its arguments parsed once by ParseArgs.
// Args is never nil; when the arguments are not one JSON object ArgsErr says
// why, Args is empty and the executor denies the call. The caller fills in the
// session, channel, sender, correlation id and streaming flag.
func NewCall(tool, argsJSON string) *Call {
	args, err := ParseArgs(argsJSON)
	return &Call{Tool: tool, ArgsJSON: argsJSON, Args: args, ArgsErr: err}
}

// ParseArgs parses a tool call's arguments, which must be exactly one JSON
// object, with strictjson, the parser every hook, tool and API shares. Text
// that is empty or only JSON whitespace means no arguments ({}). Numbers
// are kept exact as json.Number. It always returns a non-nil map (an empty
// one on error) and rejects, with an error wrapping ErrInvalidArguments
// (and strictjson.ErrStrict):
//   - any top-level value that is not an object (array, string, number, bool, null);
//   - invalid JSON, including truncated input;
//   - anything but whitespace after the object;
//   - text that is not valid UTF-8, and escaped lone surrogates ("\ud800")
//     (encoding/json would silently replace both with U+FFFD, so hooks
//     reading the raw text and the tool would see different strings);
//   - duplicate keys in any object at any depth (parsers disagree on which
//     value wins, which would let a hook and a tool see different arguments);
//   - nesting deeper than 10,000 levels.
//
// Error messages never quote the arguments beyond a single offending
// character or escape sequence, so they are safe to audit and log.
func ParseArgs(argsJSON string) (map[string]any, error) {
	if isBlank(argsJSON) {
		return map[string]any{}, nil
	}
	args, err := strictjson.Parse(argsJSON)
	if err != nil {
		return map[string]any{}, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	return args, nil
}

// ArgsText is the arguments text plain hooks and plugins receive: ArgsJSON
// as the caller sent it, or "{}" when that was blank.
func (c *Call) ArgsText() string {
	if isBlank(c.ArgsJSON) {
		return "{}"
	}
	return c.ArgsJSON
}

// isBlank reports whether s is empty or holds only JSON whitespace.
func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}
