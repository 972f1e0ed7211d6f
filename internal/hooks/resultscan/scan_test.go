package resultscan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Fake credentials of each rule's shape, built at run time so that no
// scanner of this repository mistakes the source for a leak.
var (
	awsKeyID    = "AKIA" + "Z3MSJV4WZKQEXAMP"
	awsSecret   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
	githubPAT   = "ghp_" + "8Rf3kXq9PzL2mN7vB4cT1wY6hJ0sD5aE2gKq"
	githubFine  = "github_pat_" + strings.Repeat("A1b2C3d4E5", 8) + "xy"
	gitlabPAT   = "glpat-" + "xYz12AbC34dEf56GhI78"
	slackToken  = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl"
	slackHook   = "hooks.slack.com/services/" + "T0000ABCD/B0000EFGH/XXXXXXXXXXXXXXXXXXXXXXXX"
	stripeKey   = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
	googleKey   = "AIza" + "SyD-1234567890abcdefghijklmnopqrstu"
	openaiKey   = "sk-proj-" + "abcdef123456" + "T3BlbkFJ" + "abcdefghijklmnopqrstuvwx"
	anthropic   = "sk-ant-api03-" + strings.Repeat("aB3_-xY9", 11)
	npmToken    = "npm_" + "abcdefghijklmnopqrstuvwxyz0123456789"
	azureKey    = strings.Repeat("Ab3+/x9Z", 10) + "Ab3+/x" + "=="
	privateKey  = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\naGVsbG8gd29ybGQgdGhpcyBpcyBub3QgYSByZWFsIGtleQ==\n-----END RSA PRIVATE KEY-----"
	jwt         = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0" + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	dbPassword  = "s3cr3tPa55"
	bearerToken = "abcDEF123456ghiJKL789012mnoPQR"
	cardNumber  = "4111 1111 1111 1111"
)

