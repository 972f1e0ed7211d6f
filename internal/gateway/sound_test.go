package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/sandbox"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// soundEnv is a gateway whose audit log is a real file outside the
// workspace, with sentinel files inside (.env) and outside (outside.txt) it.
type soundEnv struct {
	*env
	auditPath string
	outside   string
	calls     int
}

const envSecret = "API_KEY=top-secret\n"
const outsideSecret = "outside-secret\n"

func newSoundEnv(t *testing.T, policy string) *soundEnv {
	t.Helper()
	dir := t.TempDir()
	s := &soundEnv{auditPath: filepath.Join(dir, "audit.log"), outside: filepath.Join(dir, "outside.txt")}
	f, err := os.OpenFile(s.auditPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := os.WriteFile(s.outside, []byte(outsideSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = newEnv(t, func(o *gateway.Options) { o.Audit = audit.NewJSONSink(f) })
	for name, body := range map[string]string{".env": envSecret, "src/app.go": "package app\n", "src/xylo.txt": "x\n"} {
		if err := os.WriteFile(filepath.Join(s.ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.mustPush(compileYAML(t, s.ws, policy))
	return s
}

// run makes one tool call and counts it.
func (s *soundEnv) run(tool, args string) wire.ToolCallResponse {
	s.t.Helper()
	s.calls++
	return s.call(tool, args)
}

// sentinelsIntact checks that nothing outside the call's business changed:
// .env, the file outside the workspace, no file "pwned" anywhere, and the
// audit log holds exactly one well-formed record per call and nothing else.
func (s *soundEnv) sentinelsIntact() {
	t := s.t
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(s.ws, ".env")); err != nil || string(b) != envSecret {
		t.Errorf(".env changed: %q %v", b, err)
	}
	if b, err := os.ReadFile(s.outside); err != nil || string(b) != outsideSecret {
		t.Errorf("the file outside the workspace changed: %q %v", b, err)
	}
	for _, p := range []string{filepath.Join(s.ws, "pwned"), filepath.Join(filepath.Dir(s.outside), "pwned"), filepath.Join(os.TempDir(), "pwned")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("sentinel %s was created", p)
		}
	}
	f, err := os.Open(s.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	n, line := 0, 0
	started := map[any]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line++
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec["tool"] == nil || rec["callId"] == nil ||
			strings.Contains(sc.Text(), "forged-record") && rec["tool"] == "forged" {
			t.Errorf("audit line %d is not a record the gateway wrote: %q", line, sc.Text())
			continue
		}
		switch rec["msg"] {
		case audit.MessageStarted:
			started[rec["callId"]] = true
		case audit.Message:
			delete(started, rec["callId"])
			n++
		default:
			t.Errorf("audit line %d has an unknown message: %q", line, sc.Text())
		}
	}
	if n != s.calls {
		t.Errorf("the audit log holds %d call records for %d calls", n, s.calls)
	}
	if len(started) > 0 {
		t.Errorf("%d decision records have no completing record", len(started))
	}
}

// noSecrets checks that a result shows neither secret.
func noSecrets(t *testing.T, what string, r wire.ToolCallResponse) {
	t.Helper()
	if strings.Contains(r.Result, "top-secret") || strings.Contains(r.Result, "outside-secret") {
		t.Errorf("%s leaked a secret: %+v", what, r)
	}
}

const listedPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: coding-agent
spec:
  workspace: {root: WORKSPACE, only: true}
  forbiddenPathGlobs: ["**/.env"]
  shell:
    allow: true
    allowedCommands: ["cat", "cat *", "ls *", "ls", "grep *", "wc *", "echo *", "git *", "go *", "true", "sh *"]
`

const openPolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: AutonomyPolicy
metadata:
  name: coding-agent
spec:
  workspace: {root: WORKSPACE, only: false}
  forbiddenPathGlobs: ["**/.env"]
  shell:
    allow: true
    allowedCommands: ["*"]
`

// The classes an outside test found, through the gateway's real shell tool.
func TestShellClassesThatDashRanDifferently(t *testing.T) {
	s := newSoundEnv(t, listedPolicy)
	for _, cmd := range []string{
		"[[ x || sh -ef /dev/stdin ]] <<EOF\ntouch pwned\nEOF",
		"[[ x || sh -c 'touch pwned' ]]",
		"[[ x > .env ]]",
		"[[ x > pwned ]]",
		"[[ -n x ]] && echo ok > /dev/null",
	} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
	}
	s.sentinelsIntact()
}

func TestShellGlobsArePOSIXAndChecked(t *testing.T) {
	s := newSoundEnv(t, listedPolicy)
	for _, cmd := range []string{"cat .[[:alpha:]]nv", "cat .[[:lower:]][n]v", "cat .e?v", "cat .[e]nv"} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
		if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != "forbiddenPathGlobs" {
			t.Errorf("%s: want a forbiddenPathGlobs denial, got %+v", cmd, r)
		}
	}
	// No shell matches a leading dot without a dot: these name no .env.
	for _, cmd := range []string{"cat ?env", "cat [.]env"} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
		if r.Status != "succeeded" {
			t.Errorf("%s: want it to run (and find no file), got %+v", cmd, r)
		}
	}
	for _, cmd := range []string{"cat .[[:punct:]]/outside.txt", "cat .[.]/outside.txt", "ls .[[:punct:]]"} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
		if strings.Contains(r.Result, "audit.log") {
			t.Errorf("%s listed the parent directory: %q", cmd, r.Result)
		}
	}
	s.sentinelsIntact()
}

