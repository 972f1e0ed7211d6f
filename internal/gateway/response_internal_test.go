package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// decisionJSON is the answer as writeJSON encodes it: json.Marshal of the
// DecisionResponse and a newline.
func decisionJSON(res *hooks.Result) []byte {
	return mustJSONLine(wire.DecisionResponse{
		Allowed:  res.Status == hooks.StatusAllowed,
		Decision: map[bool]string{true: wire.DecisionAllow, false: wire.DecisionDeny}[res.Status == hooks.StatusAllowed],
		Denial:   denialOf(res.Denial),
		Warnings: warningsOf(res.Warnings),
	})
}

// FuzzAppendDecisionResponse compares the hand-written encoding of decision
// answers with json.Marshal byte for byte.
func FuzzAppendDecisionResponse(f *testing.F) {
	f.Add(true, uint8(0), "AutonomyPolicy/default/coding-agent", "AutonomyPolicy", "default", "coding-agent",
		"forbiddenPathGlobs", `Path "config/.env" (real path "/w/config/.env") matches <**/.env> & more`, "Deny")
	f.Add(false, uint8(3), "h", "", "ns", "", "r", "\x00\b\f\n\r\t\u2028\xff", "")
	f.Add(false, uint8(2), "", "K", "", "", "", "", "Warn")
	f.Fuzz(func(t *testing.T, allowed bool, decisions uint8, hook, kind, namespace, name, rule, reason, action string) {
		res := &hooks.Result{Status: hooks.StatusDenied}
		if allowed {
			res.Status = hooks.StatusAllowed
		}
		for i := range int(decisions % 4) {
			d := hooks.Decision{Hook: hook, Rule: rule, Reason: reason, Action: hooks.EnforcementAction(action),
				Policy: hooks.PolicyRef{Kind: kind, Namespace: namespace, Name: name, UID: "u", Generation: 3}}
			if i == 1 {
				d.Policy = hooks.PolicyRef{Namespace: namespace}
			}
			if i == 0 && !allowed {
				res.Denial = &d
			} else {
				res.Warnings = append(res.Warnings, d)
			}
		}
		if got, want := appendDecisionResponse([]byte("x"), res), decisionJSON(res); !bytes.Equal(got[1:], want) {
			t.Fatalf("appendDecisionResponse = %s, json.Marshal = %s", got[1:], want)
		}
	})
}

func TestAllowedBodyIsTheEncodedAllowedAnswer(t *testing.T) {
	res := &hooks.Result{Status: hooks.StatusAllowed}
	if got := appendDecisionResponse(nil, res); !bytes.Equal(got, allowedBody) || !bytes.Equal(got, decisionJSON(res)) {
		t.Fatalf("allowed answer %s, allowedBody %s", got, allowedBody)
	}
}

func TestAnswersCarryContentLength(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		writeBody(w, http.StatusOK, append(bytes.Repeat([]byte("x"), n), '\n'))
	}))
	defer hs.Close()
	for _, n := range []int{0, 14, autoContentLength - 2, autoContentLength - 1, autoContentLength, autoContentLength + 1, 10000} {
		resp, err := http.Get(hs.URL + "?n=" + strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.ContentLength != int64(n+1) || len(body) != n+1 || len(resp.TransferEncoding) > 0 ||
			resp.Header.Get("Content-Type") != contentTypeJSON {
			t.Errorf("a %d-byte answer came with Content-Length %d, transfer encoding %v, type %q (%d bytes read)",
				n+1, resp.ContentLength, resp.TransferEncoding, resp.Header.Get("Content-Type"), len(body))
		}
	}
}
