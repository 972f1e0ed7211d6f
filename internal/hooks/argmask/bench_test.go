package argmask

import (
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// BenchmarkMask measures what the decision log adds to a call's record:
// masking and encoding its arguments with the default keys and detectors.
func BenchmarkMask(b *testing.B) {
	m, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, args string }{
		{"read_file", `{"path":"src/main.go"}`},
		{"shell", `{"command":"go test ./... && git diff --stat HEAD~1","cwd":"src"}`},
		{"shell_with_secrets", `{"command":"mysql -u root -phunter2 -e 'select 1' && curl -H 'Authorization: Bearer abc' https://u:pw@x/y","cwd":"src"}`},
		{"write_file_4KB", `{"path":"src/a.go","content":"` + strings.Repeat("func f() { return }\\n", 200) + `"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			call := hooks.NewCall("t", c.args)
			b.ReportAllocs()
			for b.Loop() {
				if a := m.Mask(b.Context(), call); a.JSON == "" {
					b.Fatalf("omitted: %s", a.Omitted)
				}
			}
		})
	}
}