// A runtime denial reaches the result and the single audit record.
func TestARuntimeDenialIsAuditedOnceWithItsReason(t *testing.T) {
	s := newSoundEnv(t, openPolicy)
	r := s.run("shell", `{"command":"cat \"$(printf .en)v\""}`)
	if r.Status != "denied" || r.Denial == nil || r.Denial.Rule != "forbiddenPathGlobs" || !strings.Contains(r.Denial.Reason, "At run time") ||
		r.Result != "Tool execution denied by hook: AutonomyPolicy/default/coding-agent" {
		t.Fatalf("got %+v", r)
	}
	s.sentinelsIntact()
	b, err := os.ReadFile(s.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	for l := range strings.Lines(string(b)) {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("audit log %q: %v", b, err)
		}
		if r["msg"] == audit.Message {
			if rec != nil {
				t.Fatalf("two call records in %q", b)
			}
			rec = r
		}
	}
	if rec["outcome"] != "denied" || !strings.Contains(string(b), "At run time") || !strings.Contains(string(b), "forbiddenPathGlobs") {
		t.Errorf("audit record %s", b)
	}
}

// Builtins that could run unchecked text or leave the workspace.
func TestShellBuiltinsCannotEscapeTheChecks(t *testing.T) {
	s := newSoundEnv(t, openPolicy)
	if err := os.WriteFile(filepath.Join(s.ws, "script.sh"), []byte("cat .env\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	denied := []string{
		`eval 'cat .env'`,
		`x='cat .e'; eval "${x}nv"`,
		`exec cat .env`,
		`command cat .env`,
		`builtin eval 'cat .env'`,
		`source script.sh`,
		`. ./script.sh`,
		`source .env`,
		`trap 'cat .env' EXIT; true`,
		`f() { cat "$1"; }; f .env`,
		`echo $(<.env)`,
		`cat < .env`,
		`read -r line < .env; echo "$line"`,
		`echo forged > .env`,
		`alias c='cat .env'` + "\n" + `c`,
		`sh -c 'cat .env'`,
		`env cat .env`,
	}
	for _, cmd := range denied {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
		if r.Status == "succeeded" && !strings.Contains(r.Result, "Permission denied") && !strings.Contains(r.Result, "exit status") {
			t.Errorf("%s: %+v", cmd, r)
		}
	}
	// The interpreter opens its own FIFOs in its TMPDIR without the open
	// handler: no program the script starts can plant a symlink there.
	for _, cmd := range []string{
		`ln -s ` + s.auditPath + ` "$TMPDIR/sh-interp-a"; echo forged-record >> "$TMPDIR/sh-interp-a"`,
		`ln -s ` + s.outside + ` "$TMPDIR/sh-interp-b"; cat < "$TMPDIR/sh-interp-b"`,
		`ln -s ` + s.outside + ` ~/sh-interp-c; cat < ~/sh-interp-c`,
		`ln -s ` + s.outside + ` "$HOME/../sh-interp-d"; cat < "$HOME/../sh-interp-d"`,
	} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
	}
	// cd cannot leave the workspace (nor reach it through $HOME, $OLDPWD or CDPATH).
	for _, cmd := range []string{"cd / && cat etc/hostname", "cd .. && cat outside.txt", "cd; pwd", "OLDPWD=/; cd -; pwd",
		"CDPATH=/ cd etc; pwd", "builtin cd ..; cat outside.txt", "pushd .. && cat outside.txt",
		"command -- cd / && pwd", "builtin -- cd .. && pwd"} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
		if !strings.Contains(r.Result, "Error: shell:") {
			t.Errorf("%s: %+v", cmd, r)
		}
	}
	// Writing outside through redirections, /dev and /proc fails.
	for _, cmd := range []string{
		"echo forged-record > " + s.auditPath,
		"echo forged-record >> " + s.auditPath,
		"echo forged-record > ../audit.log",
		"echo forged-record > /proc/self/fd/1",
		"echo forged-record > /proc/" + strconv.Itoa(os.Getpid()) + "/root" + s.auditPath,
		"echo pwned > /tmp/pwned",
		"cat " + s.outside,
		"cat ../outside.txt",
		"cat /proc/self/root" + s.outside,
	} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
	}
	s.sentinelsIntact()
}

