package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/pki"
)

// tlsFlags serve the API over HTTPS.
type tlsFlags struct {
	certFile, keyFile string
	listen            string
	reloadInterval    time.Duration
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.certFile, "tls-cert-file", "",
		"serve the API over HTTPS on --tls-listen with this PEM certificate (reloaded when it changes); "+
			"the plain --listen then refuses the configuration API")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "the private key of --tls-cert-file")
	fs.StringVar(&t.listen, "tls-listen", ":8443", "HTTPS listen address (with --tls-cert-file)")
	fs.DurationVar(&t.reloadInterval, "tls-reload-interval", pki.DefaultReloadInterval,
		"how often to look for a new key pair in --tls-cert-file and --tls-key-file")
}

func (t *tlsFlags) enabled() bool { return t.certFile != "" || t.keyFile != "" }

func (t *tlsFlags) check(plainListen string) error {
	if !t.enabled() {
		if plainListen == "" {
			return errors.New("--listen is required without --tls-cert-file")
		}
		return nil
	}
	switch {
	case t.certFile == "" || t.keyFile == "":
		return errors.New("--tls-cert-file and --tls-key-file go together")
	case t.listen == "":
		return errors.New("--tls-listen must not be empty with --tls-cert-file")
	case t.reloadInterval <= 0:
		return errors.New("--tls-reload-interval must be positive")
	}
	return nil
}

// config loads the key pair (a missing or invalid one is an error) and
// starts reloading it until ctx ends.
func (t *tlsFlags) config(ctx context.Context, log *slog.Logger) (*tls.Config, error) {
	r, err := pki.NewReloader(t.certFile, t.keyFile, log)
	if err != nil {
		return nil, err
	}
	go r.Run(ctx, t.reloadInterval)
	return r.ServerConfig(), nil
}

// plainRefusesConfig answers the configuration API on the plain listener
// with 403: with TLS configured, a push token is accepted only over TLS, so
// a controller pushing in clear fails loudly instead of exposing its token.
func plainRefusesConfig(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := path.Clean("/" + r.URL.Path); p == "/v1/config" || strings.HasPrefix(p, "/v1/config/") {
			http.Error(w, "the configuration API is served over HTTPS only (--tls-listen)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
