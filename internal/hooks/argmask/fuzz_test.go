package argmask

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// secretForms are the places a secret is written in a command line: %s is
// the secret, written raw, single-quoted or double-quoted as the fuzzer
// picks, except in forms that put quotes around it themselves (quoted),
// where it is written as it is.
var secretForms = []struct {
	form   string
	quoted byte // the quote the form puts around the secret, or 0
	url    bool // the secret is a URL's password
	inner  bool // the secret is one word of a command inside quotes
	json   bool // the secret is a JSON string's contents
}{
	{form: `--password=%s`}, {form: `--password %s`}, {form: `--api-token=%s`}, {form: `-db-passwd=%s`},
	{form: `PASSWORD=%s`}, {form: `env DB_PWD=%s`}, {form: `export CLIENT_SECRET=%s`}, {form: `AWS_SECRET_ACCESS_KEY=%s cmd`},
	{form: `mysql -p%s`}, {form: `mysql -u root -p %s db`}, {form: `mysqldump -uroot -p%s db`}, {form: `redis-cli -h db -a %s ping`},
	{form: `curl -u user:%s https://x`}, {form: `sshpass -p %s ssh host`}, {form: `zip -P %s a.zip a`},
	{form: `curl -H 'Authorization: Bearer %s' https://x`, quoted: '\''},
	{form: `curl -H "X-Api-Key: %s" https://x`, quoted: '"'},
	{form: `sh -c 'mysql --password=%s db'`, quoted: '\'', inner: true},
	{form: `bash -c "PGPASSWORD=%s psql"`, quoted: '"', inner: true},
	{form: `curl -d '{"user":"a","password":"%s"}' https://x`, quoted: '\'', json: true},
	{form: `git clone https://alice:%s@git.example.com/x.git`, url: true},
	{form: `curl 'https://x/api?access_token=%s&page=2'`, url: true},
}

// secretKeys are argument keys whose values are secrets by their names.
var secretKeys = []string{"pwd", "pass", "password", "secret_key", "client_secret", "apiKey", "X-Auth-Token",
	"privateKey", "DB_PASSWORD", "accessToken", "Authorization", "credentials"}

var (
	plainSecret = regexp.MustCompile(`^[A-Za-z0-9._~+/=:@%^,-]+$`)
	urlSecret   = regexp.MustCompile(`^[A-Za-z0-9._~!+,=-]+$`)
	markers     = regexp.MustCompile(`\[(MASKED|REDACTED:[a-z0-9-]+|OMITTED:[0-9]+ bytes)\]`)
)

