package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
)

// A configuration push is read with strictjson over HTTP: a key in another
// case ("HOOKS") or a key twice ("hooks" again), at the top or inside a
// hook, is refused 400, where encoding/json would let the later one
// replace the policy in force. The last good configuration stays enforced.
func TestAPushWithARepeatedOrMiscasedKeyIsRefused(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.MaxBodyBytes = 256 << 10 })
	good := compileYAML(t, e.ws, basePolicy)
	e.mustPush(good)

	// A configuration without the .env rule, to be smuggled in later.
	loose := compileYAML(t, e.ws, budgetPolicy)
	looseHooks := mustJSON(t, loose.Hooks)
	guarded := compileYAML(t, e.ws, basePolicy)
	guarded.Revision = ""
	text := mustJSON(t, guarded)
	if !bytes.HasSuffix(text, []byte("}")) || !bytes.Contains(text, []byte(`"hooks":[`)) {
		t.Fatalf("unexpected configuration text %s", text)
	}
	open := string(text[:len(text)-1])
	hook := `"name":"` + good.Hooks[1].Name + `"`

	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, tc := range []struct{ name, body string }{
		{"a later HOOKS", open + `,"HOOKS":` + string(looseHooks) + `}`},
		{"a second hooks", open + `,"hooks":` + string(looseHooks) + `}`},
		{"a Revision beside the revision", open + `,"Revision":"x"}`},
		{"a hook's Name beside its name", strings.Replace(open, hook, hook+`,"Name":"other"`, 1) + `}`},
		{"a hook's kind twice", strings.Replace(open, hook, hook+`,"kind":"ContractScope","kind":"Autonomy"`, 1) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.body, "HOOKS") && strings.Count(tc.body, `"hooks"`) < 2 && !strings.Contains(tc.body, `"Revision"`) &&
				!strings.Contains(tc.body, `"Name"`) && strings.Count(tc.body, `"kind"`) == strings.Count(string(text), `"kind"`) {
				t.Fatalf("the body was not changed: %s", tc.body)
			}
			status, body := e.do(http.MethodPut, "/v1/config", "application/json", []byte(tc.body), auth)
			if status != http.StatusBadRequest || !strings.Contains(string(body), "malformed JSON") {
				t.Errorf("answered %d %s; want 400 malformed JSON", status, body)
			}
			if got := e.srv.Status().Revision; got != good.Revision {
				t.Errorf("revision %s, want the last good %s", got, good.Revision)
			}
			if r := e.call("read_file", `{"path":"config/.env"}`); r.Status != "denied" {
				t.Errorf("the last good configuration is not enforced: %+v", r)
			}
		})
	}
	// The same text without the extra key is accepted: only the key is refused.
	if status, body := e.do(http.MethodPut, "/v1/config", "application/json", text, auth); status != http.StatusOK {
		t.Errorf("the unaltered push answered %d %s", status, body)
	}
}

// A result sent for scanning is read the same way: "tool" twice, or "TOOL"
// beside it, is refused.
func TestAResultWithARepeatedOrMiscasedKeyIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	for _, body := range []string{
		`{"tool":"read_file","TOOL":"other","result":"x"}`,
		`{"tool":"read_file","result":"x","Result":"y"}`,
		`{"tool":"read_file","tool":"other","result":"x"}`,
	} {
		status, resp := e.do(http.MethodPost, "/v1/results", "application/json", []byte(body),
			map[string]string{"Authorization": "Bearer " + agentToken})
		if status != http.StatusBadRequest || !strings.Contains(string(resp), "malformed JSON") {
			t.Errorf("%s answered %d %s; want 400 malformed JSON", body, status, resp)
		}
	}
}
