package sandbox_test

import (
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
)

// The system files programs need are readable unless the policy forbids
// them: a file (/etc/gitconfig) and a directory's entries alike; without
// /etc/ld.so.cache the loader still finds the libraries.
func TestSystemPathsFollowTheForbiddenGlobs(t *testing.T) {
	s := landlock(t)
	ws := mustEval(t, t.TempDir())
	for _, tc := range []struct {
		forbidden []string
		readable  bool
	}{
		{[]string{"**/.env"}, true},
		{[]string{"/etc/**"}, false},
		{[]string{"/etc/gitconfig"}, false},
	} {
		pol, err := autonomyPolicy(t, ws, "", autonomy.Config{ForbiddenPathGlobs: tc.forbidden})
		if err != nil {
			t.Fatal(err)
		}
		out, err := confined(t, s, ws, pol, "/bin/sh", "-c", "cat /etc/gitconfig /etc/ld.so.cache >/dev/null && echo READ; /bin/ls -d /usr/bin")
		if strings.Contains(out, "READ") != tc.readable || !strings.Contains(out, "/usr/bin") {
			t.Errorf("forbidden %q: %q %v", tc.forbidden, out, err)
		}
	}
}
