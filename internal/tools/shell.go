package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// shellWaitDelay is how long the shell tool waits for output after its
// process group was killed before giving up on the pipes.
const shellWaitDelay = 2 * time.Second

// shell: {command, cwd?}. Runs `/bin/sh -c command` in cwd (default the
// workspace root) in its own process group, which is killed when the call's
// context ends. Returns the combined output, capped at MaxOutputBytes with a
// truncation note, and a note of a non-zero exit status.
func (w *Workspace) shell(ctx context.Context, m map[string]any) (string, error) {
	return result(w.doShell(ctx, m))
}

func (w *Workspace) doShell(ctx context.Context, m map[string]any) (string, error) {
	a, err := newArgs(Shell, m, "command", "cwd")
	if err != nil {
		return "", err
	}
	command, _, err := a.str("command", true, false)
	if err != nil {
		return "", err
	}
	dir, ok, err := w.path(a, "cwd", false)
	if err != nil {
		return "", err
	}
	if !ok {
		dir = w.res.Real
	}
	if st, err := os.Stat(dir); err != nil {
		return "", fsError(Shell, w.display(dir), err)
	} else if !st.IsDir() {
		return "", userErrorf("%s: cwd %s is not a directory", Shell, w.display(dir))
	}
	if err := checkContext(ctx); err != nil {
		return "", err
	}

	out := &cappedBuffer{max: w.opts.MaxOutputBytes}
	cmd := exec.CommandContext(ctx, w.opts.Shell, "-c", command)
	cmd.Dir = dir
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = shellWaitDelay
	err = cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("shell command interrupted: %w", context.Cause(ctx))
	}
	text := out.String()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return "", fmt.Errorf("running shell command: %w", err)
		}
		if text != "" && text[len(text)-1] != '\n' {
			text += "\n"
		}
		text += "[exit status " + exitStatus(ee) + "]"
	}
	return text, nil
}

// exitStatus describes how a process ended.
func exitStatus(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return strconv.Itoa(ee.ExitCode())
}

// cappedBuffer keeps the first max bytes written to it and counts the rest.
type cappedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room >= len(p) {
		b.buf.Write(p)
		return len(p), nil
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// String is the kept output with a note of how much was dropped.
func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if b.dropped > 0 {
		if s != "" && s[len(s)-1] != '\n' {
			s += "\n"
		}
		s += fmt.Sprintf("[output truncated: %d more bytes not shown; the limit is %d bytes]", b.dropped, b.max)
	}
	return s
}
