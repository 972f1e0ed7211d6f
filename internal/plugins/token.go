package plugins

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenSource yields the bearer token the gateway presents to HTTP plugins.
// Implementations are safe for concurrent use.
type TokenSource interface {
	// Token returns the current token; an error fails the plugin call, so
	// the plugin's failure policy applies.
	Token() (string, error)
}

// DefaultTokenCheckInterval is how often a TokenFile looks at its file for a
// rotated token.
const DefaultTokenCheckInterval = time.Second

// maxTokenBytes bounds the token file read (a ServiceAccount token is about 1 KB).
const maxTokenBytes = 64 << 10

// TokenFile is a token kept in a file that is replaced when the token
// rotates, such as a projected ServiceAccount token the kubelet renews. The
// content is cached; at most once per check interval the file is looked at
// (a stat) and read again only when it changed (another file, size or
// modification time). A missing, unreadable or empty file is an error, never
// the last token or no token.
type TokenFile struct {
	path  string
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	token   string
	info    os.FileInfo // of the file token was read from
	checked time.Time
}

// NewTokenFile returns a TokenFile reading path, looking for changes at most
// every interval (DefaultTokenCheckInterval when not positive). now is the
// clock; nil means time.Now.
func NewTokenFile(path string, interval time.Duration, now func() time.Time) *TokenFile {
	if interval <= 0 {
		interval = DefaultTokenCheckInterval
	}
	if now == nil {
		now = time.Now
	}
	return &TokenFile{path: path, every: interval, now: now}
}

// Token returns the file's token, re-reading the file when it changed.
func (f *TokenFile) Token() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.token != "" && now.Sub(f.checked) < f.every {
		return f.token, nil
	}
	info, err := os.Stat(f.path)
	if err != nil {
		f.token, f.info = "", nil
		return "", fmt.Errorf("reading the plugin token: %w", err)
	}
	if f.token != "" && sameFile(f.info, info) {
		f.checked = now
		return f.token, nil
	}
	tok, err := readToken(f.path)
	if err != nil {
		f.token, f.info = "", nil
		return "", err
	}
	f.token, f.info, f.checked = tok, info, now
	return tok, nil
}

// sameFile reports whether b is a and unchanged.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func readToken(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading the plugin token: %w", err)
	}
	defer fh.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(io.LimitReader(fh, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the plugin token: %w", err)
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("the plugin token file %s is larger than %d bytes", path, maxTokenBytes)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the plugin token file %s is empty", path)
	}
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("the plugin token file %s holds more than one line", path)
	}
	return tok, nil
}
