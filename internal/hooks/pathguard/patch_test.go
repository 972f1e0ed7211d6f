package pathguard

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPatchPathsReadsEveryHeaderForm(t *testing.T) {
	cases := []struct {
		name, patch string
		want        []string
	}{
		{"indented apply_patch headers", "*** Begin Patch\n  *** Add File: a/x\n\t*** Update File: y\n *** Move to: z/w\n*** Delete File: d\n*** End Patch\n",
			[]string{"a/x", "x", "y", "z/w", "w", "d"}},
		{"git rename and copy lines", "diff --git a/s b/t\nrename from s\nrename to t\ncopy from u\ncopy to v\n",
			[]string{"a/s", "s", "b/t", "t", "u", "v"}},
		{"quoted git names", "diff --git \"a/\\303\\251\" \"b/q r\"\n", []string{"a/é", "é", "b/q r", "q r"}},
		{"unified headers stripped at any depth", "--- p/q/r.go\t2024\n+++ /dev/null\n", []string{"p/q/r.go", "q/r.go", "r.go"}},
		{"Index and context headers", "Index: m/n\n*** k\t1\n--- k\t1\n***************\n*** 1,2 ****\n--- 1,2 ----\n",
			[]string{"m/n", "n", "k"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PatchPaths(tc.patch)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("%q missing from %q", w, got)
				}
			}
		})
	}
	for _, bad := range []string{"diff --git \"a/x b/y\n", "rename to \"\\q\"\n", "*** Add File:\n", "  *** Move to:  \n", "x\x00y"} {
		if _, err := PatchPaths(bad); !errors.Is(err, ErrPatchUnread) {
			t.Errorf("PatchPaths(%q) = %v, want ErrPatchUnread", bad, err)
		}
	}
}

// FuzzPatchPaths: a patch reads or fails, and every apply_patch header
// line an applier would act on (trimmed) is among the names read.
func FuzzPatchPaths(f *testing.F) {
	for _, s := range []string{"*** Begin Patch\n  *** Add File: .env\n+x\n*** End Patch\n", "diff --git a/x b/y\nrename from x\nrename to y\n",
		"diff --git \"a/\\141\" \"b/\\142\"\n", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n--- y\n", "Index: z\n", "*** Move to: \"q\"\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, patch string) {
		got, err := PatchPaths(patch)
		if err != nil {
			return
		}
		for line := range strings.Lines(patch) {
			trimmed := strings.TrimSpace(line)
			for _, h := range codexHeaders {
				rest, ok := strings.CutPrefix(trimmed, h)
				if !ok {
					continue
				}
				name := strings.TrimSpace(rest)
				if u, err := strconv.Unquote(name); err == nil {
					name = u
				}
				if name != "/dev/null" && !slices.Contains(got, name) {
					t.Fatalf("%q names %q, which PatchPaths %q misses", patch, name, got)
				}
			}
		}
	})
}

// FuzzParseIndex: any bytes parse or fail, without a panic.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00" + strings.Repeat("\x00", 20)))
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01" + strings.Repeat("\x00", 24) + "\x00\x00\x81\xa4" + strings.Repeat("\x00", 34) + "\x00\x01\x00x\x00" + strings.Repeat("\x00", 20)))
	f.Fuzz(func(t *testing.T, b []byte) {
		paths, err := parseIndex(b)
		if err == nil && len(paths) > maxIndexEntries {
			t.Fatalf("%d paths", len(paths))
		}
	})
}
