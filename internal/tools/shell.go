package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/progenv"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// shellWaitDelay is how long the shell tool waits for a command's output
// after its process group was killed before giving up on the pipes.
const shellWaitDelay = 2 * time.Second

// shell: {command, cwd?}. Interprets command as bash with mvdan.cc/sh (the
// parser the policy checks use), in cwd (default the workspace root), never
// through /bin/sh:
//
//   - every program it starts is first shown to the call's guard with its
//     final argv (after parameter, command-substitution, brace and glob
//     expansion), the variables the script set for it and its directory, and
//     then started by the sandbox, in its own process group, with a fixed
//     environment (PATH, HOME and TMPDIR pointing to a private directory
//     removed after the call, LANG, and unless the bound policies allow
//     them, the git configuration that turns off the programs a
//     repository's configuration names: progenv.GitEnv) plus what the
//     script exported, which may not be a variable progenv.Refused names;
//     every process a program leaves running is ended when it exits (the
//     output ends with a note of how many), and a program that exceeds the
//     sandbox's CPU time or file size limit ends the call with an error
//     saying so;
//   - every file the interpreter opens itself (redirections, $(<file),
//     source) is shown to the guard and opened beneath the workspace; only
//     /dev/null, and reading /dev/zero and /dev/urandom, are exempt, and
//     /dev/stdout, /dev/stderr, /dev/fd/1 and /dev/fd/2 name the command's
//     own output (never the gateway's);
//   - glob expansion lists only directories in the workspace, without the
//     names the guard refuses to open for reading (they expand as if
//     absent);
//   - what the interpreter's tests ([ -e ], [[ -s ]], -nt, -r ...) and cd
//     look at is shown to the guard as a file opened for reading and looked
//     at beneath the workspace; a path outside it or one the guard refuses
//     stops the command (the answer would tell whether it exists), apart
//     from the devices redirections may use;
//   - cd and pushd may not leave the workspace (nor use "cd -", a bare cd or
//     CDPATH, whose targets the script controls); builtin and command are
//     looked through. exec, eval, source, trap callbacks and functions run
//     in the same interpreter, so what they run meets the same handlers.
//
// A denial stops the whole command and is returned as the guard's error.
// Returns the combined output, capped at MaxOutputBytes with a truncation
// note, and a note of a non-zero exit status.
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
	if !w.res.Within(dir) {
		return "", userErrorf("%s: cwd %s is outside the workspace", Shell, dir)
	}
	if st, err := os.Stat(dir); err != nil {
		return "", fsError(Shell, w.display(dir), err)
	} else if !st.IsDir() {
		return "", userErrorf("%s: cwd %s is not a directory", Shell, w.display(dir))
	}
	g, err := w.begin(ctx)
	if err != nil {
		return "", err
	}
	file, err := shellcheck.ParseBash(command)
	if err != nil {
		return "", userErrorf("%s: %v", Shell, err)
	}
	tmp, err := os.MkdirTemp("", "toolhooks-shell-")
	if err != nil {
		return "", fmt.Errorf("shell: private directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// The interpreter opens its own FIFOs (process substitution) in its
	// TMPDIR without the open handler, so that directory must be one no
	// program the script starts can write: programs get home, beneath it,
	// as HOME, TMPDIR and their only writable directory outside the
	// workspace. Otherwise a program could plant a symlink there that the
	// unconfined interpreter would follow.
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", fmt.Errorf("shell: private directory: %w", err)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(errors.New("shell command finished"))
	allowGit := g.AllowsGitPrograms()
	run := &shellRun{w: w, guard: g, tmp: home, cancel: cancel, base: w.baseEnv(home, allowGit), interpTmp: "TMPDIR=" + tmp,
		allowGit: allowGit}
	interpEnv := slices.DeleteFunc(slices.Clone(run.base), func(e string) bool { return strings.HasPrefix(e, "TMPDIR=") })
	interpEnv = append(interpEnv, run.interpTmp)
	out := &cappedBuffer{max: w.opts.MaxOutputBytes}
	r, err := interp.New(
		interp.Dir(dir),
		interp.Env(expand.ListEnviron(interpEnv...)),
		interp.StdIO(nil, out, out),
		interp.CallHandler(run.call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return run.exec }),
		interp.OpenHandler(run.open),
		interp.ReadDirHandler2(run.readDir),
		interp.StatHandler(run.stat),
		interp.AccessHandler(run.access),
	)
	if err != nil {
		return "", fmt.Errorf("shell: %w", err)
	}
	err = r.Run(ctx, file)
	if d := run.denied(); d != nil {
		return "", d
	}
	if ctx.Err() != nil {
		if run.limitExceeded() {
			return "", userErrorf("%v%s", context.Cause(ctx), run.endedNote())
		}
		return "", fmt.Errorf("shell command interrupted: %w%s", context.Cause(ctx), run.endedNote())
	}
	text := out.String()
	if note := run.endedNote(); note != "" {
		if text != "" && text[len(text)-1] != '\n' {
			text += "\n"
		}
		text += "[" + note[2:] + "]\n"
	}
	if err != nil {
		if text != "" && text[len(text)-1] != '\n' {
			text += "\n"
		}
		if status, ok := errors.AsType[interp.ExitStatus](err); ok {
			text += fmt.Sprintf("[exit status %d]", status)
		} else {
			text += "[shell error: " + err.Error() + "]"
		}
	}
	return text, nil
}

