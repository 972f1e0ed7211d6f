package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// DefaultGatewayPort is the port gateways serve their API on.
const DefaultGatewayPort = 8080

// Pusher delivers compiled configurations to gateway pods over HTTP.
type Pusher struct {
	// HTTP is the client used for pushes (a default with keep-alive when nil).
	HTTP *http.Client
	// Tokens authenticates the controller to gateways.
	Tokens TokenSource
	// Port is the gateways' API port (DefaultGatewayPort when 0).
	Port int
	// Scheme is "http" (default) or "https".
	Scheme string
	// Now stamps IssuedAt (time.Now when nil).
	Now func() time.Time
}

func (p *Pusher) client() *http.Client {
	if p.HTTP != nil {
		return p.HTTP
	}
	return defaultPushClient
}

var defaultPushClient = &http.Client{
	Timeout: 10 * time.Second,
	Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	},
}

func (p *Pusher) url(pod *corev1.Pod) string {
	port, scheme := p.Port, p.Scheme
	if port == 0 {
		port = DefaultGatewayPort
	}
	if scheme == "" {
		scheme = "http"
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
	resp, err := p.client().Do(req)
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
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	out := *cfg
	out.IssuedAt = now().UnixNano()
	body, err := json.Marshal(&out)
	if err != nil {
		return fmt.Errorf("encoding configuration: %w", err)
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
	resp, err := p.client().Do(req)
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
