package gateway

import (
	"fmt"
	"testing"
)

func TestBoundedLabelCapsDistinctValues(t *testing.T) {
	b := newBoundedLabel(3)
	names := make([]string, 0, 5)
	for i := range 5 {
		names = append(names, fmt.Sprint("tool", i))
	}
	b.setKnown(names)
	got := map[string]bool{}
	for _, n := range append(names, "unknown", "tool0") {
		got[b.value(n)] = true
	}
	want := map[string]bool{"tool0": true, "tool1": true, "tool2": true, OtherLabel: true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("label values %v, want %v", got, want)
	}
	// A name that stops being known is "other" again; the cap still holds.
	b.setKnown([]string{"tool1", "tool9"})
	if b.value("tool0") != OtherLabel || b.value("tool1") != "tool1" || b.value("tool9") != OtherLabel {
		t.Error("known set not applied")
	}
}