// baseEnv is the environment every command starts from: with git's
// configured programs off unless the bound policies allow them
// (progenv.GitEnv).
func (w *Workspace) baseEnv(tmp string, allowGit bool) []string {
	env := []string{"PATH=" + w.opts.Path, "HOME=" + tmp, "TMPDIR=" + tmp, "LANG=C.UTF-8"}
	if !allowGit {
		env = append(env, progenv.GitEnv()...)
	}
	return env
}

// shellRun is one shell tool call's interpreter state.
type shellRun struct {
	w      *Workspace
	guard  *hooks.Guard
	tmp    string // the programs' HOME and TMPDIR
	base   []string
	cancel context.CancelCauseFunc
	// interpTmp is the interpreter's own TMPDIR entry, which programs do not inherit.
	interpTmp string
	// allowGit: the bound policies let git run the programs its
	// configuration names, so the script may set git's variables.
	allowGit bool

	mu     sync.Mutex
	denial error
	// endedProcs counts the processes programs left running that the
	// sandbox ended; exceeded names the first limit a program exceeded.
	endedProcs int
	exceeded   string
}

// deny records the first refusal and stops the whole command.
func (s *shellRun) deny(err error) error {
	s.mu.Lock()
	if s.denial == nil {
		s.denial = err
	}
	s.mu.Unlock()
	s.cancel(err)
	return err
}

// endedNote is "; N processes left running were ended" when programs left
// some, else "".
func (s *shellRun) endedNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.endedProcs {
	case 0:
		return ""
	case 1:
		return "; 1 process left running was ended"
	}
	return fmt.Sprintf("; %d processes left running were ended", s.endedProcs)
}

// limitExceeded reports whether a program exceeded a limit of the sandbox.
func (s *shellRun) limitExceeded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exceeded != ""
}

func (s *shellRun) denied() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denial
}

// call sees every simple command, builtins included, before it runs.
func (s *shellRun) call(ctx context.Context, args []string) ([]string, error) {
	eff := args
	// Unwrap builtin and command with their options (-p, -v, --): checking
	// what a describing "command -v cd /" names too only over-denies.
	for len(eff) > 1 && (eff[0] == "builtin" || eff[0] == "command") {
		eff = eff[1:]
		for len(eff) > 1 && strings.HasPrefix(eff[0], "-") {
			opt := eff[0]
			eff = eff[1:]
			if opt == "--" {
				break
			}
		}
	}
	switch eff[0] {
	case "cd", builtinPushd:
		if err := s.chdir(ctx, eff); err != nil {
			return nil, s.deny(err)
		}
	}
	return args, nil
}

