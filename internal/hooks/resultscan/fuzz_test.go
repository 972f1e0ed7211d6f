package resultscan

import (
	"context"
	"strings"
	"testing"
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
