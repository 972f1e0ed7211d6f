package pathguard

import "strings"

// PatchFiles returns the file names an apply_patch text names: the
// "*** Add/Update/Delete File:" and "*** Move to:" headers of the
// apply_patch format, and unified-diff "---"/"+++" headers (without their
// a/ b/ prefixes, and except /dev/null).
func PatchFiles(patch string) []string {
	var out []string
	for line := range strings.Lines(patch) {
		line = strings.TrimRight(line, "\r\n")
		for _, h := range []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"} {
			if rest, ok := strings.CutPrefix(line, h); ok {
				out = append(out, strings.TrimSpace(rest))
			}
		}
		for _, h := range []string{"--- ", "+++ "} {
			rest, ok := strings.CutPrefix(line, h)
			if !ok {
				continue
			}
			name, _, _ := strings.Cut(rest, "\t")
			name = strings.TrimSpace(name)
			if name == "/dev/null" || name == "" {
				continue
			}
			// Check both the name as written and without a/ b/ prefix.
			out = append(out, name)
			if s, ok := strings.CutPrefix(name, "a/"); ok {
				out = append(out, s)
			} else if s, ok := strings.CutPrefix(name, "b/"); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
