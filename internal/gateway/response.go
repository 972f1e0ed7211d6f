package gateway

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/jsonappend"
)

// answerBufs pools the buffers decision answers are encoded into.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeDecision answers a decision: the DecisionResponse of res, encoded
// byte for byte as writeJSON (json.Marshal) would, without reflection.
func writeDecision(w http.ResponseWriter, res *hooks.Result) {
	if res.Status == hooks.StatusAllowed && len(res.Warnings) == 0 {
		writeBody(w, http.StatusOK, allowedBody) // the common answer, encoded once
		return
	}
	bp := answerBufs.Get().(*[]byte)
	b := appendDecisionResponse((*bp)[:0], res)
	writeBody(w, http.StatusOK, b)
	if cap(b) <= 16<<10 {
		*bp = b[:0]
		answerBufs.Put(bp)
	}
}

// appendDecisionResponse appends the DecisionResponse of res and a newline
// as json.Marshal encodes it (see FuzzAppendDecisionResponse).
func appendDecisionResponse(b []byte, res *hooks.Result) []byte {
	if res.Ask != nil || res.Approval != nil {
		// Calls a person is asked about are rare and wait for people:
		// they are encoded by reflection.
		return append(b, mustJSONLine(decisionResponse(res))...)
	}
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, res.Status == hooks.StatusAllowed)
	b = jsonappend.String(append(b, `,"decision":`...), decisionOf(res), jsonappend.JSON)
	if res.Denial != nil {
		b = appendDenial(append(b, `,"denial":`...), res.Denial)
	}
	if len(res.Warnings) > 0 {
		b = jsonappend.Array(append(b, `,"warnings":`...), len(res.Warnings), func(b []byte, i int) []byte {
			return appendDenial(b, &res.Warnings[i])
		})
	}
	return append(b, "}\n"...)
}

// appendDenial appends the Denial of d (see denialOf) as json.Marshal does.
func appendDenial(b []byte, d *hooks.Decision) []byte {
	b = jsonappend.String(append(b, `{"hook":`...), d.Hook, jsonappend.JSON)
	if d.Policy.Kind != "" || d.Policy.Name != "" {
		b = jsonappend.String(append(b, `,"policy":{"kind":`...), d.Policy.Kind, jsonappend.JSON)
		b = jsonappend.String(append(b, `,"namespace":`...), d.Policy.Namespace, jsonappend.JSON)
		b = jsonappend.String(append(b, `,"name":`...), d.Policy.Name, jsonappend.JSON)
		b = append(b, '}')
	}
	b = jsonappend.String(append(b, `,"rule":`...), d.Rule, jsonappend.JSON)
	b = jsonappend.String(append(b, `,"reason":`...), d.Reason, jsonappend.JSON)
	if d.Action != "" {
		b = jsonappend.String(append(b, `,"enforcementAction":`...), string(d.Action), jsonappend.JSON)
	}
	if d.Layer != "" {
		b = jsonappend.String(append(b, `,"layer":`...), string(d.Layer), jsonappend.JSON)
	}
	return append(b, '}')
}
