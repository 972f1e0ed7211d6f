package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/wire"
)

// policy and denial fill every field of a Denial.
var (
	policy = &wire.PolicyRef{Kind: "AutonomyPolicy", Namespace: "team-a", Name: "strict"}
	denial = wire.Denial{Hook: "AutonomyPolicy/team-a/strict", Policy: policy, Rule: "forbiddenPathGlobs",
		Reason: "no", EnforcementAction: "Deny"}
)

const (
	policyJSON = `{"kind":"AutonomyPolicy","namespace":"team-a","name":"strict"}`
	denialJSON = `{"hook":"AutonomyPolicy/team-a/strict","policy":` + policyJSON +
		`,"rule":"forbiddenPathGlobs","reason":"no","enforcementAction":"Deny"}`
)

// TestJSONNames encodes each type, once with every field set and once
// empty, and compares the text with its golden form; the golden form
// decodes back into the same value.
func TestJSONNames(t *testing.T) {
	cases := []struct {
		name   string
		value  any // a pointer to the value
		golden string
	}{
		{"ToolCallRequest", &wire.ToolCallRequest{SessionID: "s", ChannelID: "c", SenderID: "u", CorrelationID: "x",
			Tool: "read_file", Arguments: json.RawMessage(`{"path":"a"}`), Streaming: true},
			`{"sessionId":"s","channelId":"c","senderId":"u","correlationId":"x","tool":"read_file","arguments":{"path":"a"},"streaming":true}`},
		{"empty ToolCallRequest", &wire.ToolCallRequest{},
			`{"sessionId":"","channelId":"","senderId":"","correlationId":"","tool":"","streaming":false}`},
		{"DecisionRequest", &wire.DecisionRequest{SessionID: "s", ChannelID: "c", SenderID: "u", CorrelationID: "x",
			Tool: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)},
			`{"sessionId":"s","channelId":"c","senderId":"u","correlationId":"x","tool":"read_file","arguments":{"path":"a"}}`},
		{"empty DecisionRequest", &wire.DecisionRequest{},
			`{"sessionId":"","channelId":"","senderId":"","correlationId":"","tool":""}`},
		{"PolicyRef", policy, policyJSON},
		{"Denial", &denial, denialJSON},
		{"empty Denial", &wire.Denial{}, `{"hook":"","rule":"","reason":""}`},
		{"ToolCallResponse", &wire.ToolCallResponse{Status: "denied", Result: "Tool execution denied by hook: h",
			Denial: &denial, Warnings: []wire.Denial{denial}, DurationMs: 1.5},
			`{"status":"denied","result":"Tool execution denied by hook: h","denial":` + denialJSON +
				`,"warnings":[` + denialJSON + `],"durationMs":1.5}`},
		{"empty ToolCallResponse", &wire.ToolCallResponse{}, `{"status":"","result":"","durationMs":0}`},
		{"withheld ToolCallResponse", &wire.ToolCallResponse{Status: "withheld", Result: "Tool result withheld by hook: h", Withheld: &denial,
			Redactions: []wire.Redaction{{Hook: "h", Rule: "jwt", Action: "Withhold", Count: 2, Bytes: 300}}},
			`{"status":"withheld","result":"Tool result withheld by hook: h","withheld":` + denialJSON +
				`,"redactions":[{"hook":"h","rule":"jwt","action":"Withhold","count":2,"bytes":300}],"durationMs":0}`},
		{"DecisionResponse", &wire.DecisionResponse{Allowed: true, Decision: "allow", Denial: &denial, Warnings: []wire.Denial{denial}},
			`{"allowed":true,"decision":"allow","denial":` + denialJSON + `,"warnings":[` + denialJSON + `]}`},
		{"asking DecisionResponse", &wire.DecisionResponse{Decision: "ask", Ask: &denial,
			Approval: &wire.Approval{Name: "deploy-x", State: "Pending"}},
			`{"allowed":false,"decision":"ask","ask":` + denialJSON + `,"approval":{"name":"deploy-x","state":"Pending"}}`},
		{"empty DecisionResponse", &wire.DecisionResponse{}, `{"allowed":false,"decision":""}`},
		{"ToolCallResponse waiting for approval", &wire.ToolCallResponse{Status: "denied", Denial: &denial,
			Approval: &wire.Approval{Name: "deploy-x", State: "Approved", DecidedBy: "carol", Reason: "ok"}},
			`{"status":"denied","result":"","denial":` + denialJSON +
				`,"approval":{"name":"deploy-x","state":"Approved","decidedBy":"carol","reason":"ok"},"durationMs":0}`},
		{"ErrorResponse", &wire.ErrorResponse{Error: "boom"}, `{"error":"boom"}`},
		{"ReadyResponse", &wire.ReadyResponse{Ready: true, Revision: "r1", Reason: "why", Sandbox: "off: x", AnonymousCallers: true,
			StateStore: "redis redis://r:6379/0: ready"},
			`{"ready":true,"revision":"r1","reason":"why","sandbox":"off: x","anonymousCallers":true,"stateStore":"redis redis://r:6379/0: ready"}`},
		{"empty ReadyResponse", &wire.ReadyResponse{}, `{"ready":false}`},
		{"ConfigStatus", &wire.ConfigStatus{Revision: "r1", IssuedAt: 100, Hooks: 2, Degraded: []string{"PluginHook/ns/p"}},
			`{"revision":"r1","issuedAt":100,"hooks":2,"degraded":["PluginHook/ns/p"]}`},
		{"empty ConfigStatus", &wire.ConfigStatus{}, `{"revision":"","issuedAt":0,"hooks":0}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(c.value)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.golden {
				t.Errorf("encoded\n %s\nwant\n %s", got, c.golden)
			}
			back := reflect.New(reflect.TypeOf(c.value).Elem())
			dec := json.NewDecoder(strings.NewReader(c.golden))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back.Interface()); err != nil {
				t.Fatalf("decoding %s: %v", c.golden, err)
			}
			if !reflect.DeepEqual(back.Interface(), c.value) {
				t.Errorf("decoded %+v, want %+v", back.Elem(), reflect.ValueOf(c.value).Elem())
			}
		})
	}
}

// TestDecisionRequestIsAToolCallRequest checks that a DecisionRequest
// decodes as the ToolCallRequest with the same fields, strictly.
func TestDecisionRequestIsAToolCallRequest(t *testing.T) {
	d := wire.DecisionRequest{SessionID: "s", ChannelID: "c", SenderID: "u", CorrelationID: "x",
		Tool: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var r wire.ToolCallRequest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	want := wire.ToolCallRequest{SessionID: d.SessionID, ChannelID: d.ChannelID, SenderID: d.SenderID,
		CorrelationID: d.CorrelationID, Tool: d.Tool, Arguments: d.Arguments}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("decoded %+v, want %+v", r, want)
	}
	if n, m := reflect.TypeFor[wire.DecisionRequest]().NumField(), reflect.TypeFor[wire.ToolCallRequest]().NumField(); n != m-1 {
		t.Errorf("DecisionRequest has %d fields, want ToolCallRequest's %d but Streaming", n, m)
	}
}

// TestEventReasons pins the Event reasons, which `kubectl toolhooks
// denials` and users' field selectors match.
func TestEventReasons(t *testing.T) {
	if wire.ReasonToolResultRedacted != "ToolResultRedacted" || wire.ReasonToolResultWithheld != "ToolResultWithheld" ||
		wire.ReasonToolResultWarned != "ToolResultWarned" {
		t.Errorf("result reasons %q, %q, %q", wire.ReasonToolResultRedacted, wire.ReasonToolResultWithheld, wire.ReasonToolResultWarned)
	}
	if wire.ReasonToolCallDenied != "ToolCallDenied" || wire.ReasonToolCallWarned != "ToolCallWarned" {
		t.Errorf("reasons %q, %q", wire.ReasonToolCallDenied, wire.ReasonToolCallWarned)
	}
	if wire.ReasonToolCallApprovalRequested != "ToolCallApprovalRequested" {
		t.Errorf("reason %q", wire.ReasonToolCallApprovalRequested)
	}
}
