package resultscan

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/theory/jsonpath"

	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// FuzzRedactsEverySecret puts a secret of each rule, between separators,
// into arbitrary text: the result never holds it, and scanning the result
// again changes nothing (redaction reaches a fixed point).
func FuzzRedactsEverySecret(f *testing.F) {
	for _, seed := range []string{"", "plain text", "aws_secret = ", "-----BEGIN", "postgres://a:b@", "\r\n\x00", "eyJ.eyJ.", "AKIA"} {
		f.Add(seed, uint(0))
	}
	secrets := []string{awsKeyID, githubPAT, gitlabPAT, slackToken, stripeKey, googleKey, openaiKey, anthropic, npmToken, privateKey, jwt}
	s, err := New(Config{Detectors: []string{SetSecrets}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, at uint) {
		secret := secrets[at%uint(len(secrets))]
		pos := int(at/uint(len(secrets))) % (len(text) + 1)
		in := text[:pos] + "\n" + secret + "\n" + text[pos:]
		o, err := s.Scan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(o.Text, secret) {
			t.Fatalf("secret survived in %q", o.Text)
		}
		again, err := s.Scan(context.Background(), o.Text)
		if err != nil {
			t.Fatal(err)
		}
		if again.Text != o.Text {
			t.Fatalf("a second scan changed the result:\n%q\n%q", o.Text, again.Text)
		}
	})
}

// FuzzRemovePathsLeaveNothingSelected scans arbitrary text with a path rule
// for every "secret" member at any depth: text that is not one strict JSON
// document (strictjson: no repeated keys, valid UTF-8) or is nested too deep
// is withheld; a document comes back as a JSON document in which
// the path selects only the rule's marker, and a second scan changes
// nothing.
func FuzzRemovePathsLeaveNothingSelected(f *testing.F) {
	for _, seed := range []string{`{"secret":"x"}`, `[{"a":{"secret":[1,{"secret":2}]}}]`, `{"secret":{"secret":"y"}}`,
		`{"a":1}`, `"secret"`, `{"secret":"x"} {}`, "{\n  \"secret\": null\n}", `{"secret":"\u003c"}`, `[]`, ``, `nul`} {
		f.Add(seed)
	}
	s, err := New(Config{RemovePaths: []PathRule{{Name: "secret", Path: "$..secret"}}})
	if err != nil {
		f.Fatal(err)
	}
	path := jsonpath.MustParse("$..secret")
	f.Fuzz(func(t *testing.T, text string) {
		o, err := s.Scan(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(text) == "" {
			if o.Withheld || o.Text != text {
				t.Fatalf("empty text: %+v", o)
			}
			return
		}
		if strictjson.Check([]byte(text)) != nil || nesting(text) > MaxPathDepth {
			if !o.Withheld || o.Text != "" {
				t.Fatalf("text that is not JSON was passed on: %q -> %+v", text, o)
			}
			return
		}
		var doc any
		dec := json.NewDecoder(strings.NewReader(o.Text))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil || !json.Valid([]byte(o.Text)) {
			t.Fatalf("output is not JSON: %v\n%q -> %q", err, text, o.Text)
		}
		for _, v := range path.Select(doc) {
			if v != RemovedMarker("secret") {
				t.Fatalf("the path still selects %v in %q (from %q)", v, o.Text, text)
			}
		}
		again, err := s.Scan(context.Background(), o.Text)
		if err != nil {
			t.Fatal(err)
		}
		if again.Text != o.Text {
			t.Fatalf("a second scan changed the result:\n%q\n%q", o.Text, again.Text)
		}
	})
}
