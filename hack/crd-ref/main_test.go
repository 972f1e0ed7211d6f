package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crdDir is the repository's generated CRDs, relative to this package.
const crdDir = "../../config/crd/bases"

func TestReferenceShowsWhatTheAPIServerEnforces(t *testing.T) {
	ref, err := reference(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### AutonomyPolicy\n", "### ContractPolicy\n", "### PluginHook\n",
		"short names: `ap`", "short names: `ctp`", "short names: `ph`",
		"| `spec.mode` | string |  | `\"Full\"` | one of `Full`, `Supervised`, `ReadOnly` |",
		"| `spec.workspace.root` | string | yes |  | min length 1; max length 4096 |",
		"rule: workspace.only needs an absolute workspace.root",
		"| `spec.maxToolCalls` | integer (int32) |  |  | min 0; max 10000000 |",
		"| `spec.scopedCapabilities[].tool` | string | yes |",
		"| `spec.timeout` | string |  | `\"5s\"` |",
		"| `spec.events` | []string | yes |",
		"| `spec.gatewaySelector` | [LabelSelector](",
		"| `status.conditions` | list of [Condition](",
	} {
		if !strings.Contains(ref, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	// Kubernetes' own types are linked, not expanded.
	if strings.Contains(ref, "matchExpressions") || strings.Contains(ref, "lastTransitionTime") {
		t.Error("the reference expands LabelSelector or Condition")
	}
}

func TestCheckFindsDriftAndWriteFixesIt(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	doc := "# x\n\n" + beginMarker + "\nstale\n" + endMarker + "\n\n## after\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(crdDir, readme, true, io.Discard); !errors.Is(err, errOutOfDate) {
		t.Fatalf("check of a stale section: %v, want errOutOfDate", err)
	}
	if err := run(crdDir, readme, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(crdDir, readme, true, io.Discard); err != nil {
		t.Fatalf("check after writing: %v", err)
	}
	got, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if !strings.HasPrefix(s, "# x\n\n"+beginMarker+"\n\n### AutonomyPolicy") || !strings.HasSuffix(s, endMarker+"\n\n## after\n") ||
		strings.Contains(s, "stale") {
		t.Errorf("the text around the markers changed or the old section stayed:\n%s", s)
	}
}

func TestMissingMarkersAreAnError(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(readme, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(crdDir, readme, false, io.Discard); err == nil || !strings.Contains(err.Error(), "want the markers") {
		t.Errorf("err = %v, want a missing-markers error", err)
	}
	if err := run(t.TempDir(), readme, false, io.Discard); err == nil || !strings.Contains(err.Error(), "no CRD files") {
		t.Errorf("err = %v, want a no-CRDs error", err)
	}
}