// The file tools never reach /dev, /proc or the gateway's own files.
func TestFileToolsCannotReachTheGatewaysStreams(t *testing.T) {
	s := newSoundEnv(t, listedPolicy)
	// Redirect this process's stdout and stderr to files for the duration.
	var saved [3]int
	captured := map[int]string{}
	for _, fd := range []int{1, 2} {
		p := filepath.Join(t.TempDir(), "fd"+strconv.Itoa(fd))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if saved[fd], err = unix.Dup(fd); err != nil {
			t.Fatal(err)
		}
		if err := unix.Dup2(int(f.Fd()), fd); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		captured[fd] = p
	}
	auditFD := -1
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == s.auditPath {
				auditFD, _ = strconv.Atoi(e.Name())
			}
		}
	}
	var results []wire.ToolCallResponse
	paths := []string{"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2", "/proc/self/fd/1", "/proc/self/fd/2",
		"/dev/fd/" + strconv.Itoa(auditFD), "/proc/self/fd/" + strconv.Itoa(auditFD), s.auditPath,
		"/proc/" + strconv.Itoa(os.Getpid()) + "/root" + s.auditPath, "../audit.log", "/dev/null"}
	for _, p := range paths {
		results = append(results, s.run("write_file", fmt.Sprintf(`{"path":%q,"content":"{\"tool\":\"forged\",\"x\":\"forged-record\"}\n"}`, p)))
		results = append(results, s.run("edit_file", fmt.Sprintf(`{"path":%q,"old_string":"a","new_string":"forged-record"}`, p)))
	}
	for _, p := range []string{"/dev/stdin", "/dev/zero", "/proc/self/environ", "/proc/self/fd/0", s.outside, "/proc/self/root" + s.outside} {
		results = append(results, s.run("read_file", fmt.Sprintf(`{"path":%q}`, p)))
		results = append(results, s.run("list_dir", fmt.Sprintf(`{"path":%q}`, p)))
	}
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(saved[fd], fd); err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(saved[fd])
	}
	for fd, p := range captured {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "forged-record") {
			t.Errorf("a file tool wrote to the gateway's fd %d: %q", fd, b)
		}
	}
	for i, r := range results {
		noSecrets(t, "file tool call", r)
		if r.Status == "succeeded" && (strings.HasPrefix(r.Result, "Wrote") || strings.HasPrefix(r.Result, "Edited")) {
			t.Errorf("call %d wrote: %+v", i, r)
		}
	}
	s.sentinelsIntact()
}