func mustNew(t testing.TB, cfg Config) *Scanner {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scan(t testing.TB, s *Scanner, text string) Outcome {
	t.Helper()
	o, err := s.Scan(context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Every built-in rule finds its shape in context and redacts exactly the
// secret, and a near miss of the same shape is left alone.
func TestEveryRuleFindsItsShapeAndNotANearMiss(t *testing.T) {
	tests := []struct {
		rule, text, secret, near string
	}{
		{"aws-access-key-id", "aws_access_key_id = " + awsKeyID + "\n", awsKeyID, "id = AKIA" + "Z3MSJV4WZKQ\n"},
		{"aws-secret-access-key", "aws_secret_access_key = " + awsSecret + "\n", awsSecret, "aws region = " + awsSecret + "\n"},
		{"github-token", "token: " + githubPAT, githubPAT, "token: ghp_short"},
		{"github-token", "GH=" + githubFine + ";", githubFine, "GH=github_pat_short"},
		{"gitlab-token", "export GITLAB=" + gitlabPAT, gitlabPAT, "export GITLAB=glpat-short"},
		{"slack-token", `{"token":"` + slackToken + `"}`, slackToken, `{"token":"xoxb-1"}`},
		{"slack-webhook", "https://" + slackHook, slackHook, "https://hooks.slack.com/services/"},
		{"stripe-key", "STRIPE=" + stripeKey, stripeKey, "STRIPE=sk_test_4eC39HqLyjWDarjtT1zdp7dc"},
		{"google-api-key", "key=" + googleKey + "&q=1", googleKey, "key=AIzaShort"},
		{"openai-api-key", "OPENAI_API_KEY=" + openaiKey, openaiKey, "OPENAI_API_KEY=sk-proj-abcdef"},
		{"anthropic-api-key", "x-api-key: " + anthropic, anthropic, "x-api-key: sk-ant-api03-short"},
		{"npm-token", "//registry.npmjs.org/:_authToken=" + npmToken, npmToken, "npm_config_cache=/tmp/x"},
		{"azure-storage-key", "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + azureKey + ";EndpointSuffix=core.windows.net", azureKey, "AccountKey=short=="},
		{"private-key", "key:\n" + privateKey + "\nafter", privateKey, "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----"},
		{"jwt", "Authorization token " + jwt, jwt, "eyJhbGciOi.eyJzdWIi"},
		{"connection-string-password", "DATABASE_URL=postgres://admin:" + dbPassword + "@db.internal:5432/app", dbPassword, "see https://example.com/a:b@c"},
		{"bearer-token", "Authorization: Bearer " + bearerToken, bearerToken, "the bearer of this letter"},
		{"email-address", "contact jane.doe@example.co.uk today", "jane.doe@example.co.uk", "user@localhost"},
		{"payment-card-number", "card " + cardNumber + " exp 12/29", cardNumber, "card 4111 1111 1111 1112"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			s := mustNew(t, Config{Detectors: []string{tt.rule}})
			o := scan(t, s, tt.text)
			if strings.Contains(o.Text, tt.secret) {
				t.Errorf("the secret is still in the result: %q", o.Text)
			}
			want := strings.Replace(tt.text, tt.secret, RedactedMarker(tt.rule), 1)
			if o.Text != want {
				t.Errorf("result %q, want %q", o.Text, want)
			}
			if len(o.Findings) != 1 || o.Findings[0] != (Finding{Rule: tt.rule, Action: Redact, Count: 1, Bytes: len(tt.secret)}) {
				t.Errorf("findings %+v", o.Findings)
			}
			if n := scan(t, s, tt.near); n.Changed() || len(n.Findings) > 0 {
				t.Errorf("near miss %q: %+v", tt.near, n)
			}
			// Each rule's set finds it too.
			set := lookup(tt.rule)[0].set
			if o := scan(t, mustNew(t, Config{Detectors: []string{set}}), tt.text); strings.Contains(o.Text, tt.secret) {
				t.Errorf("rule set %s leaves the secret: %q", set, o.Text)
			}
		})
	}
}

// A private key with no END line is redacted to the end of the text: a
// truncated key is still a key.
func TestTruncatedPrivateKeyIsRedactedToTheEnd(t *testing.T) {
	s := mustNew(t, Config{Detectors: []string{SetSecrets}})
	cut := privateKey[:len(privateKey)-40]
	o := scan(t, s, "head\n"+cut)
	if o.Text != "head\n"+RedactedMarker("private-key") {
		t.Errorf("got %q", o.Text)
	}
}

// Several secrets on one line and across lines, found by several rules and
// by anchors in any order, are all redacted.
func TestManySecretsAllRedacted(t *testing.T) {
	s := mustNew(t, Config{Detectors: []string{SetSecrets}})
	secrets := []string{awsKeyID, githubPAT, jwt, dbPassword, stripeKey, googleKey}
	text := "a=" + awsKeyID + " b=" + githubPAT + " c=" + jwt + "\nASIA\nx postgres://u:" + dbPassword + "@h/db y=" + stripeKey + "\n" + googleKey + " AKIA" + "Z3MSJV4WZKQEXAMQ\n"
	o := scan(t, s, text)
	for _, sec := range secrets {
		if strings.Contains(o.Text, sec) {
			t.Errorf("%q survived: %q", sec, o.Text)
		}
	}
	if strings.Contains(o.Text, "AKIA"+"Z3MSJV4WZKQEXAMQ") {
		t.Errorf("the second AWS key survived (an anchor's earlier line was skipped): %q", o.Text)
	}
}

func TestActions(t *testing.T) {
	text := "line one\ntoken " + githubPAT + "\nSet-Cookie: session=abc\nlast"
	t.Run("Withhold", func(t *testing.T) {
		o := scan(t, mustNew(t, Config{Detectors: []string{SetSecrets}, Action: Withhold}), text)
		if !o.Withheld || o.Text != "" || !o.Changed() {
			t.Fatalf("%+v", o)
		}
		if o.Findings[0].Rule != "github-token" || o.Findings[0].Action != Withhold {
			t.Errorf("%+v", o.Findings)
		}
	})
	t.Run("Warn", func(t *testing.T) {
		o := scan(t, mustNew(t, Config{Detectors: []string{SetSecrets}, Action: Warn}), text)
		if o.Withheld || o.Text != text || o.Changed() || len(o.Findings) != 1 || o.Findings[0].Action != Warn {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("removal and pattern with their own actions", func(t *testing.T) {
		o := scan(t, mustNew(t, Config{
			Detectors:   []string{SetSecrets},
			Patterns:    []Pattern{{Name: "internal-host", Regex: `[a-z]+\.corp\.example`, Action: Warn}},
			RemoveLines: []Pattern{{Name: "cookies", Regex: `^Set-Cookie:`}},
		}), text+"\nhost db.corp.example")
		want := "line one\ntoken " + RedactedMarker("github-token") + "\n" + RemovedMarker("cookies") + "\nlast\nhost db.corp.example"
		if o.Text != want {
			t.Errorf("got %q\nwant %q", o.Text, want)
		}
		if len(o.Findings) != 3 || o.Findings[1].Rule != "internal-host" || o.Findings[1].Action != Warn {
			t.Errorf("%+v", o.Findings)
		}
	})
	t.Run("a withholding pattern withholds whatever the others say", func(t *testing.T) {
		o := scan(t, mustNew(t, Config{
			Detectors: []string{SetSecrets},
			Patterns:  []Pattern{{Name: "customer-id", Regex: `CUST-\d{6}`, Action: Withhold}},
		}), text+" CUST-123456")
		if !o.Withheld || o.Text != "" {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("overlapping redactions merge", func(t *testing.T) {
		o := scan(t, mustNew(t, Config{
			Detectors: []string{SetSecrets},
			Patterns:  []Pattern{{Name: "token-line", Regex: `token \S+`}},
		}), text)
		if strings.Contains(o.Text, "ghp_") || strings.Count(o.Text, "[REDACTED:") != 1 {
			t.Errorf("%q", o.Text)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Detectors: []string{"nope"}},
		{Action: "Drop"},
		{Patterns: []Pattern{{Name: "x", Regex: "("}}},
		{Patterns: []Pattern{{Name: "x", Regex: "a*"}}},
		{Patterns: []Pattern{{Regex: "a"}}},
		{Patterns: []Pattern{{Name: "jwt", Regex: "a"}}, Detectors: []string{"jwt"}},
		{Patterns: []Pattern{{Name: "x", Regex: "a"}}, RemoveLines: []Pattern{{Name: "x", Regex: "b"}}},
		{RemoveLines: []Pattern{{Name: "x", Regex: "a", Action: "Maybe"}}},
		{MaxBytes: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// A result over the bound is withheld, never passed on unscanned.
func TestTooLargeIsWithheld(t *testing.T) {
	s := mustNew(t, Config{Detectors: []string{SetSecrets}, MaxBytes: 1 << 10})
	o := scan(t, s, strings.Repeat("x", 1<<10+1))
	if !o.Withheld || o.Findings[0].Rule != RuleTooLarge {
		t.Fatalf("%+v", o)
	}
}

// A scan that cannot finish (cancelled, out of time) is an error, never a
// pass: the caller withholds.
func TestCancelledScanIsAnError(t *testing.T) {
	s := mustNew(t, Config{Detectors: []string{SetSecrets}, Patterns: []Pattern{{Name: "p", Regex: `x+y`}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := s.Scan(ctx, "some text "+githubPAT); !errors.Is(err, ErrScan) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// A long scan is cut short between pieces.
	big := strings.Repeat(strings.Repeat("x", 100)+"\n", 200000)
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s.Scan(ctx2, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// A 50 MB result with secrets near its start, across a piece boundary and at
// its end is scanned whole: all of them are redacted.
func TestFiftyMegabytesScannedWhole(t *testing.T) {
	s := mustNew(t, Config{Detectors: []string{SetSecrets}, Patterns: []Pattern{{Name: "ticket", Regex: `TICKET-\d+`}}})
	line := strings.Repeat("lorem ipsum dolor sit amet ", 3) + "\n"
	var b strings.Builder
	b.WriteString("first " + awsKeyID + "\n")
	for b.Len() < chunkSize-10 {
		b.WriteString(line)
	}
	b.WriteString("TICKET-12345 crosses " + githubPAT + "\n")
	for b.Len() < 50<<20 {
		b.WriteString(line)
	}
	b.WriteString(privateKey)
	text := b.String()
	o := scan(t, s, text)
	for _, sec := range []string{awsKeyID, githubPAT, privateKey, "TICKET-12345"} {
		if strings.Contains(o.Text, sec) {
			t.Errorf("%.20q survived in 50 MB", sec)
		}
	}
	if len(o.Findings) != 4 {
		t.Errorf("findings %+v", o.Findings)
	}
}
