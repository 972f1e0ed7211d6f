package audit_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

func rec() audit.Record {
	return audit.Record{Tool: "t", Outcome: hooks.StatusAllowed, Phase: audit.PhaseStarted, CallID: "x-1"}
}

func TestJSONSinkReportsRealWriteFailures(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer func() { _ = full.Close() }()
	if err := audit.NewJSONSink(full).Emit(context.Background(), rec()); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("/dev/full: Emit = %v, want ENOSPC", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	defer func() { _ = w.Close() }()
	if err := audit.NewJSONSink(w, audit.WithWriteTimeout(time.Minute)).Emit(context.Background(), rec()); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("closed pipe: Emit = %v, want EPIPE", err)
	}
}

func TestJSONSinkGivesUpOnAStalledPipeAndRecovers(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(); _ = w.Close() }()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Log("cannot shrink the pipe:", err)
	}
	s := audit.NewJSONSink(w, audit.WithWriteTimeout(50*time.Millisecond))
	var emitErr error
	for i := 0; i < 10000 && emitErr == nil; i++ { // nobody reads: the pipe fills up
		emitErr = s.Emit(context.Background(), rec())
	}
	if !errors.Is(emitErr, audit.ErrWriteTimeout) {
		t.Fatalf("Emit on a full pipe = %v, want ErrWriteTimeout", emitErr)
	}
	if err := s.Emit(context.Background(), rec()); !errors.Is(err, audit.ErrWriteTimeout) {
		t.Errorf("Emit while the writer is blocked = %v, want ErrWriteTimeout", err)
	}
	if err := s.Healthy(); !errors.Is(err, audit.ErrWriteTimeout) {
		t.Errorf("Healthy while blocked = %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Healthy() != nil || s.Emit(context.Background(), rec()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the sink did not recover once the pipe was read")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockingWriter blocks every Write until release is closed, counting them.
type blockingWriter struct {
	release chan struct{}
	writes  atomic.Int64
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	<-w.release
	return len(p), nil
}

func TestJSONSinkStalledRefusesEveryRecordWithoutWritingUntilTheWriterMoves(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	s := audit.NewJSONSink(w, audit.WithWriteTimeout(50*time.Millisecond))
	if err := s.Emit(context.Background(), rec()); !errors.Is(err, audit.ErrWriteTimeout) {
		t.Fatalf("Emit on a blocked writer = %v, want ErrWriteTimeout", err)
	}
	for s.Healthy() == nil { // the stall is declared by the writer's own watch
		time.Sleep(time.Millisecond)
	}
	const n = 50
	errs := make(chan error, n)
	for range n {
		go func() { errs <- s.Emit(context.Background(), rec()) }()
	}
	for range n {
		if err := <-errs; !errors.Is(err, audit.ErrWriteTimeout) || !strings.Contains(err.Error(), "records fail at once") {
			t.Errorf("Emit while stalled = %v, want the stall's ErrWriteTimeout", err)
		}
	}
	if got := w.writes.Load(); got != 1 {
		t.Errorf("the writer got %d writes while one was blocked, want 1", got)
	}
	close(w.release)
	for s.Healthy() != nil {
		time.Sleep(time.Millisecond)
	}
	if err := s.Emit(context.Background(), rec()); err != nil {
		t.Errorf("Emit once the writer moves again = %v", err)
	}
	if got := w.writes.Load(); got != 2 {
		t.Errorf("the writer got %d writes, want 2", got)
	}
}