// A policy without workspaceOnly still cannot make a command read outside:
// Landlock confines what the shell starts.
func TestLandlockConfinesCommandsThePolicyAllows(t *testing.T) {
	s := newSoundEnv(t, openPolicy)
	for _, cmd := range []string{"cat ../outside.txt", "/bin/sh -c 'cat ../outside.txt'", "cp ../outside.txt stolen.txt",
		"sh -c 'echo pwned > ../pwned'", "cat /proc/self/root" + s.outside} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, cmd))
		noSecrets(t, cmd, r)
		if strings.HasPrefix(cmd, "cat /proc/") {
			// A path through a process's /proc directory is refused statically.
			if r.Status != "denied" || r.Denial == nil || r.Denial.Layer != "static" {
				t.Errorf("%s: want a static denial, got %+v", cmd, r)
			}
			continue
		}
		if r.Status != "succeeded" || !strings.Contains(r.Result, "exit status") {
			t.Errorf("%s: %+v", cmd, r)
		}
	}
	if _, err := os.Stat(filepath.Join(s.ws, "stolen.txt")); err == nil {
		if b, _ := os.ReadFile(filepath.Join(s.ws, "stolen.txt")); strings.Contains(string(b), "outside") {
			t.Error("a confined cp copied the file outside")
		}
	}
	s.sentinelsIntact()
}

// What worked before keeps working, with the same output.
func TestAllowedCommandsKeepWorking(t *testing.T) {
	s := newSoundEnv(t, listedPolicy)
	if out, err := exec.Command("git", "-C", s.ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"ls src | grep x", "xylo.txt\n"},
		{"ls src | wc -l", "3\n"},
		{"cat <<EOF\nhello\nEOF", "hello\n"},
		{"cat <<'EOF' | grep -c x\nx\nEOF", "1\n"},
		{"echo 'package x' | grep -c package", "1\n"}, // <<< is bash-only: refused under the default dialects (bash and posix)
		{"echo hi > out.txt; cat out.txt", "hi\n"},
		{"echo err >&2; echo out >/dev/stderr", "err\nout\n"},
		{"git status --porcelain --untracked-files=all src", "?? src/app.go\n?? src/main.go\n?? src/xylo.txt\n"},
		{"go version | grep -c 'go version'", "1\n"}, // see goNote
		{"ls src/*.go", "src/app.go\nsrc/main.go\n"},
	} {
		r := s.run("shell", fmt.Sprintf(`{"command":%q}`, tc.cmd))
		// The go command starts its telemetry process (the programs' HOME
		// is new, so its mode is the default, local), which outlives it;
		// the supervisor ends it and the result says so.
		const goNote = "[1 process left running was ended]\n"
		if strings.HasPrefix(tc.cmd, "go ") && r.Result == tc.want+goNote {
			r.Result = tc.want
		}
		if r.Status != "succeeded" || r.Result != tc.want {
			t.Errorf("%s: got %+v, want %q", tc.cmd, r, tc.want)
		}
	}
	s.sentinelsIntact()
}

