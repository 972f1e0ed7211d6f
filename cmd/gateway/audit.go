package main

import (
	"flag"
	"io"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

// auditFlags choose where audit records go.
type auditFlags struct {
	file         string
	maxSizeMB    int
	maxBackups   int
	writeTimeout time.Duration
}

func (a *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.file, "audit-file", "", "write audit records to this file, rotated by size, instead of stdout")
	fs.IntVar(&a.maxSizeMB, "audit-file-max-size-mb", 100, "rotate the audit file when it reaches this many megabytes")
	fs.IntVar(&a.maxBackups, "audit-file-max-backups", 10, "rotated audit files to keep (0 keeps all)")
	fs.DurationVar(&a.writeTimeout, "audit-write-timeout", 5*time.Second,
		"how long an audit write may take; a write that does not finish in time denies its call (0: no limit)")
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
