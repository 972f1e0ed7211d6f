package resultscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// A path rule removes exactly the values it selects, wherever they are
// nested, and records how many and how many bytes; the rest of the document
// is unchanged and the secret never appears in the output.
func TestRemovePathsRemovesSelectedValues(t *testing.T) {
	s := mustNew(t, Config{RemovePaths: []PathRule{
		{Name: "ssn", Path: "$.users[*].ssn"},
		{Name: "passwords", Path: "$..password"},
	}})
	in := `{"users":[{"name":"ann","ssn":"123-45-6789"},{"name":"bob","ssn":"987-65-4321","db":{"password":"hunter22"}}],` +
		`"password":{"nested":"s3cr3t"},"count":12345678901234567890}`
	o := scan(t, s, in)
	if o.Withheld {
		t.Fatalf("withheld: %+v", o)
	}
	for _, secret := range []string{"123-45-6789", "987-65-4321", "hunter22", "s3cr3t"} {
		if strings.Contains(o.Text, secret) {
			t.Errorf("%q still in %s", secret, o.Text)
		}
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(o.Text), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, o.Text)
	}
	users := got["users"].([]any)
	if u := users[1].(map[string]any); u["name"] != "bob" || u["ssn"] != RemovedMarker("ssn") ||
		u["db"].(map[string]any)["password"] != RemovedMarker("passwords") {
		t.Errorf("users[1] = %v", u)
	}
	if got["password"] != RemovedMarker("passwords") {
		t.Errorf("password = %v", got["password"])
	}
	if !strings.Contains(o.Text, "12345678901234567890") {
		t.Errorf("a large number lost its digits: %s", o.Text)
	}
	want := []Finding{{Rule: "ssn", Action: Redact, Count: 2, Bytes: 26}, {Rule: "passwords", Action: Redact, Count: 2, Bytes: 10 + 19}}
	if len(o.Findings) != len(want) {
		t.Fatalf("findings %+v, want %+v", o.Findings, want)
	}
	for i := range want {
		if o.Findings[i] != want[i] {
			t.Errorf("finding %d = %+v, want %+v", i, o.Findings[i], want[i])
		}
	}
}

// Path rules run before the text rules: a secret outside the removed values
// is still redacted by a detector, and a Withhold path withholds.
func TestRemovePathsWithOtherRulesAndActions(t *testing.T) {
	s := mustNew(t, Config{Detectors: []string{"secrets"}, RemovePaths: []PathRule{{Name: "email", Path: "$.email"}}})
	o := scan(t, s, `{"email":"a@b.example","note":"key `+awsKeyID+`"}`)
	if strings.Contains(o.Text, awsKeyID) || strings.Contains(o.Text, "a@b.example") || o.Withheld {
		t.Fatalf("outcome %+v", o)
	}
	if len(o.Findings) != 2 || o.Findings[0].Rule != "aws-access-key-id" || o.Findings[1].Rule != "email" {
		t.Errorf("findings %+v", o.Findings)
	}

	w := mustNew(t, Config{RemovePaths: []PathRule{{Name: "token", Path: "$.token", Action: Withhold}}})
	if o := scan(t, w, `{"token":"x"}`); !o.Withheld || o.Text != "" {
		t.Errorf("withhold path: %+v", o)
	}
	if o := scan(t, w, `{"other":"x"}`); o.Withheld || o.Text != `{"other":"x"}` || len(o.Findings) != 0 {
		t.Errorf("a path that selects nothing changed the result: %+v", o)
	}

	warn := mustNew(t, Config{Action: Warn, RemovePaths: []PathRule{{Name: "token", Path: "$.token"}}})
	if o := scan(t, warn, `{"token":"x"}`); o.Withheld || o.Text != `{"token":"x"}` || len(o.Findings) != 1 || o.Changed() {
		t.Errorf("warn path: %+v", o)
	}
}

// A result that is not a JSON document cannot be shown to lack what a path
// selects: it is withheld, or only recorded when every path rule warns.
// Formatting of an untouched document is kept as it was.
func TestRemovePathsOnTextThatIsNotJSON(t *testing.T) {
	s := mustNew(t, Config{RemovePaths: []PathRule{{Name: "ssn", Path: "$.ssn"}}})
	for _, text := range []string{`{"ssn":"123-45-6789"`, `ssn: 123-45-6789`, `{"a":1} {"ssn":"1"}`, `{"a":1}]`} {
		o := scan(t, s, text)
		if !o.Withheld || o.Text != "" || len(o.Findings) != 1 || o.Findings[0].Rule != RuleNotJSON {
			t.Errorf("%q: %+v", text, o)
		}
	}
	if o := scan(t, s, "  \n"); o.Withheld || o.Text != "  \n" {
		t.Errorf("empty result: %+v", o)
	}
	warn := mustNew(t, Config{RemovePaths: []PathRule{{Name: "ssn", Path: "$.ssn", Action: Warn}}})
	if o := scan(t, warn, "plain text"); o.Withheld || o.Text != "plain text" || o.Findings[0].Rule != RuleNotJSON {
		t.Errorf("warn-only paths on text: %+v", o)
	}
	indented := "{\n  \"a\": 1,\n  \"ssn\": \"x\"\n}"
	if o := scan(t, s, indented); o.Text != "{\n  \"a\": 1,\n  \"ssn\": \""+RemovedMarker("ssn")+"\"\n}" {
		t.Errorf("indented document came out as %q", o.Text)
	}
}

func TestRemovePathsConfigErrors(t *testing.T) {
	for name, rules := range map[string][]PathRule{
		"no name":      {{Path: "$.a"}},
		"bad path":     {{Name: "a", Path: "$.["}},
		"whole result": {{Name: "a", Path: "$"}},
		"dup name":     {{Name: "jwt", Path: "$.a"}},
		"bad action":   {{Name: "a", Path: "$.a", Action: "Drop"}},
	} {
		if _, err := New(Config{Detectors: []string{"jwt"}, RemovePaths: rules}); err == nil {
			t.Errorf("%s: accepted %+v", name, rules)
		}
	}
}

// A document nested deeper than MaxPathDepth is withheld, not walked: the
// cost of selecting in it grows with the square of its depth.
func TestRemovePathsBoundTheDepth(t *testing.T) {
	s := mustNew(t, Config{RemovePaths: []PathRule{{Name: "secret", Path: "$..secret"}}})
	deep := func(n int) string {
		return strings.Repeat(`{"secret":`, n) + `"x"` + strings.Repeat("}", n)
	}
	if o := scan(t, s, deep(MaxPathDepth)); o.Withheld || strings.Contains(o.Text, `"x"`) {
		t.Errorf("depth %d: %+v", MaxPathDepth, o)
	}
	if o := scan(t, s, deep(MaxPathDepth+1)); !o.Withheld || o.Findings[0].Rule != RuleNotJSON {
		t.Errorf("depth %d: %+v", MaxPathDepth+1, o)
	}
	for text, want := range map[string]int{`"[[{"`: 0, `["\"[["]`: 1, `{"a":[{"b":"]}"}],"c":{}}`: 3, `1`: 0} {
		if got := nesting(text); got != want {
			t.Errorf("nesting(%s) = %d, want %d", text, got, want)
		}
	}
}