// builtinPushd is the builtin whose arguments may also rotate the directory stack.
const builtinPushd = "pushd"

// chdir refuses a cd or pushd that could leave the workspace.
func (s *shellRun) chdir(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	var targets []string
	opts := true
	for _, a := range args[1:] {
		switch {
		case opts && a == "--":
			opts = false
		case opts && (a == "-L" || a == "-P" || a == "-e" || a == "-n"):
		default:
			targets = append(targets, a)
			opts = false
		}
	}
	if len(targets) == 0 {
		if args[0] == builtinPushd {
			return nil // swaps the top two directories, both checked when pushed
		}
		return userErrorf("%s: a bare cd goes to $HOME, outside the workspace", Shell)
	}
	t := targets[0]
	if args[0] == builtinPushd && len(t) > 1 && (t[0] == '+' || t[0] == '-') && strings.Trim(t[1:], "0123456789") == "" {
		return nil // rotates the stack of checked directories
	}
	if t == "-" {
		return userErrorf("%s: cd - goes to $OLDPWD, which the script controls", Shell)
	}
	if v := hc.Env.Get("CDPATH"); v.IsSet() && v.String() != "" && !filepath.IsAbs(t) {
		return userErrorf("%s: cd with CDPATH set is not supported", Shell)
	}
	real, err := s.w.res.ResolveFromMemo(nil, hc.Dir, t)
	if err != nil || !s.w.res.Within(real) {
		return userErrorf("%s: %s %s leaves the workspace", Shell, args[0], t)
	}
	return nil
}

