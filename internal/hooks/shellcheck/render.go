package shellcheck

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Render returns argv, preceded by the NAME=value assignments of env, as one
// bash simple command in which every word is quoted, so that parsing it
// yields exactly these words: no expansion, globbing or splitting. It is how
// a command about to run (after all expansions) is handed to the same static
// checks as the command line it came from. A word that cannot be quoted (a
// NUL byte) is an error.
func Render(env, argv []string) (string, error) {
	if len(argv) == 0 {
		return "", fmt.Errorf("%w: empty command", ErrParse)
	}
	var b strings.Builder
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !syntax.ValidName(name) {
			return "", fmt.Errorf("%w: invalid environment entry %q", ErrParse, kv)
		}
		q, err := syntax.Quote(value, syntax.LangBash)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrParse, err)
		}
		b.WriteString(name + "=" + q + " ")
	}
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrParse, err)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(q)
	}
	return b.String(), nil
}
