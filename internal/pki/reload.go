package pki

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultReloadInterval is how often a Reloader looks for a new key pair.
const DefaultReloadInterval = 10 * time.Second

// Reloader serves a TLS key pair read from two files and re-reads them when
// their contents change (a mounted Secret is updated by swapping a symbolic
// link, so contents are compared, not modification times). A pair that fails
// to load keeps the last good one in service.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu       sync.RWMutex
	cert     *tls.Certificate
	certPEM  []byte
	keyPEM   []byte
	lastFail string
}

// NewReloader loads the key pair; a missing or invalid pair is an error, so a
// server never starts without its certificate.
func NewReloader(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a TLS key pair needs both a certificate file and a key file")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload re-reads the files and swaps the pair in when it changed and is
// valid. It reports whether a new pair was installed.
func (r *Reloader) Reload() (bool, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return false, fmt.Errorf("reading the TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return false, fmt.Errorf("reading the TLS key: %w", err)
	}
	r.mu.RLock()
	same := bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM)
	r.mu.RUnlock()
	if same {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("loading the TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.cert, r.certPEM, r.keyPEM, r.lastFail = &pair, certPEM, keyPEM, ""
	r.mu.Unlock()
	return true, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// Run reloads every interval (DefaultReloadInterval when not positive)
// until ctx ends, logging each new pair and each failure (once per distinct
// error; the last good pair stays in service).
func (r *Reloader) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := r.Reload()
		switch {
		case err != nil:
			r.mu.Lock()
			repeat := r.lastFail == err.Error()
			r.lastFail = err.Error()
			r.mu.Unlock()
			if !repeat {
				r.log.Error("Keeping the last good TLS key pair", "error", err)
			}
		case changed:
			r.log.Info("Loaded a new TLS key pair", "certFile", r.certFile)
		}
	}
}

// ServerConfig is a TLS server configuration (TLS 1.2 at least) serving r's
// current key pair.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}