// environ returns a command's environment (the base, then what the script
// exported) and the part of it that differs from the base. A variable the
// script may not set (progenv.Refused) is an error.
func (s *shellRun) environ(env expand.Environ) (all, added []string, err error) {
	all = slices.Clone(s.base)
	env.Each(func(name string, vr expand.Variable) bool {
		if !vr.Exported || vr.Kind != expand.String {
			return true
		}
		if why := progenv.Refused(name, s.allowGit); why != "" && !slices.Contains(s.base, name+"="+vr.Str) {
			err = userErrorf("%s: the script sets %s, which %s; programs started by the shell tool may not get it", Shell, name, why)
			return false
		}
		kv := name + "=" + vr.Str
		if slices.Contains(s.base, kv) || kv == s.interpTmp {
			return true // programs keep their own TMPDIR, not the interpreter's
		}
		if name != "PWD" && name != "OLDPWD" {
			added = append(added, kv)
		}
		all = slices.DeleteFunc(all, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		all = append(all, kv)
		return true
	})
	return all, added, err
}

// exec runs one external command after the guard allowed its final argv.
func (s *shellRun) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	if !s.w.res.Within(hc.Dir) {
		return s.deny(userErrorf("%s: the working directory %s is outside the workspace", Shell, hc.Dir))
	}
	env, added, err := s.environ(hc.Env)
	if err != nil {
		return s.deny(err)
	}
	if err := s.guard.Exec(ctx, hc.Dir, added, args); err != nil {
		return s.deny(err)
	}
	path, err := interp.LookPathDir(hc.Dir, expand.ListEnviron(env...), args[0])
	if err != nil {
		_, _ = fmt.Fprintf(hc.Stderr, "%v\n", err)
		return interp.ExitStatus(127)
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args, cmd.Env, cmd.Dir = args, env, hc.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = hc.Stdin, hc.Stdout, hc.Stderr
	if f, ok := cmd.Stdin.(*os.File); ok && f == nil {
		cmd.Stdin = nil
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Replaced by the sandbox's, which ends the program's whole tree; this
	// one (the sandbox off) ends its process group.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = shellWaitDelay
	// The workspace as the policy permits; the private directory (HOME and
	// TMPDIR) writable and executable under every policy, readonly too: go
	// test builds and runs its binaries there, and it is removed after the call.
	conf := sandbox.Confinement{Workspace: s.w.res.Real, Policy: newGuardPolicy(ctx, s.guard), Writable: []string{s.tmp}}
	p, err := s.w.opts.Sandbox.Start(cmd, conf)
	if err != nil {
		_, _ = fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
		return interp.ExitStatus(126)
	}
	rep, err := p.Wait()
	s.ended(rep)
	var ee *exec.ExitError
	switch {
	case rep.Exceeded != "":
		err := fmt.Errorf("%s: %s exceeded its %s limit; it and every process it started were ended", Shell, args[0], rep.Exceeded)
		s.cancel(err)
		return err
	case err != nil && errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return interp.ExitStatus(uint8(128 + int(ws.Signal())))
		}
		return interp.ExitStatus(uint8(ee.ExitCode()))
	case err != nil:
		return err
	case !rep.Exited:
		return interp.ExitStatus(uint8(128 + int(rep.Signal)))
	case rep.ExitCode != 0:
		return interp.ExitStatus(uint8(rep.ExitCode))
	}
	return nil
}

// ended adds what the sandbox reported of one program to the call's note.
func (s *shellRun) ended(rep sandbox.Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endedProcs += rep.Ended
	if rep.Exceeded != "" && s.exceeded == "" {
		s.exceeded = rep.Exceeded
	}
}

// guardPolicy is the call's guard as the sandbox asks it: the programs a
// command starts may reach exactly what the guard would let the tools
// themselves open. The sandbox asks about the workspace's paths as it
// walks them without following a symbolic link (real), so the checks need
// not resolve them again.
type guardPolicy struct {
	ctx, real context.Context
	g         *hooks.Guard
}

func newGuardPolicy(ctx context.Context, g *hooks.Guard) guardPolicy {
	return guardPolicy{ctx: ctx, real: pathguard.WithRealPaths(ctx), g: g}
}

func (p guardPolicy) Key() string                    { return p.g.PolicyKey() }
func (p guardPolicy) RefusesRead(path string) bool   { return p.g.Refuses(p.real, path) }
func (p guardPolicy) RefusesWrite(path string) bool  { return p.g.RefusesWrite(p.real, path) }
func (p guardPolicy) RefusesSystem(path string) bool { return p.g.RefusesSystem(p.ctx, path) }
func (p guardPolicy) Err() error                     { return p.ctx.Err() }

// open opens a file for the interpreter: a redirection, $(<file), source.
func (s *shellRun) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	switch path {
	case "/dev/null":
		return os.OpenFile(os.DevNull, flag&(os.O_RDONLY|os.O_WRONLY|os.O_RDWR), 0)
	case "/dev/zero", "/dev/urandom":
		if !write {
			return os.Open(path)
		}
	}
	hc := interp.HandlerCtx(ctx)
	// The script's own output streams, never the gateway's.
	switch path {
	case "/dev/stdout", "/dev/fd/1":
		return nopCloser{hc.Stdout}, nil
	case "/dev/stderr", "/dev/fd/2":
		return nopCloser{hc.Stderr}, nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(hc.Dir, path)
	}
	f, err := s.w.openChecked(ctx, s.guard, filepath.Clean(path), flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		if _, ok := errors.AsType[*hooks.RuntimeDenial](err); ok {
			return nil, s.deny(err)
		}
		if pe, ok := errors.AsType[*os.PathError](err); ok {
			return nil, pe // reported by the interpreter like a shell's failed redirection
		}
		return nil, s.deny(err)
	}
	if err := clearNonblock(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// probeDevices are the files outside the workspace the interpreter's tests
// may look at: the devices its redirections may open.
var probeDevices = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/urandom": true}

// stat answers the interpreter's file tests ([ -e ], [ -d ], [[ -s ]], -nt,
// -ef ...) and the check of a cd target.
func (s *shellRun) stat(ctx context.Context, name string, followSymlinks bool) (fs.FileInfo, error) {
	f, err := s.lookAt(ctx, name, followSymlinks)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return f.Stat()
}

// access answers the tests -r, -w and -x, and cd's search permission check.
func (s *shellRun) access(ctx context.Context, name string, mode interp.AccessMode) error {
	f, err := s.lookAt(ctx, name, true)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := unix.Faccessat2(int(f.Fd()), "", uint32(mode), unix.AT_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "access", Path: name, Err: err}
	}
	return nil
}

// lookAt opens what a test or cd examines as an O_PATH descriptor beneath
// the workspace (the last symlink followed only when follow is set), after
// the guard allowed reading the path, and asks again with the real path of
// what was opened. A path outside the workspace, or one the guard refuses,
// stops the whole command: whatever the test answered would tell the script
// something about it. Any other error (a missing file) is returned as the
// test's false answer.
func (s *shellRun) lookAt(ctx context.Context, name string, follow bool) (*os.File, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(interp.HandlerCtx(ctx).Dir, path)
	}
	path = filepath.Clean(path)
	flag := unix.O_PATH
	if !follow {
		flag |= unix.O_NOFOLLOW
	}
	if probeDevices[path] {
		return os.OpenFile(path, flag, 0)
	}
	if err := s.guard.Open(ctx, path, false); err != nil {
		return nil, s.deny(err)
	}
	f, err := s.w.openBeneath(path, flag, 0)
	if err != nil {
		if errors.Is(err, errOutside) {
			return nil, s.deny(userErrorf("%s: %s is outside the workspace; the shell may not look at it", Shell, path))
		}
		return nil, err
	}
	real, err := fdPath(f)
	if err != nil {
		_ = f.Close()
		return nil, s.deny(fmt.Errorf("locating %s: %w", path, err))
	}
	if real != path {
		if err := s.guard.Open(ctx, real, false); err != nil {
			_ = f.Close()
			return nil, s.deny(err)
		}
	}
	return f, nil
}

