package controller

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
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// DefaultGatewayPort is the port gateways serve their API on.
const DefaultGatewayPort = 8080

// DefaultGatewayTLSPort is the port gateways serve their API on over TLS.
const DefaultGatewayTLSPort = 8443

// Pusher delivers compiled configurations to gateway pods over HTTPS (or,
// when TLS is nil, plain HTTP).
type Pusher struct {
	// HTTP is the client used for pushes (built from TLS when nil).
	HTTP *http.Client
	// Tokens authenticates the controller to gateways.
	Tokens TokenSource
	// Port is the gateways' API port (DefaultGatewayPort, or
	// DefaultGatewayTLSPort with TLS, when 0).
	Port int
	// TLS, when set, makes pushes HTTPS verified against its trust bundle.
	TLS *PushTLS
	// Now stamps IssuedAt and is the time certificates are verified at
	// (time.Now when nil).
	Now func() time.Time

	mu      sync.Mutex
	bundle  []byte       // the trust bundle tlsHTTP was built from
	tlsHTTP *http.Client // the client for bundle
}

// PushTLS is how a Pusher verifies gateways: every pod must present a
// certificate for ServerName (pods are dialled by IP, which no certificate
// issued ahead of time can name) signed by a CA of the bundle Roots returns.
type PushTLS struct {
	// ServerName is the DNS name every gateway's certificate carries.
	ServerName string
	// Roots returns the PEM bundle of CAs the gateways' certificates are
	// verified against, read anew for every push.
	Roots func(ctx context.Context) ([]byte, error)
}

func (p *Pusher) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// client returns the HTTP client for a push: with TLS, one whose roots are
// the current bundle (a client is rebuilt when the bundle changes, and an
// unreadable or empty bundle fails the push).
func (p *Pusher) client(ctx context.Context) (*http.Client, error) {
	if p.HTTP != nil {
		return p.HTTP, nil
	}
	if p.TLS == nil {
		return defaultPushClient, nil
	}
	if p.TLS.ServerName == "" || p.TLS.Roots == nil {
		return nil, errors.New("push TLS needs a server name and a trust bundle")
	}
	bundle, err := p.TLS.Roots(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the gateways' trust bundle: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tlsHTTP != nil && bytes.Equal(bundle, p.bundle) {
		return p.tlsHTTP, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("the gateways' trust bundle holds no PEM certificate")
	}
	tr := newPushTransport()
	tr.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		ServerName: p.TLS.ServerName,
		Time:       p.now,
	}
	if p.tlsHTTP != nil {
		p.tlsHTTP.CloseIdleConnections()
	}
	p.bundle, p.tlsHTTP = bytes.Clone(bundle), &http.Client{Timeout: pushTimeout, Transport: tr}
	return p.tlsHTTP, nil
}

const pushTimeout = 10 * time.Second

func newPushTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	}
}

var defaultPushClient = &http.Client{Timeout: pushTimeout, Transport: newPushTransport()}

func (p *Pusher) url(pod *corev1.Pod) string {
	port, scheme := p.Port, "http"
	if p.TLS != nil {
		scheme = "https"
	}
	if port == 0 {
		port = DefaultGatewayPort
		if p.TLS != nil {
			port = DefaultGatewayTLSPort
		}
	}
	return scheme + "://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + "/v1/config"
}

// Status asks the pod which revision it enforces and which plugins are degraded.
func (p *Pusher) Status(ctx context.Context, pod *corev1.Pod) (wire.ConfigStatus, error) {
	var st wire.ConfigStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url(pod), nil)
	if err != nil {
		return st, err
	}
	c, err := p.client(ctx)
	if err != nil {
		return st, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return st, fmt.Errorf("asking gateway %s for its revision: %w", pod.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("gateway %s answered GET /v1/config with %s", pod.Name, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return st, fmt.Errorf("decoding gateway %s's revision: %w", pod.Name, err)
	}
	return st, nil
}

// Push sends cfg to the pod and returns when the pod has acknowledged it.
func (p *Pusher) Push(ctx context.Context, pod *corev1.Pod, cfg *gatewayconfig.Config) error {
	out := *cfg
	out.IssuedAt = p.now().UnixNano()
	body, err := json.Marshal(&out)
	if err != nil {
		return fmt.Errorf("encoding configuration: %w", err)
	}
	c, err := p.client(ctx) // before the token: no token leaves without a verified channel
	if err != nil {
		return err
	}
	token, err := p.Tokens.Token(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.url(pod), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("pushing revision %s to gateway %s: %w", cfg.Revision, pod.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("gateway %s rejected revision %s: %s: %s", pod.Name, cfg.Revision, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Sync makes the pod enforce cfg: it asks for the pod's status and pushes
// only when its revision differs (a restarted gateway reports none, so it is
// re-pushed). It returns the plugin hooks the pod reported degraded.
func (p *Pusher) Sync(ctx context.Context, pod *corev1.Pod, cfg *gatewayconfig.Config) (pushed bool, degraded []string, err error) {
	st, err := p.Status(ctx, pod)
	if err == nil && st.Revision == cfg.Revision {
		return false, st.Degraded, nil
	}
	if err := p.Push(ctx, pod, cfg); err != nil {
		return false, nil, err
	}
	return true, nil, nil
}
