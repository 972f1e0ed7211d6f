package progenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestGitEnvGivesEverySetting(t *testing.T) {
	env := map[string]string{}
	for _, e := range GitEnv() {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			t.Fatalf("entry %q has no '='", e)
		}
		if _, dup := env[k]; dup {
			t.Fatalf("%s is set twice", k)
		}
		env[k] = v
	}
	n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	if err != nil || n != len(GitSettings) {
		t.Fatalf("GIT_CONFIG_COUNT = %q, want %d", env["GIT_CONFIG_COUNT"], len(GitSettings))
	}
	for i, s := range GitSettings {
		k, v := env["GIT_CONFIG_KEY_"+strconv.Itoa(i)], env["GIT_CONFIG_VALUE_"+strconv.Itoa(i)]
		if k != s.Key || v != s.Value {
			t.Errorf("setting %d = %s=%q, want %s=%q", i, k, v, s.Key, s.Value)
		}
		if s.Why == "" {
			t.Errorf("%s says nothing of what it turns off", s.Key)
		}
	}
	for _, k := range []string{"GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_ATTR_NOSYSTEM", "GIT_PAGER", "PAGER", "GIT_TERMINAL_PROMPT"} {
		if env[k] == "" {
			t.Errorf("%s is not set", k)
		}
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name              string
		refused, allowGit bool
	}{
		{"LD_PRELOAD", true, true}, {"LD_LIBRARY_PATH", true, true}, {"LD_AUDIT", true, true}, {"LD_DEBUG_OUTPUT", true, true},
		{"GCONV_PATH", true, true},
		{"GIT_CONFIG_COUNT", true, false}, {"GIT_CONFIG_KEY_0", true, false}, {"GIT_CONFIG_VALUE_7", true, false},
		{"GIT_CONFIG_PARAMETERS", true, false}, {"GIT_CONFIG_GLOBAL", true, false}, {"GIT_CONFIG", true, false},
		{"GIT_EXTERNAL_DIFF", true, false}, {"GIT_PAGER", true, false}, {"GIT_DIR", true, false},
		{"GIT_EXEC_PATH", true, false}, {"GIT_SSH", true, false}, {"GIT_SSH_COMMAND", true, false},
		{"GIT_ASKPASS", true, false}, {"GIT_TEMPLATE_DIR", true, false},
		{"GIT_AUTHOR_NAME", false, false}, {"CGO_ENABLED", false, false}, {"GOFLAGS", false, false},
		{"PATH", false, false}, {"LDFLAGS", false, false}, {"XLD_PRELOAD", false, false},
	} {
		if got := Refused(tc.name, false) != ""; got != tc.refused {
			t.Errorf("Refused(%s) = %t, want %t", tc.name, got, tc.refused)
		}
		if got := Refused(tc.name, true) != ""; got != (tc.refused && tc.allowGit) {
			t.Errorf("Refused(%s) with git's programs allowed = %t, want %t", tc.name, got, tc.refused && tc.allowGit)
		}
	}
}

// The external diff that replaces a configured one shows every kind of
// change with real git, in a form git apply applies to the old tree.
func TestExternalDiffShowsChangesGitApplies(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	env := append(os.Environ(), GitEnv()...)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	put := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", ".")
	git("config", "user.email", "a@example.com")
	git("config", "user.name", "a")
	put("m", "a\nb\n")
	put("del", "d\n")
	put("old", "1\n2\n3\n4\n5\n6\n7\n8\n")
	git("add", ".")
	git("commit", "-qm", "one")
	put("m", "a\nB\n")
	put("new", "n\n")
	git("rm", "-q", "del")
	git("mv", "old", "renamed")
	put("renamed", "1\n2\n3\n4\n5\n6\n7\n8\n9\n")
	git("add", "-A")
	patch := git("diff", "--cached", "-M")
	for _, want := range []string{"--- a/m\n+++ b/m\n", "+B\n", "--- /dev/null\n+++ b/new\n", "--- a/del\n+++ /dev/null\n",
		"rename from old\nrename to renamed\n", "--- a/old\n+++ b/renamed\n", "+9\n"} {
		if !strings.Contains(patch, want) {
			t.Errorf("the diff lacks %q:\n%s", want, patch)
		}
	}
	git("reset", "-q", "--hard", "HEAD")
	apply := exec.Command("git", "apply", "--index", "-")
	apply.Dir, apply.Env, apply.Stdin = dir, env, strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	if got := git("diff", "--cached", "-M", "--name-status"); got != "D\tdel\nM\tm\nA\tnew\nR088\told\trenamed\n" {
		t.Errorf("after git apply, the index holds %q", got)
	}
}