// nopCloser is a write-only stream whose Close does nothing.
type nopCloser struct{ w io.Writer }

func (n nopCloser) Read([]byte) (int, error)    { return 0, io.EOF }
func (n nopCloser) Write(p []byte) (int, error) { return n.w.Write(p) }
func (n nopCloser) Close() error                { return nil }

// clearNonblock undoes the O_NONBLOCK a FIFO was opened with (so that
// opening one cannot hang the call) for ordinary reads and writes.
func clearNonblock(f *os.File) error {
	return syscall.SetNonblock(int(f.Fd()), false)
}

// readDir lists a directory for glob expansion: only the workspace's, and
// without the names the guard refuses to open for reading, so that a
// forbidden name expands as if it did not exist. A refused path is itself
// reported missing (the expansion also reads a pattern's literal parts, a
// file's among them, to learn whether they exist).
func (s *shellRun) readDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	hc := interp.HandlerCtx(ctx)
	if !filepath.IsAbs(path) {
		path = filepath.Join(hc.Dir, path)
	}
	path = filepath.Clean(path)
	absent := &os.PathError{Op: opOpen, Path: path, Err: syscall.ENOENT}
	if s.guard.Refuses(ctx, path) {
		return nil, absent
	}
	f, err := s.w.openBeneath(path, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	real, err := fdPath(f)
	if err != nil {
		return nil, fmt.Errorf("locating %s: %w", path, err)
	}
	if real != path && s.guard.Refuses(ctx, real) {
		return nil, absent
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(entries, func(e fs.DirEntry) bool {
		return s.guard.Refuses(ctx, filepath.Join(path, e.Name())) ||
			real != path && s.guard.Refuses(ctx, filepath.Join(real, e.Name()))
	}), nil
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
