package resultscan

import (
	"regexp"
	"strings"
)

// detector is one built-in rule: a secret with a recognisable shape. A
// detector's regular expression runs only on the lines that contain one of
// its anchors (matched without regard to ASCII case), so that the cost of
// scanning a result is a few substring searches unless something in it
// looks like a secret.
type detector struct {
	name    string
	set     string   // the rule set it belongs to
	anchors []string // lower-case ASCII literals one of which every match contains
	re      *regexp.Regexp
	// group is the submatch that is the secret (0: the whole match); only
	// it is redacted, so "postgres://user:[REDACTED:…]@host" keeps its shape.
	group int
	// block: the match is a PEM-style block that runs from the anchor's
	// line to its END line (or, with no END line, to the end of the text).
	block bool
	// valid, when set, must accept a match's secret (a checksum).
	valid func(string) bool
}

// Rule sets a policy names in its detectors.
const (
	// SetSecrets is credentials: cloud keys, tokens, private keys, JWTs and
	// the passwords of connection strings.
	SetSecrets = "secrets"
	// SetPersonalData is personal data: e-mail addresses and payment card
	// numbers (Luhn-checked).
	SetPersonalData = "personalData"
)

// detectors is the built-in rule table. Every rule has a test with a
// value it must find and a near miss it must not.
var detectors = []*detector{
	{name: "aws-access-key-id", set: SetSecrets, anchors: []string{"akia", "asia", "abia", "acca"},
		re: regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`)},
	{name: "aws-secret-access-key", set: SetSecrets, anchors: []string{"aws"},
		re:    regexp.MustCompile(`(?i)aws.{0,20}?(?:secret|sk|private).{0,20}?["'=:\s]{1,4}([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)`),
		group: 1},
	{name: "github-token", set: SetSecrets, anchors: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{82})\b`)},
	{name: "gitlab-token", set: SetSecrets, anchors: []string{"glpat-", "gldt-", "glrt-"},
		re: regexp.MustCompile(`\b(?:glpat|gldt|glrt)-[A-Za-z0-9_-]{20,}`)},
	{name: "slack-token", set: SetSecrets, anchors: []string{"xox"},
		re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	{name: "slack-webhook", set: SetSecrets, anchors: []string{"hooks.slack.com/"},
		re: regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{20,}`)},
	{name: "stripe-key", set: SetSecrets, anchors: []string{"sk_live_", "rk_live_"},
		re: regexp.MustCompile(`\b[sr]k_live_[A-Za-z0-9]{20,}`)},
	{name: "google-api-key", set: SetSecrets, anchors: []string{"aiza"},
		re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{name: "openai-api-key", set: SetSecrets, anchors: []string{"t3blbkfj"},
		re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{6,}T3BlbkFJ[A-Za-z0-9_-]{20,}`)},
	{name: "anthropic-api-key", set: SetSecrets, anchors: []string{"sk-ant-"},
		re: regexp.MustCompile(`\bsk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_-]{80,}`)},
	{name: "npm-token", set: SetSecrets, anchors: []string{"npm_"},
		re: regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`)},
	{name: "azure-storage-key", set: SetSecrets, anchors: []string{"accountkey="},
		re: regexp.MustCompile(`(?i)AccountKey=([A-Za-z0-9+/]{86}==)`), group: 1},
	{name: "private-key", set: SetSecrets, anchors: []string{"-----begin"},
		re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`), block: true},
	{name: "jwt", set: SetSecrets, anchors: []string{"eyj"},
		re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}`)},
	{name: "connection-string-password", set: SetSecrets, anchors: []string{"://"},
		re:    regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/@"'<>]{1,128}:([^\s@/"'<>]{3,256})@[A-Za-z0-9\[]`),
		group: 1},
	{name: "bearer-token", set: SetSecrets, anchors: []string{"bearer"},
		re:    regexp.MustCompile(`(?i)\bauthorization["']?\s*[:=]\s*["']?bearer\s+([A-Za-z0-9._~+/-]{20,}=*)`),
		group: 1},

	{name: "email-address", set: SetPersonalData, anchors: []string{"@"},
		re: regexp.MustCompile(`\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b`)},
	{name: "payment-card-number", set: SetPersonalData, anchors: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
		re:    regexp.MustCompile(`\b(?:[2-6]\d{3}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}(?:\d{3})?|3[47]\d{2}[ -]?\d{6}[ -]?\d{5})\b`),
		valid: luhn},
}

// RuleSets returns the names of the built-in rule sets.
func RuleSets() []string { return []string{SetSecrets, SetPersonalData} }

// RuleNames returns the names of the built-in rules, in table order.
func RuleNames() []string {
	names := make([]string, len(detectors))
	for i, d := range detectors {
		names[i] = d.name
	}
	return names
}

// lookup returns the detectors a name selects: a rule set's rules, or
// one rule; nil when the name is neither.
func lookup(name string) []*detector {
	var out []*detector
	for _, d := range detectors {
		if d.set == name || d.name == name {
			out = append(out, d)
		}
	}
	return out
}

// luhn reports whether the digits of s pass the Luhn checksum.
func luhn(s string) bool {
	sum, n := 0, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if n%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
	}
	return n >= 13 && sum%10 == 0
}

// lowerASCII lower-cases the ASCII letters of s and leaves every other
// byte as it is, so that offsets into the result are offsets into s.
func lowerASCII(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for j := i; j < len(b); j++ {
		if c := b[j]; 'A' <= c && c <= 'Z' {
			b[j] = c + 'a' - 'A'
		}
	}
	return string(b)
}
