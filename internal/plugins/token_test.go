package plugins

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// projectedToken lays out a token as the kubelet projects it: the file the
// pod reads is a symlink through ..data into a timestamped directory, and a
// rotation swaps ..data atomically.
type projectedToken struct {
	t   *testing.T
	dir string
	gen int
}

func newProjectedToken(t *testing.T, token string) *projectedToken {
	p := &projectedToken{t: t, dir: t.TempDir()}
	p.rotate(token)
	if err := os.Symlink(filepath.Join("..data", "token"), p.path()); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *projectedToken) path() string { return filepath.Join(p.dir, "token") }

func (p *projectedToken) rotate(token string) {
	p.gen++
	ts := filepath.Join(p.dir, "..gen"+strings.Repeat("x", p.gen))
	if err := os.Mkdir(ts, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "token"), []byte(token), 0o600); err != nil {
		p.t.Fatal(err)
	}
	tmp := filepath.Join(p.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, "..data")); err != nil {
		p.t.Fatal(err)
	}
}

// headerRecorder is an HTTP plugin allowing every call that records the
// Authorization header of each request.
type headerRecorder struct {
	mu      sync.Mutex
	headers []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.headers = append(h.headers, r.Header.Get("Authorization"))
	h.mu.Unlock()
	var rs rpcServer
	rs.handler(func(http.ResponseWriter, *request) any { return true }).ServeHTTP(w, r)
}

func (h *headerRecorder) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.headers...)
}

// tokenFixture is an HTTP plugin recording the Authorization headers it
// receives and a Manager presenting the projected token (first content
// token), checked once a minute of clk.
func tokenFixture(t *testing.T, token string) (*projectedToken, *headerRecorder, *httptest.Server, *clock, *Manager) {
	tok := newProjectedToken(t, token)
	rec := &headerRecorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	return tok, rec, srv, clk, newManager(t, Options{Token: NewTokenFile(tok.path(), time.Minute, clk.Now)})
}

func TestHTTPPluginRequestsCarryTheGatewaysRotatingToken(t *testing.T) {
	tok, rec, srv, clk, m := tokenFixture(t, "token-one\n")
	ex := executor(t, m, spec("approvals", Spec{HTTP: &HTTPSpec{URL: srv.URL}}))
	call := func() hooks.Result {
		return ex.Execute(context.Background(), newCall("write_file", `{"path":"a"}`))
	}

	if res := call(); res.Status != hooks.StatusSucceeded {
		t.Fatalf("first call: %s %+v", res.Status, res.Denial)
	}
	eventually(t, "the first call's after-event arrives", func() bool { return len(rec.seen()) == 2 })
	for i, h := range rec.seen() {
		if h != "Bearer token-one" {
			t.Fatalf("request %d carried Authorization %q, want the file's token", i, h)
		}
	}

	tok.rotate("token-two")
	if res := call(); res.Status != hooks.StatusSucceeded {
		t.Fatalf("right after the rotation: %s %+v", res.Status, res.Denial)
	}
	eventually(t, "the second call's after-event arrives", func() bool { return len(rec.seen()) == 4 })
	clk.advance(time.Minute)
	if res := call(); res.Status != hooks.StatusSucceeded {
		t.Fatalf("a check interval after the rotation: %s %+v", res.Status, res.Denial)
	}
	eventually(t, "every after-event arrives", func() bool { return len(rec.seen()) == 6 })
	if got := rec.seen(); got[4] != "Bearer token-two" || got[5] != "Bearer token-two" {
		t.Fatalf("a check interval after the rotation the plugin saw %q, want the new token", got[4:])
	}
}

func TestAMissingTokenFileFailsThePluginCallClosed(t *testing.T) {
	tok, rec, srv, clk, m := tokenFixture(t, "token-one")
	hk := build(t, m, spec("approvals", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}}))
	if _, err := hk.Before(context.Background(), newCall("write_file", `{}`)); err != nil {
		t.Fatalf("with the token file: %v", err)
	}

	if err := os.Remove(filepath.Join(tok.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute)
	_, err := hk.Before(context.Background(), newCall("write_file", `{}`))
	wantKind(t, err, KindUnavailable)
	if !strings.Contains(err.Error(), "token") {
		t.Errorf("error %q does not name the token", err)
	}
	if n := len(rec.seen()); n != 1 {
		t.Fatalf("the plugin received %d requests, want only the one made with the token", n)
	}

	// Through the executor, the default failure policy denies the call.
	ex := executor(t, m, spec("approvals-missing", Spec{HTTP: &HTTPSpec{URL: srv.URL}}))
	if res := ex.Execute(context.Background(), newCall("write_file", `{}`)); res.Status != hooks.StatusDenied {
		t.Fatalf("without a token file the call was %s, want denied", res.Status)
	}
}

func TestTokenFileRefusesAnEmptyOrMissingFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two")
	if err := os.WriteFile(two, []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"empty": empty, "two lines": two, "missing": filepath.Join(dir, "nope")} {
		if tok, err := NewTokenFile(path, 0, nil).Token(); err == nil {
			t.Errorf("%s: token %q, want an error", name, tok)
		}
	}
}

func TestHTTPPluginRedirectsAreNotFollowed(t *testing.T) {
	tok := newProjectedToken(t, "secret-token")
	var elsewhere headerRecorder
	other := httptest.NewServer(&elsewhere)
	defer other.Close()
	redirector := httptest.NewServer(http.RedirectHandler(other.URL, http.StatusTemporaryRedirect))
	defer redirector.Close()
	m := newManager(t, Options{Token: NewTokenFile(tok.path(), 0, nil)})
	hk := build(t, m, spec("redirected", Spec{Before: true, HTTP: &HTTPSpec{URL: redirector.URL}}))
	_, err := hk.Before(context.Background(), newCall("write_file", `{}`))
	wantKind(t, err, KindError)
	if got := elsewhere.seen(); len(got) != 0 {
		t.Fatalf("the redirect target received %d requests (Authorization %q)", len(got), got)
	}
}

func TestHTTPPluginWithoutATokenSourceSendsNoCredentials(t *testing.T) {
	var rec headerRecorder
	srv := httptest.NewServer(&rec)
	defer srv.Close()
	m := newManager(t, Options{})
	hk := build(t, m, spec("anon", Spec{Before: true, HTTP: &HTTPSpec{URL: srv.URL}}))
	if _, err := hk.Before(context.Background(), newCall("write_file", `{}`)); err != nil {
		t.Fatal(err)
	}
	if got := rec.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("Authorization %q, want none", got)
	}
}
