package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TokenSource yields the bearer token the controller presents to gateways.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// ServiceAccountTokens mints short-lived ServiceAccount tokens bound to
// Audience with the TokenRequest API, caching each until 80% of its life.
type ServiceAccountTokens struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Audience  string
	// Lifetime is the requested token lifetime (default 10 minutes).
	Lifetime time.Duration

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// Token returns a cached token or requests a new one.
func (s *ServiceAccountTokens) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Now().Before(s.renewAt) {
		return s.token, nil
	}
	life := s.Lifetime
	if life <= 0 {
		life = 10 * time.Minute
	}
	secs := int64(life / time.Second)
	tr, err := s.Client.CoreV1().ServiceAccounts(s.Namespace).CreateToken(ctx, s.Name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{s.Audience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", s.Namespace, s.Name, err)
	}
	issued := time.Now()
	expires := tr.Status.ExpirationTimestamp.Time
	if expires.IsZero() || expires.Before(issued) {
		expires = issued.Add(life)
	}
	s.token = tr.Status.Token
	s.renewAt = issued.Add(expires.Sub(issued) * 8 / 10)
	return s.token, nil
}

// FileToken reads a (projected, kubelet-rotated) token from a file on every use.
type FileToken string

// Token reads the file.
func (f FileToken) Token(context.Context) (string, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return "", fmt.Errorf("reading push token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
