package shellcheck

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

func printed(t *testing.T, f *syntax.File) string {
	t.Helper()
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestParseBashReusesParsersSafely parses with pooled parsers, in parallel
// and after failed parses, and checks that every tree stays what its own
// source says after the parser has gone on to other scripts.
func TestParseBashReusesParsersSafely(t *testing.T) {
	if _, err := ParseBash(`echo "unterminated`); err == nil {
		t.Fatal("an unterminated quote parsed")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				src := fmt.Sprintf("git log --oneline | grep fix%d-%d | head -n %d >out%d", g, i, i, g)
				f, err := ParseBash(src)
				if err != nil {
					t.Errorf("%q: %v", src, err)
					return
				}
				before := printed(t, f)
				if _, err := ParseBash("cat <<EOF\n$(x)\nEOF\nls {a,b}*"); err != nil {
					t.Errorf("second script: %v", err)
					return
				}
				if _, err := ParseBash(`if then fi (`); err == nil {
					t.Error("a broken script parsed")
					return
				}
				if after := printed(t, f); after != before || strings.TrimSpace(after) != src {
					t.Errorf("tree of %q changed after reuse: %q, then %q", src, before, after)
					return
				}
			}
		})
	}
	wg.Wait()
}
