package argmask

import (
	"path"
	"slices"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// The masking of secrets by what names them, before the result scanner's
// detectors look for secrets by their form:
//
//   - argument keys, environment variables, options, headers and
//     configuration keys whose names say secret (SecretName): password,
//     passwd, pwd, pass, token, secret, client_secret, secret_key, apiKey,
//     authorization, credentials, ...; their values become MaskedMarker;
//   - the options of catalogued programs whose values are secrets although
//     their names do not say so (mysql -psecret, curl -u user:pw,
//     redis-cli -a pw; shellcheck.SecretOptions);
//   - the password of a URL's user information (https://user:pw@host).
//
// A shell command is read twice. First as the shell reads it (mvdan.cc/sh):
// an assignment's value, an option's value glued or in the next word, and
// each word's value after quote removal, so that quoting cannot hide a
// secret; a word that holds a command (sh -c '...') is read again as a
// command. Then as text, whatever it is: a name that says secret followed
// by '=', ':' (or, for an option, blanks) has what follows masked up to the
// end of its shell word, quoted string or line. The text pass also covers
// what the shell does not read as words (comments, here-documents, a line
// that does not parse) and every string that is not a command.

// secretNeedles are the lower-case strings a name saying secret contains
// at least one of; text without any (nor a URL, nor a catalogued program)
// is not looked at further.
var secretNeedles = []string{"pass", "pw", wordSecret, wordToken, "cred", wordAuth, "cookie", "bearer", wordKey}

// Words of secret names that are both needles and words SecretName looks
// for.
const (
	wordSecret = "secret"
	wordAuth   = "auth"
	wordToken  = "token"
	wordKey    = "key"
)

// urlNeedle starts the authority of a URL.
const urlNeedle = "://"

// needle kinds.
const (
	needleName = iota
	needleURL
	needleProgram
)

type needle struct {
	text string // lower case
	kind int
}

var (
	// byBigram are the needles by their first two bytes (lower case),
	// longest first; bigrams holds 1 + their index for each two bytes.
	byBigram [][]needle
	bigrams  [1 << 16]uint8
	// lowerTable maps each byte to its ASCII lower case.
	lowerTable [256]byte
)

func init() {
	for c := range 256 {
		lowerTable[c] = byte(c)
		if 'A' <= c && c <= 'Z' {
			lowerTable[c] = byte(c) + 'a' - 'A'
		}
	}
	programs := shellcheck.SecretOptionPrograms()
	needles := make([]needle, 0, len(secretNeedles)+1+len(programs))
	for _, n := range secretNeedles {
		needles = append(needles, needle{n, needleName})
	}
	needles = append(needles, needle{urlNeedle, needleURL})
	for _, p := range programs {
		needles = append(needles, needle{strings.ToLower(p), needleProgram})
	}
	// Longest first, so that mysqldump is found before mysql.
	slices.SortStableFunc(needles, func(a, b needle) int { return len(b.text) - len(a.text) })
	for _, n := range needles {
		b := int(n.text[0])<<8 | int(n.text[1])
		if bigrams[b] == 0 {
			byBigram = append(byBigram, nil)
			bigrams[b] = uint8(len(byBigram))
		}
		byBigram[bigrams[b]-1] = append(byBigram[bigrams[b]-1], n)
	}
	if len(byBigram) > 255 {
		panic("argmask: too many needle bigrams")
	}
}

func lower(c byte) byte { return lowerTable[c] }

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix p,
// ignoring case.
func hasPrefixFold(s, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := range len(p) {
		if lower(s[i]) != p[i] {
			return false
		}
	}
	return true
}

// needlesAt calls f with each needle at s[i:] (longest first) until f
// returns false.
func needlesAt(s string, i int, f func(n needle) bool) {
	if i+1 >= len(s) {
		return
	}
	b := bigrams[int(lower(s[i]))<<8|int(lower(s[i+1]))]
	if b == 0 {
		return
	}
	for _, n := range byBigram[b-1] {
		if hasPrefixFold(s[i:], n.text) && !f(n) {
			return
		}
	}
}

// mayHoldSecret reports whether s holds a needle anywhere.
func mayHoldSecret(s string) bool {
	found := false
	for i := 0; i+1 < len(s) && !found; i++ {
		needlesAt(s, i, func(needle) bool { found = true; return false })
	}
	return found
}

// SecretName reports whether a value named name (an argument key, an
// environment variable, an option without its dashes, a header) is a
// secret by its name. The name is split into lower-case words at
// punctuation and case changes (client_secret, clientSecret and
// CLIENT-SECRET are client, secret); it says secret when its last word is
// or ends with password, passwd, passphrase, secret, token, pwd, apikey,
// secretkey or privatekey, is pass, pw, auth, authorization, cookie,
// bearer or credentials, or is key after api, secret, private, client,
// signing, encryption, master, auth, session, account or storage, or when a
// word is secret and the last is key, value or data (AWS_SECRET_ACCESS_KEY).
// A name whose first word is no (--no-password) is not a secret.
func SecretName(name string) bool {
	if !mayHoldSecret(name) {
		return false
	}
	words := splitWords(name)
	if len(words) == 0 || (words[0] == "no" && len(words) > 1) {
		return false
	}
	last := words[len(words)-1]
	switch last {
	case "pass", "pw", wordAuth, "authorization", "cookie", "bearer", "credentials", "credential", "creds":
		return true
	case wordKey, "value", "data":
		if slices.Contains(words, wordSecret) {
			return true
		}
		if last == wordKey && len(words) > 1 {
			switch words[len(words)-2] {
			case "api", wordSecret, "private", "client", "signing", "encryption", "master", wordAuth, "session", "account", "storage":
				return true
			}
		}
		return false
	}
	for _, suffix := range [...]string{"password", "passwd", "passphrase", wordSecret, wordToken, "pwd", "apikey", "secretkey", "privatekey"} {
		if strings.HasSuffix(last, suffix) {
			return true
		}
	}
	return false
}

// secretEnvName is SecretName for a shell variable: PWD and OLDPWD are the
// shell's working directories.
func secretEnvName(name string) bool {
	return name != "PWD" && name != "OLDPWD" && SecretName(name)
}

// splitWords splits name into lower-case words (see SecretName).
func splitWords(name string) []string {
	var words []string
	start := -1
	flush := func(end int) {
		if start >= 0 {
			words = append(words, strings.ToLower(name[start:end]))
			start = -1
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) {
			flush(i)
			continue
		}
		if start >= 0 && isUpper(c) {
			prev := name[i-1]
			if isLowerOrDigit(prev) || (isUpper(prev) && i+1 < len(name) && isLower(name[i+1])) {
				flush(i)
			}
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(name))
	return words
}

func isUpper(c byte) bool        { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool        { return 'a' <= c && c <= 'z' }
func isLowerOrDigit(c byte) bool { return isLower(c) || ('0' <= c && c <= '9') }
func isAlnum(c byte) bool        { return isUpper(c) || isLowerOrDigit(c) }

// isNameByte is a byte of a name the text pass reads around a needle.
func isNameByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

// isBlank is a blank inside a line.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// isSpace is white space.
func isSpace(c byte) bool { return isBlank(c) || c == '\n' || c == '\r' || c == '\v' || c == '\f' }

// span is a half-open byte range to mask.
type span struct{ start, end int }

// maskText is the text pass (see the top of this file).
func maskText(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	var spans []span
	// Needles inside a value masked already, or inside a name read
	// already, are skipped, so that the pass stays linear in s.
	masked, nameEnd := 0, 0
	add := func(start, end int) {
		if start < end {
			spans = append(spans, span{start, end})
			masked = max(masked, end)
		}
	}
	for i := 0; i+1 < len(s); i++ {
		if i < masked {
			i = masked - 1
			continue
		}
		needlesAt(s, i, func(n needle) bool {
			switch n.kind {
			case needleURL:
				urlPassword(s, i, add)
			case needleProgram:
				programOptions(s, i, n.text, add)
			default:
				if i < nameEnd {
					return false
				}
				nameEnd = namedValue(s, i, add)
			}
			return false
		})
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.end <= at {
			continue
		}
		if sp.start >= at {
			b.WriteString(s[at:sp.start])
			b.WriteString(MaskedMarker)
		} // else it overlaps the span just masked
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// namedValue masks the value of the name around the needle at i, if the
// name says secret, and returns where the name ends.
func namedValue(s string, i int, add func(start, end int)) int {
	l, r := nameAround(s, i)
	name := s[l:r]
	if !SecretName(strings.TrimLeft(name, "-")) {
		return r
	}
	before := byte(0)
	if l > 0 {
		before = s[l-1]
	}
	j := r
	switch {
	case j < len(s) && (s[j] == '"' || s[j] == '\''):
		j++
	case strings.HasPrefix(s[j:], `\"`):
		j += 2
	}
	k := skipBlanks(s, j)
	switch {
	case k < len(s) && (s[k] == '=' || s[k] == ':'):
		if strings.HasPrefix(s[k:], urlNeedle) {
			return r
		}
		stops, ok := valueStops(s[k], before, j == r, name)
		if !ok {
			return r
		}
		start, end := valueExtent(s, skipBlanks(s, k+1), stops)
		add(start, end)
	case name[0] == '-' && j == r && k > r:
		start, end := valueExtent(s, k, "")
		add(start, end)
	}
	return r
}

// nameAround returns the extent of the name around the byte at i.
func nameAround(s string, i int) (l, r int) {
	l, r = i, i
	for l > 0 && isNameByte(s[l-1]) {
		l--
	}
	for r < len(s) && isNameByte(s[r]) {
		r++
	}
	return l, r
}

// skipBlanks returns the index of the first byte from i on that is not a
// blank, or len(s).
func skipBlanks(s string, i int) int {
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return i
}

// valueStops returns the bytes that end the value after the name, given
// its separator sep (= or :), the byte before the name and whether the
// name is unquoted; ok is false when the value is not a secret's
// (PWD=dir).
func valueStops(sep, before byte, unquoted bool, name string) (stops string, ok bool) {
	switch {
	case sep == '=' && (before == '?' || before == '&' || before == ';'):
		return "&#;", true // a URL query's parameter
	case sep == ':' && unquoted:
		// A header or a YAML key: the rest of the line, or of the
		// quoted string the name starts.
		stops = "\n"
		if before == '\'' || before == '"' || before == '`' {
			stops += string(before)
		}
		return stops, true
	case sep == ':':
		return ",}]", true
	case sep == '=' && !secretEnvName(name) && isEnvName(name):
		return "", false // PWD=dir
	}
	return "", true
}

// valueExtent returns the extent of the value starting at v: inside its
// quotes when it starts with one (to the closing quote, or the end), else a
// shell word (blanks end it outside quotes) that also ends at any byte of
// stops; stops holding a newline means the rest of the line instead of a
// word.
func valueExtent(s string, v int, stops string) (int, int) {
	if v >= len(s) {
		return v, v
	}
	switch {
	case strings.HasPrefix(s[v:], `\"`):
		if e := strings.Index(s[v+2:], `\"`); e >= 0 {
			return v + 2, v + 2 + e
		}
		return v, len(s)
	case s[v] == '"':
		for e := v + 1; e < len(s); e++ {
			switch s[e] {
			case '\\':
				e++
			case '"':
				return v + 1, e
			}
		}
		return v, len(s)
	case s[v] == '\'':
		if e := strings.IndexByte(s[v+1:], '\''); e >= 0 {
			return v + 1, v + 1 + e
		}
		return v, len(s)
	}
	if strings.IndexByte(stops, '\n') >= 0 {
		e := v
		for ; e < len(s) && strings.IndexByte(stops, s[e]) < 0; e++ {
			if s[e] == '\\' && strings.IndexByte(stops, '"') >= 0 {
				e++ // an escaped quote inside double quotes
			}
		}
		return v, min(e, len(s))
	}
	return v, wordEnd(s, v, stops)
}

// wordEnd returns where the shell word starting at v ends: at a blank
// outside quotes, at a byte of stops outside quotes, or at the end.
func wordEnd(s string, v int, stops string) int {
	var q byte
	for e := v; e < len(s); e++ {
		c := s[e]
		switch {
		case q == 0 && (isSpace(c) || strings.IndexByte(stops, c) >= 0 || strings.IndexByte(";|&<>()", c) >= 0):
			return e
		case c == '\\' && q != '\'':
			e++
		case q == 0 && (c == '\'' || c == '"'):
			q = c
		case c == q:
			q = 0
		}
	}
	return len(s)
}

// urlPassword masks the password of the URL whose "://" is at i: the user
// information runs to the last '@' before the authority ends.
func urlPassword(s string, i int, add func(start, end int)) {
	start := i + len(urlNeedle)
	at := -1
	for e := start; e < len(s); e++ {
		c := s[e]
		if isSpace(c) || strings.IndexByte("/?#'\"`<>", c) >= 0 {
			break
		}
		if c == '@' {
			at = e
		}
	}
	if at < 0 {
		return
	}
	if c := strings.IndexByte(s[start:at], ':'); c >= 0 {
		add(start+c+1, at)
	}
}

// programOptions masks, in the command whose program prog starts at i, the
// values of its secret options (shellcheck.SecretOptions).
func programOptions(s string, i int, prog string, add func(start, end int)) {
	end := i + len(prog)
	isProgByte := func(c byte) bool { return isNameByte(c) || c == '+' }
	if (i > 0 && isProgByte(s[i-1])) || (end < len(s) && isProgByte(s[end])) {
		return
	}
	opts := shellcheck.SecretOptions(prog)
	maskNext := false
	for p := end; ; {
		for p < len(s) && isBlank(s[p]) {
			p++
		}
		if p >= len(s) || strings.IndexByte("\n;|&)", s[p]) >= 0 {
			return
		}
		e := wordEnd(s, p, "")
		if e == p {
			e = p + 1
		}
		if !maskNext && shellcheck.SecretOptions(path.Base(strings.Trim(s[p:e], `'"\`))) != nil {
			return // the next program's options are its own (and each word is read once)
		}
		if maskNext {
			add(p, e)
			maskNext = false
			p = e
			continue
		}
		tok := strings.TrimLeft(s[p:e], `'"\`)
		off := p + (e - p - len(tok))
		// The value follows the option in the word, or is the next word
		// when nothing but quotes follows (which may close the option's
		// quotes or be the value): both are masked then.
		value := func(at int) {
			add(at, e)
			if strings.Trim(s[at:e], `'"`) == "" {
				maskNext = true
			}
		}
		for _, o := range opts {
			switch {
			case strings.HasPrefix(tok, o+"="):
				add(off+len(o)+1, e)
			case strings.HasPrefix(tok, o) && (len(o) == 2 || strings.Trim(tok[len(o):], `'"`) == ""):
				value(off + len(o))
			case len(o) == 2 && len(tok) > 2 && tok[0] == '-' && tok[1] != '-':
				// A single-letter option bundled with others before it
				// (-upsecret).
				if at := strings.IndexByte(tok[1:], o[1]); at >= 0 {
					value(off + at + 2)
				}
			}
		}
		p = e
	}
}
