package contract

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolhooks/toolhooks/internal/hooks/pathguard"
	"github.com/toolhooks/toolhooks/internal/hooks/shellcheck"
)

// Reasons given in refusedCommands.
const (
	reasonChdir       = "changes the working directory"
	reasonNestedShell = "starts a nested shell"
)

// refusedCommands change the directory that relative words are resolved
// against, or run text this check cannot see; a scoped shell call naming one
// of them (as any word, conservatively) is denied.
var refusedCommands = map[string]string{
	"cd": reasonChdir, "pushd": reasonChdir,
	"popd": reasonChdir, "eval": "runs text built at run time",
	"source": "runs a script this check cannot see",
	"sh":     reasonNestedShell, "bash": reasonNestedShell, "dash": reasonNestedShell,
	"zsh": reasonNestedShell, "ksh": reasonNestedShell, "mksh": reasonNestedShell,
	"ash": reasonNestedShell, "busybox": reasonNestedShell, "fish": reasonNestedShell,
	"csh": reasonNestedShell, "tcsh": reasonNestedShell,
}

// shellPaths returns the words of a shell command that may name paths, for
// a scoped shell (or process) grant, with globs expanded against base (the
// directory relative words resolve against). It is deliberately
// conservative; it checks the paths a command NAMES, not what the programs
// it runs do (an interpreter can open any file), so a scoped shell grant is
// a best-effort confinement, and granting no shell is the only strict one.
//
// The command is read by the same model as the Autonomy hook's
// (shellcheck.AnalyzeDialects, as bash and as POSIX sh): anything that
// model cannot resolve statically (parameter expansion, command
// substitution, arithmetic, eval, assignments, ...) is an error, and so is
// a command or process substitution anywhere (here-documents included). Globs,
// bracket expressions and extended globs are expanded against the real
// directory tree with the shell's own pattern semantics (shellcheck.Expand),
// and brace expansions, redirection targets included, are expanded. A word
// equal to cd, pushd, popd, eval, source or a shell's name (anywhere, so
// that `builtin cd` and `xargs sh` are caught too), or a "." command, is an
// error, because the relative paths after it could not be resolved
// correctly. The paths returned are the candidates (see candidates) of
// every word, and every glob match; relative ones resolve against base
// (root, the workspace root, when empty). Recursive readers (grep -r,
// find, git diff, ...) add the targets of the symlinks beneath what they
// name, and commands using catalogued options that run programs or write
// files (find -exec, sed's e command, go test -exec) are errors.
func shellPaths(cmd, base, root string) ([]string, error) {
	if base == "" {
		base = root // the workspace root
	}
	an, err := shellcheck.AnalyzeDialects(cmd, shellcheck.AllDialects)
	if err != nil {
		return nil, fmt.Errorf("the command cannot be parsed: %w", err)
	}
	if len(an.Unverifiable) > 0 {
		return nil, fmt.Errorf("the command cannot be checked statically: %s", an.Unverifiable[0])
	}
	if len(an.Substitutions) > 0 {
		return nil, fmt.Errorf("the substitution %q expands text at run time", an.Substitutions[0])
	}
	if len(an.Dirs) > 0 {
		return nil, fmt.Errorf("word %q %s, so relative paths cannot be checked", "cd", reasonChdir)
	}
	var out []string
	for _, c := range an.Commands {
		if c.Name == "." {
			return nil, fmt.Errorf("the \".\" command runs a script this check cannot see")
		}
		if err := refused(c.Name); err != nil {
			return nil, err
		}
		if len(c.Risky) > 0 {
			return nil, fmt.Errorf("%q uses %q, which runs programs or writes files that no path word names", c.Text, c.Risky)
		}
	}
	add := func(v, glob string, ext bool) error {
		if err := refused(v); err != nil {
			return err
		}
		out = append(out, candidates(v)...)
		if glob == "" {
			return nil
		}
		// The directories the pattern searches are read by the shell too.
		opt := shellcheck.GlobOptions{ExtGlob: ext, Home: homeOf(), Listed: func(dir string) { out = append(out, dir) }}
		matches, err := shellcheck.Expand(glob, base, opt)
		if err != nil {
			return fmt.Errorf("word %q: %w", v, err)
		}
		out = append(out, matches...)
		return nil
	}
	for _, w := range an.Words {
		if err := add(w.Value, w.Glob, w.ExtGlob); err != nil {
			return nil, err
		}
		if w.Recursive {
			more, err := beneath(w, base, root)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
	}
	for _, r := range an.Redirects {
		if err := add(r.Target, r.Pattern, r.ExtGlob); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxBeneath bounds the entries beneath walks.
const maxBeneath = 20000

// beneath returns what a recursive reader's operand w reaches besides
// itself: the targets of the symlinks beneath it (followed into the
// directories they name), and for a git revision that names no file, the
// repository it reads: the nearest directory at or above base holding
// .git, within root (the workspace), else root.
func beneath(w shellcheck.Word, base, root string) ([]string, error) {
	top := w.Value
	if !filepath.IsAbs(top) {
		top = filepath.Join(base, top)
	}
	fi, err := os.Stat(top)
	if err != nil {
		if w.MaybeRevision {
			return []string{pathguard.RepoRoot(base, root)}, nil
		}
		return nil, nil //nolint:nilerr // nothing to descend into
	}
	if !fi.IsDir() {
		return nil, nil
	}
	var out []string
	err = pathguard.WalkTree(top, maxBeneath, false, func(p string) (string, error) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", nil //nolint:nilerr // a dangling link reads nothing
		}
		out = append(out, real)
		if pathguard.IsDir(real) {
			return real, nil
		}
		return "", nil
	}, func(string) error { return nil })
	if errors.Is(err, pathguard.ErrTooManyEntries) {
		return nil, fmt.Errorf("%q reads beneath %q, which holds more than %d entries to check", w.Command, w.Value, maxBeneath)
	}
	return out, err
}

// refused returns an error when the word v names a refused command.
func refused(v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("word %q contains a NUL byte", v)
	}
	base := v
	if i := strings.LastIndexByte(v, '/'); i >= 0 && i < len(v)-1 {
		base = v[i+1:]
	}
	if why, ok := refusedCommands[base]; ok && (base == v || strings.Contains(v, "/")) {
		return fmt.Errorf("word %q %s, so relative paths cannot be checked", v, why)
	}
	return nil
}

// homeOf returns the home directory a leading ~ names, "" when unknown (a
// ~ glob is then an error).
func homeOf() string {
	h, _ := os.UserHomeDir()
	return h
}
