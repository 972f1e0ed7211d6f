package autonomy

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// The differential oracle: a command line the hook allows is run under
// real bash and dash, traced with strace, in a scratch workspace; the run
// must not open, create or change any file outside the workspace (system
// files the programs themselves load excepted) or matching a forbidden
// glob, and must execute only allow-listed programs.

// oracleTools are the programs the oracle's policy allows.
var oracleTools = []string{"cat", "ls", "echo", "grep", "wc", "head", "sort", "true", "printf", "test", "[",
	"sed", "awk", "find", "cp", "du"}

// oracleSystem are path prefixes the programs load or consult on their
// own (the dynamic loader, locales, user names for ls -l).
var oracleSystem = []string{"/usr/", "/lib/", "/lib64/", "/etc/ld.so.", "/etc/locale.alias", "/etc/localtime",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/proc/", "/sys/", "/dev/null", "/dev/tty", "/etc/inputrc"}

type oracle struct {
	tmp, ws string
	hook    *Hook
	shells  []string
	strace  string
}

func newOracle(t testing.TB) *oracle {
	t.Helper()
	st, err := exec.LookPath("strace")
	if err != nil {
		t.Fatal("strace is not installed (Debian package strace; make test-deps installs it)")
	}
	var shells []string
	for _, s := range []string{"bash", "dash"} {
		p, err := exec.LookPath(s)
		if err != nil {
			t.Fatalf("%s is not installed (Debian package %s; make test-deps installs it)", s, s)
		}
		shells = append(shells, p)
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := &oracle{tmp: tmp, ws: filepath.Join(tmp, "ws"), shells: shells, strace: st}
	for p, body := range map[string]string{
		"ws/src/a.go": "package a\n", "ws/src/b.txt": "b\n", "ws/.env": "SECRET=1\n", "ws/secrets/key": "k\n",
		"ws/config/.env": "S=2\n", "ws/docs/readme": "r\n", "outside/secret": "s\n",
	} {
		full := filepath.Join(tmp, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(tmp, "outside"), filepath.Join(o.ws, "out")); err != nil {
		t.Fatal(err)
	}
	var allow []string
	for _, c := range oracleTools {
		allow = append(allow, c, c+" *")
	}
	o.hook, err = New(Config{WorkspaceRoot: o.ws, WorkspaceOnly: true, ForbiddenPathGlobs: []string{"**/.env", "secrets/**"},
		AllowShell: true, AllowedShellCommands: allow})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// allowed asks the hook.
func (o *oracle) allowed(cmd string) bool {
	b, err := json.Marshal(sh(cmd))
	if err != nil {
		return false
	}
	v, err := o.hook.Before(context.Background(), hooks.NewCall("shell", string(b)))
	return err == nil && v.Allowed
}

var (
	straceLine = regexp.MustCompile(`^\d+\s+(\w+)\((.*)$`)
	openResult = regexp.MustCompile(`= \d+<([^>]*)>$`)
	dirArg     = regexp.MustCompile(`<([^>]*)>, "((?:[^"\\]|\\.)*)"`)
	firstStr   = regexp.MustCompile(`^"((?:[^"\\]|\\.)*)"`)
)

var modifying = map[string]bool{"mkdir": true, "mkdirat": true, "unlink": true, "unlinkat": true, "rename": true,
	"renameat": true, "renameat2": true, "link": true, "linkat": true, "symlink": true, "symlinkat": true,
	"truncate": true, "chmod": true, "fchmodat": true, "chown": true, "fchownat": true, "rmdir": true, "creat": true}

// run traces cmd under shell and returns the violations.
func (o *oracle) run(t testing.TB, shell, cmd string) []string {
	t.Helper()
	log := filepath.Join(o.tmp, "strace.log")
	_ = os.Remove(log)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, o.strace, "-f", "-qq", "-y", "-e", "trace=%file,%process", "-o", log, shell, "-c", cmd)
	c.Dir = o.ws
	c.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + o.ws, "LC_ALL=C"}
	c.Stdin = nil
	_ = c.Run() // the command's own exit status does not matter
	if ctx.Err() != nil {
		// An incomplete trace proves nothing: never pass on one.
		t.Fatalf("tracing %s -c %q did not finish", shell, cmd)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatalf("strace wrote no log for %q: %v", cmd, err)
	}
	defer func() { _ = f.Close() }()
	var bad []string
	traced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := straceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, rest := m[1], m[2]
		if name == "execve" && strings.Contains(rest, `"`+shell+`"`) {
			traced = true
		}
		switch {
		case name == "execve" || name == "execveat":
			if strings.Contains(line, "= -1 ") {
				continue
			}
			if s := firstStr.FindStringSubmatch(rest); s != nil {
				base := filepath.Base(s[1])
				if base != filepath.Base(shell) && !slices.Contains(oracleTools, base) {
					bad = append(bad, "executed "+s[1])
				}
			}
		case name == "open" || name == "openat" || name == "openat2" || name == "creat":
			if r := openResult.FindStringSubmatch(line); r != nil {
				if why := o.violates(r[1]); why != "" {
					bad = append(bad, name+" "+r[1]+": "+why)
				}
			}
		case modifying[name]:
			if !strings.HasSuffix(line, "= 0") {
				continue
			}
			for _, d := range dirArg.FindAllStringSubmatch(rest, -1) {
				p := d[2]
				if !filepath.IsAbs(p) {
					p = filepath.Join(d[1], p)
				}
				if why := o.violates(filepath.Clean(p)); why != "" {
					bad = append(bad, name+" "+p+": "+why)
				}
			}
			if s := firstStr.FindStringSubmatch(rest); s != nil {
				p := s[1]
				if !filepath.IsAbs(p) {
					p = filepath.Join(o.ws, p)
				}
				if why := o.violates(filepath.Clean(p)); why != "" {
					bad = append(bad, name+" "+p+": "+why)
				}
			}
		}
	}
	if err := sc.Err(); err != nil || !traced {
		t.Fatalf("the trace of %s -c %q is incomplete (%v): strace could not trace the shell", shell, cmd, err)
	}
	return bad
}

// violates says why the real path p breaks the oracle's policy, or "".
func (o *oracle) violates(p string) string {
	if p == o.ws || strings.HasPrefix(p, o.ws+"/") {
		rel := strings.TrimPrefix(p, o.ws)
		if filepath.Base(p) == ".env" || strings.Contains(rel, "/.env/") || rel == "/secrets" || strings.HasPrefix(rel, "/secrets/") {
			return "matches a forbidden glob"
		}
		return ""
	}
	if p == o.tmp+"/strace.log" {
		return ""
	}
	if strings.HasPrefix(p, o.tmp) {
		return "outside the workspace"
	}
	for _, s := range oracleSystem {
		if strings.HasPrefix(p, s) {
			return ""
		}
	}
	return "outside the workspace and not a system file"
}

// oracleSeeds are command lines from every class: those the hook must
// deny, and ordinary ones it allows.
var oracleSeeds = []string{
	"cat src/a.go", "ls", "ls src", "cat src/*.go", "echo hi > src/out.txt", "grep -n a src/a.go | wc -l",
	"cat src/main{.go,}", "echo x{,}", "echo {a,b}{c,}", "ls src/[[:alpha:]]*", "head -n1 src/b.txt",
	"cat .[[:alpha:]]nv", "cat s[[:alpha:]]crets/key", "cat .[[=e=]]nv", "ls > .[[:alpha:]]nv", "ls .[[:punct:]]",
	"cat .[[:punct:]]/outside/secret", "ls > {.env,}", "cat - < {secrets/key,}", "echo x > {../x,}",
	"[ -n x ] || cat $'.env'", "[[ -n x || cat .env > y ]]", "cat <<< x > .env", "cat .e?v", "cat */.env",
	"cat out/secret", "cat ./out/../../outside/secret", "ls .*", "cat .*/outside/secret", "grep -r SECRET .",
	"grep -r SECRET src", "ls -R", "cat src/../.env", "cat ~/.env", "printf '%s' x > secrets/new", "sort -o .env src/b.txt",
	"cat config/.e[n]v", "cat {config,src}/.env", "cat con*/.env", "test -f .env && cat .env", "echo $'\\x2eenv'",
	"cat \\.env", "cat '.env'", "cat \".env\"", "ls secrets", "cat $(echo .env)", "cat `echo .env`",
	// Programs that run programs or read files their arguments do not name.
	"sed -n 1p src/a.go", "sed -ne'1e cat .env' src/a.go", "sed -n '1eid' src/a.go", "sed '1r.env' src/a.go",
	"sed 's/a/b/w.env' src/a.go", "sed --expr='1e id' src/a.go", "sed '\\%a%e id' src/a.go", "sed 's/[/]/x/e' src/a.go",
	"sed -n 's/a/b/p' src/a.go", "awk '{print $1}' src/a.go", "awk 'BEGIN{ARGV[1]=\".env\";ARGC=2}{print}'",
	"awk '{getline l < \".env\"; print l}' src/a.go", "awk 'BEGIN{system(\"id\")}'", "awk '{print > \".env\"}' src/a.go",
	"find src -name '*.go'", "find . -name x", "find -L docs", "cp -r src docs/copy", "cp --recur config docs/c",
	"grep --recur SECRET .", "grep --dir=recurse SECRET config", "ls --recur", "du -a config", "du -a docs",
	// A leading dot is matched only by a dot: none of these names .env.
	"cat ?env", "cat [.]env", "cat config/?env", "cat */?env", "cat [!a]env", "cat *env", "cat config/*env",
	"cat [[:punct:]]env", "cat ?[e]nv", "cat ?env 2>/dev/null", "cat .?nv", "cat config/.*",
	// Recursive listers that do not follow links.
	"ls -R src", "ls -R config", "ls -lR docs", "ls -RL docs", "ls -R out",
	// Here-documents with delimiters quoted in part are literal text.
	"cat <<E\"O\"F\n$(cat .env)\nEOF", "cat <<E\\OF\n`cat secrets/key`\nEOF", "cat <<-E'O'F\n\t$(cat .env)\n\tEOF",
	"cat <<E\"O\"F\nx\\\nEOF\ncat .env\nEOF", "cat <<EOF\n$(cat .env)\nEOF",
	"echo x >/dev/stderr", "echo x > /dev/fd/2", "cat /dev/fd/3 3<.env", "cat /proc/self/fd/0 < .env",
}

// TestOracleCatchesViolations checks the oracle itself: commands that
// break the policy, run directly, are reported.
func TestOracleCatchesViolations(t *testing.T) {
	o := newOracle(t)
	for _, cmd := range []string{"cat .env", "cat out/secret", "cat secrets/key", "echo x > ../x", "id",
		"sed -n '1eid' src/a.go", "awk 'BEGIN{ARGV[1]=\".env\";ARGC=2}{print}'", "grep --recur SECRET ."} {
		for _, sh := range o.shells {
			if bad := o.run(t, sh, cmd); len(bad) == 0 {
				t.Errorf("%s -c %q: the oracle saw no violation", sh, cmd)
			}
		}
	}
}

// TestOracleAgreesWithTheHook runs every seed the hook allows under bash
// and dash and requires a clean trace.
func TestOracleAgreesWithTheHook(t *testing.T) {
	o := newOracle(t)
	n := 0
	for _, cmd := range oracleSeeds {
		if !o.allowed(cmd) {
			continue
		}
		n++
		for _, sh := range o.shells {
			if bad := o.run(t, sh, cmd); len(bad) > 0 {
				t.Errorf("%s -c %q was allowed but %v", sh, cmd, bad)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d seeds were allowed; the oracle checked too little", n)
	}
}

// FuzzOracle runs command lines the hook allows under bash and dash and
// fails on any violation the trace shows.
func FuzzOracle(f *testing.F) {
	for _, s := range oracleSeeds {
		f.Add(s)
	}
	o := newOracle(f)
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > 512 || !o.allowed(cmd) {
			return
		}
		for _, sh := range o.shells {
			if bad := o.run(t, sh, cmd); len(bad) > 0 {
				t.Errorf("%s -c %q was allowed but %v", sh, cmd, bad)
			}
		}
	})
}
