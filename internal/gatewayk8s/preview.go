package gatewayk8s

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// Bounds of a ToolCallApproval's argument preview.
const (
	maxPreviewArgs  = 32
	maxPreviewValue = 512
	maxPreviewName  = 253
)

// masked replaces a value, or the part of a string, that looks like a secret.
const masked = "<masked>"

// secretWords are the words of an argument's key (split at case changes,
// digits and punctuation) that mark its value as a secret.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "passphrase": true, "secret": true, "secrets": true,
	"token": true, "tokens": true, "key": true, "apikey": true, "auth": true, "authorization": true,
	"credential": true, "credentials": true, "private": true, "privatekey": true,
	"cookie": true, "cookies": true, "bearer": true, "signature": true,
}

// secretInfixes mark a key as secret wherever they occur in it, lowercased
// and without punctuation ("dbPassword", "x_api_key", "SESSIONTOKEN"). Words
// such as "keys", "author" or "keyboard" are not among them.
var secretInfixes = []string{"password", "passwd", "secret", "token", "apikey", "privatekey", "credential", "cookie", "authorization"}

// secretKey reports whether an argument named key holds a secret.
func secretKey(key string) bool {
	flat := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, key)
	for _, infix := range secretInfixes {
		if strings.Contains(flat, infix) {
			return true
		}
	}
	return slices.ContainsFunc(keyWords(key), func(w string) bool { return secretWords[w] })
}

// keyWords splits a key into lowercase words at punctuation, digits and
// lower-to-upper case changes ("apiKey" -> api, key).
func keyWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range key {
		switch {
		case !unicode.IsLetter(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// secretPatterns match well-known credential shapes inside a string; the
// match is masked after its first group, if any.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`), // JWT
	regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),                     // AWS access key id
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),                      // GitHub tokens
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`),
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`),        // Slack tokens
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`),                // API secret keys
	regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`),             // GitLab tokens
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`),                // Google API keys
	regexp.MustCompile(`(?i)\b((?:bearer|basic)\s+)[^\s'"]{8,}`), // Authorization header values
}

// longRun matches runs of base64 and hex characters long enough to be keys.
var longRun = regexp.MustCompile(`[A-Za-z0-9+/_-]{32,}={0,2}`)

// maskString replaces the parts of s that look like secrets. A PEM block
// masks the whole string.
func maskString(s string) string {
	if strings.Contains(s, "-----BEGIN") {
		return masked
	}
	for _, re := range secretPatterns {
		s = re.ReplaceAllString(s, "${1}"+masked)
	}
	return longRun.ReplaceAllStringFunc(s, func(run string) string {
		if randomLooking(run) {
			return masked
		}
		return run
	})
}

// randomLooking reports whether a run of base64 or hex characters looks like
// key material rather than a path or a name: a segment between slashes that
// is 32 or more hex digits, or 24 or more characters with high entropy that
// switch between upper case, lower case and digits as often as random text
// does (CamelCase names switch far less). Paths keep their word-like segments.
func randomLooking(run string) bool {
	for seg := range strings.SplitSeq(run, "/") {
		if len(seg) >= 32 && strings.Trim(seg, "0123456789abcdefABCDEF") == "" {
			return true
		}
		if len(seg) < 24 {
			continue
		}
		if classSwitches(seg) >= 0.45*float64(len(seg)-1) && entropy(seg) >= 3.5 {
			return true
		}
	}
	return false
}

// classSwitches counts the neighbouring bytes of s that differ in class
// (upper case, lower case, digit, other).
func classSwitches(s string) float64 {
	class := func(b byte) int {
		switch {
		case b >= 'A' && b <= 'Z':
			return 0
		case b >= 'a' && b <= 'z':
			return 1
		case b >= '0' && b <= '9':
			return 2
		}
		return 3
	}
	n := 0
	for i := 1; i < len(s); i++ {
		if class(s[i]) != class(s[i-1]) {
			n++
		}
	}
	return float64(n)
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// maskValue returns v with the values under secret keys, and the secret
// parts of strings, masked, at any depth.
func maskValue(v any) any {
	switch v := v.(type) {
	case string:
		return maskString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if secretKey(k) {
				out[k] = masked
			} else {
				out[k] = maskValue(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = maskValue(e)
		}
		return out
	default:
		return v
	}
}

// previewArguments returns the preview of a call's arguments for the person
// deciding it: the top-level arguments sorted by name (at most
// maxPreviewArgs), each value as JSON with secrets masked and shortened to
// maxPreviewValue bytes. Paths and commands are kept as given.
func previewArguments(args map[string]any) []policyv1alpha1.ArgumentPreview {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	if len(names) > maxPreviewArgs {
		names = names[:maxPreviewArgs]
	}
	out := make([]policyv1alpha1.ArgumentPreview, 0, len(names))
	for _, name := range names {
		value := masked
		if !secretKey(name) {
			value = previewJSON(maskValue(args[name]))
		}
		out = append(out, policyv1alpha1.ArgumentPreview{
			Name:  truncate(name, maxPreviewName),
			Value: truncate(value, maxPreviewValue),
		})
	}
	return out
}

// previewJSON is v as JSON without HTML escaping, so that masked reads as
// written.
func previewJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return `"<unprintable>"`
	}
	return strings.TrimSuffix(b.String(), "\n")
}
