package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/statestore"
)

// redisPasswordEnv holds the Redis password when --state-store-redis-password-file is not set.
const redisPasswordEnv = "TOOLHOOKS_REDIS_PASSWORD"

// stateStoreFlags choose where the contracts' counters live: in this
// process (no address) or in Redis.
type stateStoreFlags struct {
	address      string
	username     string
	passwordFile string
	db           int
	tls          bool
	caFile       string
	serverName   string
	keyPrefix    string
	timeout      time.Duration
}

func (s *stateStoreFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.address, "state-store-redis-address", "",
		"keep budgets and rate limits in the Redis (or Valkey) server at host:port, shared by every gateway pointed at it, "+
			"so they are exact across replicas (empty: in this process, exact within this gateway only)")
	fs.StringVar(&s.username, "state-store-redis-username", "", "the Redis ACL user (empty: default user)")
	fs.StringVar(&s.passwordFile, "state-store-redis-password-file", "",
		"read the Redis password from this file (else from $"+redisPasswordEnv+"; empty: none)")
	fs.IntVar(&s.db, "state-store-redis-db", 0, "the Redis database number")
	fs.BoolVar(&s.tls, "state-store-redis-tls", false, "connect to Redis over TLS")
	fs.StringVar(&s.caFile, "state-store-redis-ca-file", "",
		"PEM CA bundle that verifies the Redis server's certificate (with --state-store-redis-tls; empty: the system roots)")
	fs.StringVar(&s.serverName, "state-store-redis-server-name", "",
		"the name the Redis server's certificate must hold (with --state-store-redis-tls; empty: the address's host)")
	fs.StringVar(&s.keyPrefix, "state-store-key-prefix", statestore.DefaultKeyPrefix,
		"prefix of every key the gateway writes, so that deployments can share one database")
	fs.DurationVar(&s.timeout, "state-store-timeout", statestore.DefaultTimeout,
		"how long one call may wait for the state store; a call it cannot count in time is denied "+
			"(or allowed uncounted where the policy says stateFailurePolicy: Ignore)")
}

func (s *stateStoreFlags) enabled() bool { return s.address != "" }

func (s *stateStoreFlags) check() error {
	if !s.enabled() {
		for _, set := range []struct {
			name string
			on   bool
		}{
			{"--state-store-redis-username", s.username != ""},
			{"--state-store-redis-password-file", s.passwordFile != ""},
			{"--state-store-redis-db", s.db != 0},
			{"--state-store-redis-tls", s.tls},
			{"--state-store-redis-ca-file", s.caFile != ""},
			{"--state-store-redis-server-name", s.serverName != ""},
		} {
			if set.on {
				return fmt.Errorf("%s needs --state-store-redis-address", set.name)
			}
		}
		return nil
	}
	if _, port, ok := strings.Cut(s.address, ":"); !ok || port == "" || strings.Contains(s.address, "://") {
		return fmt.Errorf("--state-store-redis-address %q: want host:port", s.address)
	}
	switch {
	case s.db < 0:
		return fmt.Errorf("--state-store-redis-db %d: must not be negative", s.db)
	case s.timeout <= 0:
		return fmt.Errorf("--state-store-timeout %s: must be positive", s.timeout)
	case s.keyPrefix == "":
		return errors.New("--state-store-key-prefix must not be empty")
	case !s.tls && (s.caFile != "" || s.serverName != ""):
		return errors.New("--state-store-redis-ca-file and --state-store-redis-server-name need --state-store-redis-tls")
	}
	return nil
}

// apply connects the store (without waiting for the server) with the
// session TTL of the in-process budgets, registers its metrics in
// opts.Registry and sets opts.StateStore; it returns what closes the store.
// Without an address it leaves opts alone.
func (s *stateStoreFlags) apply(opts *gateway.Options, sessionTTL time.Duration, log *slog.Logger) (func(), error) {
	if !s.enabled() {
		return func() {}, nil
	}
	store, err := s.build(sessionTTL, opts.Registry, log)
	if err != nil {
		return nil, err
	}
	opts.StateStore = store
	return func() { _ = store.Close() }, nil
}

// build connects the store and registers its metrics in reg.
func (s *stateStoreFlags) build(sessionTTL time.Duration, reg prometheus.Registerer, log *slog.Logger) (*statestore.Redis, error) {
	opts := statestore.Options{
		Address: s.address, Username: s.username, DB: s.db, KeyPrefix: s.keyPrefix,
		Timeout: s.timeout, SessionTTL: sessionTTL,
	}
	var err error
	if opts.Password, err = s.password(); err != nil {
		return nil, err
	}
	if s.tls {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
		if s.caFile != "" {
			pem, err := os.ReadFile(s.caFile)
			if err != nil {
				return nil, fmt.Errorf("--state-store-redis-ca-file: %w", err)
			}
			opts.TLS.RootCAs = x509.NewCertPool()
			if !opts.TLS.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--state-store-redis-ca-file %s holds no PEM certificate", s.caFile)
			}
		}
	}
	redis.SetLogger(redisLogger{log})
	var store *statestore.Redis
	if opts.Observe, err = gateway.StateStoreMetrics(reg, func() error {
		if store == nil {
			return errors.New("not connected")
		}
		return store.Ready()
	}); err != nil {
		return nil, err
	}
	if store, err = statestore.New(opts); err != nil {
		return nil, err
	}
	log.Info("Budgets and rate limits are kept in the shared state store", "store", store.Name(), "timeout", s.timeout)
	return store, nil
}

// password reads the password file, else the environment; surrounding
// white space (a trailing newline) is not part of it.
func (s *stateStoreFlags) password() (string, error) {
	if s.passwordFile == "" {
		return os.Getenv(redisPasswordEnv), nil
	}
	b, err := os.ReadFile(s.passwordFile)
	if err != nil {
		return "", fmt.Errorf("--state-store-redis-password-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// redisLogger sends the Redis client's own messages (dial failures and the
// like) to the gateway's log instead of stderr.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "Redis client: "+fmt.Sprintf(format, v...))
}
