package pathguard

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrPatchUnread is returned by PatchPaths for a patch whose file names
// cannot all be read; callers deny.
var ErrPatchUnread = errors.New("patch file names cannot be read")

// codexHeaders are the apply_patch format's file operations. Codex's
// parser trims each line before matching them, so they count indented.
var codexHeaders = [...]string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"}

// gitHeaders are git's extended header lines that name a file, which git
// apply acts on without ---/+++ lines (a rename or copy without changes).
var gitHeaders = [...]string{"rename from ", "rename to ", "copy from ", "copy to ", "rename old ", "rename new "}

// PatchFiles is PatchPaths without its error (the names it could read),
// each name as written and without an a/ or b/ prefix only.
func PatchFiles(patch string) []string {
	out, _ := patchPaths(patch, false)
	return out
}

// PatchPaths returns every file name a patch text names, in every header
// form an applier acts on: the apply_patch format's "*** Add File:",
// "*** Update File:", "*** Delete File:" and "*** Move to:" (indented or
// not), git's "diff --git a/x b/y" and "rename from/to", "copy from/to"
// lines (names quoted in C style unquoted), unified "---"/"+++" and
// context "***" headers (before a tab), and "Index:" lines. Since the
// applier may strip any number of leading directories (patch -pN, git
// apply -p), each name is returned with each such prefix stripped too.
// /dev/null is not a file. A header whose name cannot be read (an empty
// name, a quoted name that does not unquote, a NUL byte) fails with
// ErrPatchUnread.
func PatchPaths(patch string) ([]string, error) {
	return patchPaths(patch, true)
}

// patchPaths is PatchPaths; with stripAll every leading directory is
// stripped in turn, else only an a/ or b/ prefix.
func patchPaths(patch string, stripAll bool) ([]string, error) {
	if strings.IndexByte(patch, 0) >= 0 {
		return nil, fmt.Errorf("%w: the patch contains a NUL byte", ErrPatchUnread)
	}
	p := patchNames{stripAll: stripAll}
	for raw := range strings.Lines(patch) {
		line := strings.TrimRight(raw, "\r\n")
		trimmed := strings.TrimSpace(line)
		matched, err := p.header(line, trimmed)
		if err != nil {
			return nil, err
		}
		if !matched {
			if err := p.diffLine(line, trimmed); err != nil {
				return nil, err
			}
		}
	}
	return p.out, nil
}

// patchNames collects the file names of a patch, line by line.
type patchNames struct {
	out []string
	// stripAll: every leading directory is stripped in turn, else only an
	// a/ or b/ prefix.
	stripAll bool
}

// add adds the name a line gives. strict: the line is a header wherever it
// is; else it may be a removed or added line of a hunk ("--- x" removes
// "-- x"), and a name that does not read is taken as written.
func (p *patchNames) add(line, name string, strict bool) error {
	if strings.HasPrefix(name, `"`) && len(name) > 1 {
		// An applier that does not unquote names acts on it as written.
		p.out = append(p.out, name)
	}
	name, err := patchName(name)
	if err != nil && !strict {
		name, err = strings.TrimSpace(line[min(len(line), 4):]), nil
		if name == "" {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrPatchUnread, line, err)
	}
	if name == "/dev/null" {
		return nil
	}
	p.out = append(p.out, name)
	p.addStripped(name)
	return nil
}

// addStripped adds name without its leading directories: each in turn with
// stripAll, else only an a/ or b/ prefix.
func (p *patchNames) addStripped(name string) {
	if !p.stripAll {
		if s, ok := strings.CutPrefix(name, "a/"); ok {
			p.out = append(p.out, s)
		} else if s, ok := strings.CutPrefix(name, "b/"); ok {
			p.out = append(p.out, s)
		}
		return
	}
	for rest := name; ; {
		_, after, ok := strings.Cut(rest, "/")
		if !ok {
			break
		}
		rest = strings.TrimLeft(after, "/")
		if rest == "" {
			break
		}
		p.out = append(p.out, rest)
	}
}

// header adds the names of a Codex patch header or a git extended header
// line and reports whether the line is one.
func (p *patchNames) header(line, trimmed string) (matched bool, err error) {
	for _, h := range codexHeaders {
		if rest, ok := strings.CutPrefix(trimmed, h); ok {
			matched = true
			if err := p.add(line, strings.TrimSpace(rest), true); err != nil {
				return true, err
			}
		}
	}
	if matched {
		return true, nil
	}
	for _, h := range gitHeaders {
		if rest, ok := strings.CutPrefix(line, h); ok {
			matched = true
			if err := p.add(line, rest, true); err != nil {
				return true, err
			}
		}
	}
	return matched, nil
}

// diffLine adds the names of a diff --git, unified or context diff header
// (---, +++, ***) or Index: line; other lines name nothing.
func (p *patchNames) diffLine(line, trimmed string) error {
	switch {
	case strings.HasPrefix(line, "diff --git "):
		names, err := gitDiffNames(strings.TrimPrefix(line, "diff --git "))
		if err != nil {
			return fmt.Errorf("%w: %q: %w", ErrPatchUnread, line, err)
		}
		for _, n := range names {
			if err := p.add(line, n, true); err != nil {
				return err
			}
		}
	case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "*** "):
		rest := line[4:]
		if strings.HasPrefix(line, "*** ") && (strings.HasPrefix(trimmed, "*** Begin Patch") ||
			strings.HasPrefix(trimmed, "*** End Patch") || strings.HasPrefix(trimmed, "*** End of File")) {
			return nil
		}
		if strings.HasPrefix(line, "--- ") && strings.TrimSpace(rest) == "" {
			return nil // a context diff's hunk separator
		}
		name, _, _ := strings.Cut(rest, "\t")
		if strings.HasPrefix(line, "*** ") || strings.HasPrefix(line, "--- ") {
			// A context hunk's "*** 1,4 ****" or "--- 1,4 ----".
			if n := strings.TrimSpace(name); strings.HasSuffix(n, " ****") || strings.HasSuffix(n, " ----") {
				return nil
			}
		}
		return p.add(line, strings.TrimSpace(name), false)
	case strings.HasPrefix(line, "Index: "):
		return p.add(line, strings.TrimSpace(line[len("Index: "):]), false)
	}
	return nil
}

// patchName reads one header's name: C-style quoted names unquoted.
func patchName(name string) (string, error) {
	if strings.HasPrefix(name, `"`) {
		s, err := strconv.Unquote(name)
		if err != nil {
			return "", fmt.Errorf("the quoted name %s does not unquote", name)
		}
		name = s
	}
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", errors.New("no file name")
	}
	return name, nil
}

// gitDiffNames returns the names a "diff --git" line may carry: both
// quoted names, or, when unquoted names are separated only by spaces
// that may be part of them, every way of reading the line as "A B" with
// B starting at a space.
func gitDiffNames(s string) ([]string, error) {
	if strings.HasPrefix(s, `"`) {
		// "a/x" followed by a quoted or plain name.
		end := closingQuote(s)
		if end < 0 {
			return nil, errors.New("a quoted name is not closed")
		}
		rest := strings.TrimLeft(s[end+1:], " ")
		return []string{s[:end+1], rest}, nil
	}
	var out []string
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && i+1 < len(s) {
			out = append(out, s[:i], s[i+1:])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("two names are needed")
	}
	return out, nil
}

// closingQuote returns the index of the quote that closes the C-style
// quoted string s starts with, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
