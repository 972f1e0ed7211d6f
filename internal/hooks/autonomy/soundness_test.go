package autonomy

import (
	"os"
	"path/filepath"
	"testing"
)

// soundFixture adds a secrets directory and a workspace file named
// main.go to the common fixture, and forbids secrets/ too.
func soundFixture(t *testing.T) (fixture, Config) {
	t.Helper()
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.ws, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "secrets", "key"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "src", "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.ForbiddenPathGlobs = append(cfg.ForbiddenPathGlobs, "secrets/**")
	return f, cfg
}

// TestShellSoundnessClassesAreDenied covers the classes a static check
// misread: POSIX bracket expressions, brace expansion in redirections, and
// text bash and dash read differently.
func TestShellSoundnessClassesAreDenied(t *testing.T) {
	_, cfg := soundFixture(t)
	h := newHook(t, cfg)
	for _, cmd := range []string{
		// Bracket expressions and character classes.
		"cat .[[:alpha:]]nv",
		"cat s[[:alpha:]]crets/key",
		"cat .[[=e=]]nv",
		"cat .[[.e.]]nv",
		"ls > .[[:alpha:]]nv",
		"cat .[e]nv",
		"cat .[!x]nv",
		"cat .[^x]nv",
		"cat secret[-_]data",
		"cat .?nv",
		"cat ./*/key",
		"ls .[[:punct:]]",
		"cat .[[:punct:]]/outside/secret",
		"cat @(.env)",
		"cat +(.e)nv",
		"cat src/**/../../.env",
		// Brace expansion in redirection targets.
		"ls > {.env,}",
		"cat - < {secrets/key,}",
		"git status > {../x,}",
		"ls >> {a,.env}",
		"cat < src/{a.go,../.env}",
		// Brace words with empty alternatives that reach forbidden names.
		"cat .env{,}",
		"cat {.env,}",
		"cat secrets/{key,}",
		"cat {x,}{.env,}",
		// Dialects: under dash [[ is a command and || and > are real.
		"[[ -f x || cat .env > y ]]",
		"[ -f x ] || cat $'.env'",
		"echo $'\\x2eenv'",
		"cat <<< x > .env",
		"diff <(cat .env) src/a.go",
		"function f { cat .env; }; f",
		"echo $((1+2)) > .env",
		// Nested shells read in their own dialects.
		"sh -c 'cat .[[:alpha:]]nv'",
		"bash -c 'cat {.env,}'",
		"sh -c 'ls > {.env,}'",
	} {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); v.Allowed {
			t.Errorf("%q was allowed", cmd)
		}
	}
}

// TestShellBraceWordsAreAnalysed checks that brace words with an empty
// alternative, which used to crash the analysis, are analysed and allowed
// when every word they expand to is allowed.
func TestShellBraceWordsAreAnalysed(t *testing.T) {
	_, cfg := soundFixture(t)
	h := newHook(t, cfg)
	for _, cmd := range []string{
		"cat src/main{.go,}",
		"echo x{,}",
		"echo {a,b}{c,}",
		"ls src/{a.go,main.go}",
		"ls > src/out{.txt,}",
		"cat src/[[:alpha:]].go",
		"ls src/*.go",
		"cat src/[am]*.go",
		"echo '[[:alpha:]]'",
		"git status",
		"ls src && cat src/a.go",
	} {
		if v := decide(t, h, "shell", obj(t, sh(cmd))); !v.Allowed {
			t.Errorf("%q was denied: %s", cmd, v.Reason)
		}
	}
}

// TestShellDialectsField checks that the dialects a policy declares are
// the readings checked: bash-only text parses when only bash is declared.
func TestShellDialectsField(t *testing.T) {
	_, cfg := soundFixture(t)
	both := newHook(t, cfg)
	cfg.ShellDialects = []string{"bash"}
	bashOnly := newHook(t, cfg)
	cfg.ShellDialects = []string{"posix"}
	posixOnly := newHook(t, cfg)
	cmd := obj(t, sh("diff <(cat src/a.go) src/main.go"))
	if v := decide(t, both, "shell", cmd); v.Allowed {
		t.Error("process substitution allowed under bash+posix (dash cannot parse it)")
	}
	if v := decide(t, bashOnly, "shell", cmd); !v.Allowed {
		t.Errorf("process substitution denied under bash only: %s", v.Reason)
	}
	// [[ ... ]] with an operator dash reads as a pipeline into a command.
	cmd = obj(t, sh("[[ -n x ]] && ls"))
	if v := decide(t, posixOnly, "shell", cmd); v.Allowed {
		t.Error(`"[[ -n x ]]" allowed under posix, where [[ is a command outside the allow-list`)
	}
	if v := decide(t, bashOnly, "shell", cmd); !v.Allowed {
		t.Errorf(`"[[ -n x ]] && ls" denied under bash: %s`, v.Reason)
	}
	cfg.ShellDialects = []string{"fish"}
	if _, err := New(cfg); err == nil {
		t.Error("an unknown dialect was accepted")
	}
}
