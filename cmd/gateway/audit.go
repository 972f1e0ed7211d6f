package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/argmask"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// auditFlags choose where audit records go.
type auditFlags struct {
	file         string
	maxSizeMB    int
	maxBackups   int
	writeTimeout time.Duration

	decisionLog         bool
	decisionLogKeys     string
	decisionLogMaxBytes int
}

func (a *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.file, "audit-file", "", "write audit records to this file, rotated by size, instead of stdout")
	fs.IntVar(&a.maxSizeMB, "audit-file-max-size-mb", 100, "rotate the audit file when it reaches this many megabytes")
	fs.IntVar(&a.maxBackups, "audit-file-max-backups", 10, "rotated audit files to keep (0 keeps all)")
	fs.DurationVar(&a.writeTimeout, "audit-write-timeout", 5*time.Second,
		"how long an audit write may take; a write that does not finish in time denies its call, and while one stays "+
			"blocked past it every call is denied at once and /readyz answers 503 (/healthz stays 200) (0: no limit)")
	fs.BoolVar(&a.decisionLog, "decision-log", false,
		"add each call's canonical arguments, masked, to its audit record (the decision log `kubectl toolhooks replay` reads)")
	fs.StringVar(&a.decisionLogKeys, "decision-log-mask-keys", strings.Join(argmask.DefaultKeys, ","),
		"comma-separated argument keys (any depth, any case) whose values the decision log masks whole, besides keys whose "+
			"names say secret (pwd, db_password, client_secret, ...); secrets named so in command lines (--password=x, "+
			"PASSWORD=x, mysql -px, https://user:x@host) and those the result scanner's secret detectors find in other "+
			"values are masked in place")
	fs.IntVar(&a.decisionLogMaxBytes, "decision-log-max-bytes", argmask.DefaultMaxBytes,
		"bound on one record's arguments text: longer strings are shortened, longest first, and arguments that still "+
			"do not fit are left out")
}

// apply sets the gateway's audit sink, its masking of the secrets reasons
// quote, and the decision log.
func (a *auditFlags) apply(opts *gateway.Options, stdout io.Writer) error {
	opts.Audit = a.sink(stdout)
	m, err := a.masker()
	if err != nil {
		return err
	}
	opts.MaskReason = m.MaskReason
	if a.decisionLog {
		opts.DecisionLog = m.Mask
	}
	return nil
}

// masker returns the masking of the decision log (as its flags configure
// it) and of reasons.
func (a *auditFlags) masker() (*argmask.Masker, error) {
	if !a.decisionLog {
		return argmask.New(argmask.Config{})
	}
	keys := []string{}
	for k := range strings.SplitSeq(a.decisionLogKeys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	m, err := argmask.New(argmask.Config{Keys: keys, MaxBytes: a.decisionLogMaxBytes})
	if err != nil {
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	return m, nil
}

// sink returns the audit sink: JSON lines to the file or to stdout, each
// write bounded by the write timeout.
func (a *auditFlags) sink(stdout io.Writer) audit.Sink {
	w := stdout
	if a.file != "" {
		w = &lumberjack.Logger{Filename: a.file, MaxSize: a.maxSizeMB, MaxBackups: a.maxBackups}
	}
	return audit.NewJSONSink(w, audit.WithWriteTimeout(a.writeTimeout))
}
