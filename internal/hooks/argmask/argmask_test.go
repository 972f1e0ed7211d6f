package argmask

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

func mask(t *testing.T, m *Masker, args string) *audit.Arguments {
	t.Helper()
	return m.Mask(context.Background(), hooks.NewCall("t", args))
}

func TestMaskKeepsPathsAndCommandsAndMasksSecrets(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	const gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	got := mask(t, m, `{"path":"src/a.go","command":"curl -H 'Authorization: token `+gh+`' https://x","env":{"API_KEY":"v","Token":null},`+
		`"nested":[{"password":"hunter2"},"`+gh+`"],"n":1.50,"z":"<&>"}`)
	if got.Omitted != "" {
		t.Fatalf("omitted: %s", got.Omitted)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got.JSON), &v); err != nil {
		t.Fatalf("%s: %v", got.JSON, err)
	}
	if v["path"] != "src/a.go" || v["z"] != "<&>" || !strings.Contains(got.JSON, `"n":1.50`) {
		t.Errorf("unmasked values changed: %s", got.JSON)
	}
	cmd, _ := v["command"].(string)
	if strings.Contains(got.JSON, gh) || strings.Contains(got.JSON, "hunter2") || cmd != "curl -H 'Authorization: [MASKED]' https://x" {
		t.Errorf("a secret is kept or the command is lost: %s", got.JSON)
	}
	if env := v["env"].(map[string]any); env["API_KEY"] != MaskedMarker || env["Token"] != nil {
		t.Errorf("env = %v: a masked key's value is kept (null stays null)", env)
	}
	if want := []string{"/command", "/env/API_KEY", "/nested/0/password", "/nested/1"}; !slices.Equal(got.Masked, want) {
		t.Errorf("masked = %q, want %q", got.Masked, want)
	}
	// Keys sorted: the same arguments in another order give the same text.
	again := mask(t, m, `{"z":"<&>","n":1.50,"nested":[{"password":"hunter2"},"`+gh+`"],"env":{"Token":null,"API_KEY":"v"},`+
		`"command":"curl -H 'Authorization: token `+gh+`' https://x","path":"src/a.go"}`)
	if again.JSON != got.JSON {
		t.Errorf("not canonical:\n%s\n%s", again.JSON, got.JSON)
	}
}

func TestMaskBoundsTheSize(t *testing.T) {
	m, err := New(Config{MaxBytes: 200, Detectors: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 500)
	got := mask(t, m, `{"path":"a/b","content":"`+big+`","other":"`+strings.Repeat("y", 100)+`"}`)
	if got.Omitted != "" || len(got.JSON) > 200 || !strings.Contains(got.JSON, `"path":"a/b"`) ||
		!strings.Contains(got.JSON, "[OMITTED:500 bytes]") || !slices.Equal(got.Masked, []string{"/content"}) {
		t.Errorf("shortened = %+v", got)
	}
	if got := mask(t, m, `{"a":[`+strings.Repeat(`"x",`, 100)+`"x"]}`); got.Omitted != OmittedTooLarge || got.JSON != "" {
		t.Errorf("arguments that cannot fit = %+v, want omitted", got)
	}
	if got := mask(t, m, `[1]`); got.Omitted != OmittedInvalid {
		t.Errorf("invalid arguments = %+v", got)
	}
	if _, err := New(Config{MaxBytes: 10}); err == nil {
		t.Error("a size bound of 10 bytes was accepted")
	}
	if _, err := New(Config{Detectors: []string{"no-such-detector"}}); err == nil {
		t.Error("an unknown detector was accepted")
	}
}