// quote writes secret for a form: raw, single-quoted or double-quoted
// (escaped), or inside the form's own quotes; false when it cannot be.
func quote(secret string, how, formQuote byte, url, inner bool) (string, bool) {
	switch {
	case inner:
		return secret, plainSecret.MatchString(secret)
	case url:
		return secret, urlSecret.MatchString(secret)
	case formQuote == '\'':
		return secret, !strings.ContainsAny(secret, "'\n")
	case formQuote == '"':
		return secret, !strings.ContainsAny(secret, "\"\\$`\n")
	}
	switch how % 3 {
	case 0:
		return secret, plainSecret.MatchString(secret)
	case 1:
		return "'" + secret + "'", !strings.Contains(secret, "'")
	default:
		r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`")
		return `"` + r.Replace(secret) + `"`, true
	}
}

// FuzzMaskNeverLogsASecret places a secret in a place that says it is one
// (an option or variable whose name says secret, a catalogued program's
// secret option, a URL's password, a header, a key of the arguments),
// anywhere among other arguments and text, and checks that the decision
// log never holds it, nor a denial's reason quoting the command line.
func FuzzMaskNeverLogsASecret(f *testing.F) {
	f.Add("cd src &&", "| tee out", "hunter2hunter2", uint8(0), uint8(0), uint8(0))
	f.Add("echo '", "'", "s3cr3t value", uint8(1), uint8(1), uint8(1))
	f.Add("# ", "\nnext", `a"b$c`, uint8(8), uint8(2), uint8(2))
	f.Add("(", "", "p4ss-w0rd", uint8(9), uint8(0), uint8(3))
	f.Add("x=$'", "", "tok_en.1", uint8(17), uint8(0), uint8(4))
	f.Add("cat <<EOF\n", "\nEOF", "pa55word!", uint8(20), uint8(0), uint8(5))
	f.Add("", "", "abc123xyz", uint8(0), uint8(0), uint8(6))
	f.Add("sudo", "&& echo done", "zz'top'zz", uint8(9), uint8(1), uint8(7))
	m, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, prefix, suffix, secret string, form, how, shape uint8) {
		if len(secret) < 6 || strings.ContainsAny(secret, "[]\x00") || !utf8.ValidString(prefix+suffix+secret) {
			return
		}
		var args any
		const hole = "\x01"
		text := func(s string) string { return prefix + " " + s + " " + suffix }
		switch shape % 4 {
		case 0, 1: // a command line, or a string that is not one
			fm := secretForms[int(form)%len(secretForms)]
			q, ok := quote(secret, how, fm.quoted, fm.url, fm.inner)
			if !ok || (fm.json && strings.ContainsAny(secret, `"\`)) {
				return
			}
			key := "command"
			if shape%4 == 1 {
				key = "note"
			}
			line := text(strings.ReplaceAll(fm.form, "%s", q))
			holed := text(strings.ReplaceAll(fm.form, "%s", hole))
			// The secret is spelled by the rest of the line, as written or
			// as its words are rewritten after quote removal.
			if strings.Contains(holed, secret) || strings.Contains(markers.ReplaceAllString(maskValue(holed), "[]"), secret) {
				return
			}
			args = map[string]any{key: line, "cwd": "src"}
			// A denial's reason quotes the command line (Go syntax).
			reason := m.MaskReason(context.Background(), fmt.Sprintf("Shell command %q is not allowed by allowedShellCommands.", line))
			text := reason
			if start, end := goQuoted(reason); start >= 0 {
				v, _ := strconv.Unquote(reason[start:end])
				text = reason[:start] + "[]" + v + "[]" + reason[end:]
			}
			if strings.Contains(markers.ReplaceAllString(text, "[]"), secret) {
				t.Fatalf("the secret %q is in the reason:\n%s\ncommand: %s", secret, reason, line)
			}
		case 2: // a key of the arguments, at some depth
			key := secretKeys[int(form)%len(secretKeys)]
			if strings.Contains(prefix+suffix+key, secret) {
				return
			}
			var v any = map[string]any{key: secret, "other": prefix}
			if how%2 == 1 {
				v = map[string]any{"env": []any{suffix, v}}
			}
			args = v
		default: // an argv
			argv := [][]any{{"mysql", "-p" + secret}, {"app", "--password", secret}, {"env", "API_TOKEN=" + secret, "app"},
				{"curl", "-u", "me:" + secret}, {"psql", "postgres://u:" + secret + "@db/x"}}[int(form)%5]
			if strings.Contains(prefix+suffix, secret) || strings.Contains(strings.ReplaceAll(jsonText(t, argv), secret, hole), secret) {
				return
			}
			if int(form)%5 == 4 && !urlSecret.MatchString(secret) {
				return
			}
			args = map[string]any{"argv": append(append([]any{prefix}, argv...), suffix)}
		}
		got := m.Mask(context.Background(), hooks.NewCall("shell", jsonText(t, args)))
		if got.Omitted != "" {
			t.Fatalf("arguments omitted: %s", got.Omitted)
		}
		var logged any
		if err := json.Unmarshal([]byte(got.JSON), &logged); err != nil {
			t.Fatal(err)
		}
		walkStrings(logged, func(s string) {
			if strings.Contains(markers.ReplaceAllString(s, "[]"), secret) {
				t.Fatalf("the secret %q is in the log:\n%s\narguments: %s", secret, s, jsonText(t, args))
			}
		})
	})
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case string:
		f(x)
	}
}
