package plugins

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
	"github.com/toolhooks/toolhooks/internal/tracing"
)

// httpTransport POSTs each request's JSON envelope to the plugin's URL and
// reads the reply envelope from the response body. It has its own
// http.Client, so connections are kept alive and reused per plugin.
type httpTransport struct {
	url    string
	token  TokenSource // nil: no Authorization header
	client *http.Client
	nextID atomic.Uint64
	closed atomic.Bool
}

// maxIdleConns bounds the idle keep-alive connections kept per plugin.
const maxIdleConns = 128

func newHTTPTransport(s *HTTPSpec, token TokenSource) (*httpTransport, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CABundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(s.CABundle)) {
			return nil, errors.New("the plugin's caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	tr := &http.Transport{
		Proxy:                 nil, // plugins are in-cluster or local: never through a proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   5 * time.Second,
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   maxIdleConns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: MaxTimeout,
		ForceAttemptHTTP2:     true,
	}
	return &httpTransport{
		url:   s.URL,
		token: token,
		client: &http.Client{
			Transport: tr,
			// A redirect is never followed (so the token never goes to
			// another host): its 3xx answer is a plugin error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// call POSTs one request and returns its result.
func (t *httpTransport) call(ctx context.Context, method string, pr *params) (json.RawMessage, error) {
	if t.closed.Load() {
		return nil, fail(KindUnavailable, "the plugin was removed")
	}
	body, err := encodeRequest(method, t.nextID.Add(1), pr)
	if err != nil {
		return nil, fail(KindUnavailable, "encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, fail(KindUnavailable, "building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if t.token != nil {
		tok, err := t.token.Token()
		if err != nil {
			return nil, fail(KindUnavailable, "the gateway has no token to present: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	tracing.Inject(ctx, req.Header)
	resp, err := t.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fail(KindUnavailable, "%w", err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fail(KindUnavailable, "reading the reply: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fail(KindError, "the plugin answered HTTP %d: %q", resp.StatusCode, clip(string(bytes.TrimSpace(data)), 200))
	}
	if len(data) > maxReplyBytes {
		return nil, fail(KindBadReply, "the reply is longer than %d bytes", maxReplyBytes)
	}
	var rep reply
	if err := strictjson.UnmarshalOpen(data, &rep); err != nil {
		return nil, fail(KindBadReply, "the reply is not a JSON reply: %q", clip(string(data), 80))
	}
	return rep.outcome()
}

// notify POSTs one request and discards its result.
func (t *httpTransport) notify(ctx context.Context, method string, pr *params) error {
	_, err := t.call(ctx, method, pr)
	return err
}

// close fails later calls and drops the idle connections.
func (t *httpTransport) close() {
	t.closed.Store(true)
	t.client.CloseIdleConnections()
}

// transport is how a plugin is reached.
type transport interface {
	// call sends a request and returns the reply's result. Its errors are
	// *Error, or ctx's cause when ctx ended first.
	call(ctx context.Context, method string, pr *params) (json.RawMessage, error)
	// notify sends a request whose reply is not needed.
	notify(ctx context.Context, method string, pr *params) error
	// close releases the transport; later calls fail with pluginUnavailable.
	close()
}

var (
	_ transport = (*httpTransport)(nil)
	_ transport = (*stdioTransport)(nil)
)

// errNoTransport is returned for a plugin spec with no transport.
var errNoTransport = fmt.Errorf("the plugin has neither an http nor a stdio transport: %w", hooks.ErrInvalidSpec)
