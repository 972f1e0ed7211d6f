package autonomy

import (
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// TestPrefiltersNeverRejectAMatch checks the cheap tests matchGlobs runs
// before doublestar: every name a pattern matches starts with the pattern's
// literalPrefix and contains its requiredLiteral, so the prefilters can only
// skip patterns that would not have matched.
func TestPrefiltersNeverRejectAMatch(t *testing.T) {
	patterns := []string{
		"/ws/secret/**", "/ws/secret", "/ws/sec*/**", "/ws/a/**/b", "/ws/{a,b}/c", "/ws/[ab]/c", `/ws/\*/x`,
		"**/.env", "**/.env/**", "**/*.pem", "/**", "/ws/**", "/ws/x?/**", "/ws/ä/**", "**/secret-1/**",
	}
	names := []string{
		"/", "/ws", "/ws/", "/ws/secret", "/ws/secret/", "/ws/secret/x", "/ws/secrets", "/ws/a/b", "/ws/a/x/b",
		"/ws/b/c", "/ws/*/x", "/ws/ä", "/ws/ä/z", "/ws/x1", "/ws/x1/y", "/p/.env", "/p/.env/q", "/k.pem",
		".env", "a/.env", "/ws/secret-1", "/ws/secret-1/f", "/ws/sec", "/ws/secX/y",
	}
	matched := 0
	for _, p := range patterns {
		if !doublestar.ValidatePattern(p) {
			t.Fatalf("test pattern %q is invalid", p)
		}
		pre, lit := literalPrefix(p), requiredLiteral(p)
		for _, n := range names {
			if ok, _ := doublestar.Match(p, n); !ok {
				continue
			}
			matched++
			if !strings.HasPrefix(n, pre) {
				t.Errorf("%q matches %q but does not start with its literal prefix %q", n, p, pre)
			}
			if !strings.Contains(n, lit) {
				t.Errorf("%q matches %q but does not contain its required literal %q", n, p, lit)
			}
		}
	}
	if matched < 20 {
		t.Fatalf("only %d pattern/name pairs matched; the table no longer tests the prefilters", matched)
	}
}

// TestAbsoluteForbiddenGlobCoversTheDirectoryItself checks that an absolute
// pattern under the workspace forbids the directory it names as well as its
// contents (the prefix prefilter must not skip "dir" for "dir/**").
func TestAbsoluteForbiddenGlobCoversTheDirectoryItself(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.ForbiddenPathGlobs = []string{f.ws + "/src/**"}
	h := newHook(t, cfg)
	for _, p := range []string{"src", "src/", "src/a.go", f.ws + "/src", "in", "in/a.go"} {
		if v := decide(t, h, "read_file", obj(t, map[string]any{"path": p})); v.Allowed || v.Rule != RuleForbiddenPaths {
			t.Errorf("read_file %q: got %+v, want a %s denial", p, v, RuleForbiddenPaths)
		}
	}
	if v := decide(t, h, "read_file", obj(t, map[string]any{"path": "notes.txt"})); !v.Allowed {
		t.Errorf("read_file notes.txt: got %+v, want allowed", v)
	}
}

// TestNonASCIIForbiddenGlobDenies is a regression test: the required literal
// of a pattern with non-ASCII characters was built byte by byte into a
// re-encoded string that no path contains, so such a glob never matched.
func TestNonASCIIForbiddenGlobDenies(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.ForbiddenPathGlobs = []string{"**/geheim-ä/**", "**/*.schlüssel", "Ключи"}
	h := newHook(t, cfg)
	for _, p := range []string{"geheim-ä", "src/geheim-ä/x", "a.schlüssel", "src/b.schlüssel", "Ключи", "src/Ключи/k"} {
		if v := decide(t, h, "read_file", obj(t, map[string]any{"path": p})); v.Allowed || v.Rule != RuleForbiddenPaths {
			t.Errorf("read_file %q: got %+v, want a %s denial", p, v, RuleForbiddenPaths)
		}
	}
	if v := decide(t, h, "read_file", obj(t, map[string]any{"path": "geheim-a"})); !v.Allowed {
		t.Errorf("read_file geheim-a: got %+v, want allowed", v)
	}
}

// matchCommandRunes is MatchCommand as it was first written, on []rune
// conversions of both strings: the oracle for FuzzMatchCommand.
func matchCommandRunes(pattern, text string) bool {
	p, t := []rune(pattern), []rune(text)
	pi, ti := 0, 0
	starP, starT := -1, 0
	for ti < len(t) {
		if pi < len(p) {
			switch c := p[pi]; {
			case c == '*':
				starP, starT = pi, ti
				pi++
				continue
			case c == '?':
				pi++
				ti++
				continue
			case c == '\\' && pi+1 < len(p):
				if p[pi+1] == t[ti] {
					pi += 2
					ti++
					continue
				}
			case c == t[ti]:
				pi++
				ti++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starT++
		pi, ti = starP+1, starT
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// FuzzMatchCommand checks that MatchCommand, which walks the strings by
// byte offsets, decides exactly as the []rune version.
func FuzzMatchCommand(f *testing.F) {
	for _, c := range [][2]string{
		{"git *", "git log --oneline src/x.go"}, {"ls *", "ls"}, {"cat ?.go", "cat ä.go"}, {`echo \*`, "echo *"},
		{`echo \ä`, "echo ä"}, {"a*b*c", "a/x b/y c"}, {"x?y", "x\xffy"}, {"\xff*", "\xfe"}, {`a\`, `a\`}, {"*ä?", "üäää"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		if got, want := MatchCommand(pattern, text), matchCommandRunes(pattern, text); got != want {
			t.Fatalf("MatchCommand(%q, %q) = %v, the []rune version says %v", pattern, text, got, want)
		}
	})
}

// FuzzByteSetPrefilter checks the byte-set test matchGlobs runs before
// strings.Contains: whenever lit occurs in s, s's bytes cover lit's.
func FuzzByteSetPrefilter(f *testing.F) {
	f.Add("/ws/secret-1/f", "secret-1")
	f.Add("/ws/src/main.go", "secret-1")
	f.Add("\x00\xff\x80", "\xff")
	f.Fuzz(func(t *testing.T, s, lit string) {
		set, litSet := byteSetOf(s), byteSetOf(lit)
		if strings.Contains(s, lit) && !set.covers(&litSet) {
			t.Fatalf("%q contains %q but the byte-set test says it cannot", s, lit)
		}
		if set.covers(&litSet) {
			for i := 0; i < len(lit); i++ {
				if strings.IndexByte(s, lit[i]) < 0 {
					t.Fatalf("the byte-set test says %q has every byte of %q, but it lacks %q", s, lit, lit[i])
				}
			}
		}
	})
}

// TestHasPrefixIsStringsHasPrefix checks matchGlobs' prefix test, which
// compares the last byte first, against strings.HasPrefix.
func TestHasPrefixIsStringsHasPrefix(t *testing.T) {
	strs := []string{"", "/", "/ws", "/ws/", "/ws/deploy", "/ws/deploy/x", "/ws/deplox", "/wx/deploy", "deploy", "/ws/dep", "ä", "/ws/ä"}
	for _, s := range strs {
		for _, p := range strs {
			if got, want := hasPrefix(s, p), strings.HasPrefix(s, p); got != want {
				t.Errorf("hasPrefix(%q, %q) = %v, want %v", s, p, got, want)
			}
		}
	}
}