// Without Landlock the gateway decides calls but runs no tool, unless the
// sandbox is explicitly off; /readyz and the metrics say which.
func TestWithoutLandlockToolCallsAreRefusedUnlessTheSandboxIsOff(t *testing.T) {
	noLandlock := func() (int, error) { return 0, unix.ENOSYS }
	for _, tc := range []struct {
		mode, state, ready string
		runs               bool
	}{
		{sandbox.ModeLandlock, "unavailable", "unavailable: ", false},
		{sandbox.ModeOff, "off", "off: ", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			sb, err := sandbox.New(sandbox.Config{Mode: tc.mode, ABI: noLandlock})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(o *gateway.Options) { o.Sandbox = sb })
			e.mustPush(compileYAML(t, e.ws, openPolicy))
			if d := e.decide("shell", `{"command":"echo ran > ran.txt"}`); !d.Allowed {
				t.Errorf("decisions must still work: %+v", d)
			}
			for _, call := range [][2]string{
				{"shell", `{"command":"echo ran > ran.txt"}`},
				{"write_file", `{"path":"written.txt","content":"x"}`},
				{"read_file", `{"path":"README.md"}`},
			} {
				r := e.call(call[0], call[1])
				if tc.runs != (r.Status == "succeeded") {
					t.Errorf("%s: %+v", call[0], r)
				}
			}
			for _, f := range []string{"ran.txt", "written.txt"} {
				if _, err := os.Stat(filepath.Join(e.ws, f)); (err == nil) != tc.runs {
					t.Errorf("%s exists: %v", f, err == nil)
				}
			}
			status, body := e.do("GET", "/readyz", "", nil, nil)
			var ready wire.ReadyResponse
			mustUnmarshal(t, body, &ready)
			if status != 200 || !ready.Ready || !strings.HasPrefix(ready.Sandbox, tc.ready) {
				t.Errorf("/readyz %d %+v", status, ready)
			}
			if m := e.metrics(); !strings.Contains(m, `toolhooks_sandbox_info{abi="0",state="`+tc.state+`"} 1`) {
				t.Errorf("metrics lack the sandbox state %s", tc.state)
			}
		})
	}
	e := newEnv(t, nil)
	if m := e.metrics(); !strings.Contains(m, `toolhooks_sandbox_info{abi="`) || !strings.Contains(m, `state="landlock"} 1`) {
		t.Error("the default sandbox is not Landlock on this kernel")
	}
}

// TestProgramsThatRunProgramsThroughDecisionsAndTheShellTool: options that
// run programs, git objects and content readers, and recursive readers are
// denied by /v1/decisions (the static check agents that run tools
// themselves get) and by the gateway's shell tool, with nothing run.
func TestProgramsThatRunProgramsThroughDecisionsAndTheShellTool(t *testing.T) {
	s := newSoundEnv(t, listedPolicy)
	for _, cmd := range []string{
		"go test --exec='sh -c \"touch pwned\"' ./...",
		"go vet --vettool=/bin/true ./...",
		"go build -ldflags=-extld=/bin/true ./...",
		"go -C . generate ./...",
		"git grep -O'touch pwned' package",
		"git show origin/main:.env",
		"git show :0:.env",
		"git log -p",
		"git diff --no-index src .",
		"grep --recur API_KEY .",
		"grep --dir=recurse API_KEY .",
		"ls --recur",
	} {
		args := fmt.Sprintf(`{"command":%q}`, cmd)
		s.calls++ // a decision is audited like a call
		if d := s.decide("shell", args); d.Allowed || d.Denial == nil {
			t.Errorf("/v1/decisions allowed %q: %+v", cmd, d)
		}
		r := s.run("shell", args)
		if r.Status != "denied" {
			t.Errorf("the shell tool ran %q: %+v", cmd, r)
		}
		noSecrets(t, cmd, r)
	}
	for _, cmd := range []string{"git diff -- src", "grep -r package src", "ls src"} {
		s.calls++
		if d := s.decide("shell", fmt.Sprintf(`{"command":%q}`, cmd)); !d.Allowed {
			t.Errorf("/v1/decisions denied %q: %+v", cmd, d.Denial)
		}
	}
	s.sentinelsIntact()
}
