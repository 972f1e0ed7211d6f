package pathguard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// DefaultPathKeys are the argument names that carry paths for every tool
// (among them git's cwd, process's working_directory and the file tools'
// path).
//
// The rest are the path keys of common agent tool schemas: Claude Code
// (file_path, notebook_path, path), Codex (workdir), Cursor (target_file,
// relative_workspace_path), the MCP filesystem server (path, paths, source,
// destination), and other common spellings.
var DefaultPathKeys = []string{
	"path", "file_path", "cwd", "working_directory",
	"paths", "files", "target", "source", "destination",
	"workdir", "target_file", "relative_workspace_path", "notebook_path",
	"directory", "dir", "old_path", "new_path", "filename", "file",
}

// Extract returns every path-bearing argument value of a call, in key order.
// A key counts when it equals one of DefaultPathKeys or of keys (the policy's
// per-tool extra keys, which extend the defaults and never replace them, so
// configuration can widen but never switch off checking) ignoring case,
// because tools that decode into Go structs match JSON names
// case-insensitively. A value may be a string or an array of strings; JSON
// null counts as absent. Any other value (a number, an object, an array with a
// non-string element) is an error: callers deny rather than guess. tool is
// accepted for symmetry with per-tool configuration and does not change the
// default keys.
func Extract(tool string, args map[string]any, keys []string) ([]string, error) {
	_ = tool
	var out []string
	var order []int
	for k, v := range args {
		idx := keyIndex(k, keys)
		if idx < 0 || v == nil {
			continue
		}
		switch v := v.(type) {
		case string:
			out = append(out, v)
			order = append(order, idx)
		case []string:
			for _, s := range v {
				out = append(out, s)
				order = append(order, idx)
			}
		case []any:
			for i, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("argument %q[%d] is %s, not a path string", k, i, typeName(e))
				}
				out = append(out, s)
				order = append(order, idx)
			}
		default:
			return nil, fmt.Errorf("argument %q is %s, not a path string", k, typeName(v))
		}
	}
	if len(out) > 1 {
		sortByKey(out, order)
	}
	return out, nil
}

// IsPathKey reports whether k is one of DefaultPathKeys or extra, ignoring case.
func IsPathKey(k string, extra []string) bool { return keyIndex(k, extra) >= 0 }

// keyIndex returns the rank of k among the default and extra keys, or -1.
func keyIndex(k string, extra []string) int {
	for i, d := range DefaultPathKeys {
		if k == d || strings.EqualFold(k, d) {
			return i
		}
	}
	for i, d := range extra {
		if k == d || strings.EqualFold(k, d) {
			return len(DefaultPathKeys) + i
		}
	}
	return -1
}

// keyed is a path value with the rank of the key it came from.
type keyed struct {
	v string
	k int
}

// sortByKey stably sorts the parallel slices v and k by rank k, then by
// value v.
func sortByKey(v []string, k []int) {
	pairs := make([]keyed, len(v))
	for i := range v {
		pairs[i] = keyed{v: v[i], k: k[i]}
	}
	slices.SortStableFunc(pairs, func(a, b keyed) int {
		if c := cmp.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	for i, p := range pairs {
		v[i], k[i] = p.v, p.k
	}
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, int, int64, float32, int32, uint, uint64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}
