package gatewayk8s

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSecretKey(t *testing.T) {
	for _, tc := range []struct {
		key    string
		secret bool
	}{
		{"password", true},
		{"dbPassword", true},
		{"X_API_KEY", true},
		{"apiKey", true},
		{"api_key", true},
		{"key", true},
		{"sshKey", true},
		{"private_key", true},
		{"auth", true},
		{"basicAuth", true},
		{"Authorization", true},
		{"session_token", true},
		{"SESSIONTOKEN", true},
		{"credentials", true},
		{"cookie", true},
		{"client-secret", true},
		{"path", false},
		{"command", false},
		{"keys", false},
		{"keyword", false},
		{"author", false},
		{"content", false},
		{"sessionId", false},
		{"monkey", false},
	} {
		if got := secretKey(tc.key); got != tc.secret {
			t.Errorf("secretKey(%q) = %v, want %v", tc.key, got, tc.secret)
		}
	}
}

func TestMaskString(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"a path is kept", "/home/agent/workspace/src/internal/gatewayk8s/approvals.go", "/home/agent/workspace/src/internal/gatewayk8s/approvals.go"},
		{"a long kebab-case name is kept", "my-very-long-kebab-case-file-name-here.txt", "my-very-long-kebab-case-file-name-here.txt"},
		{"a shell command is kept", "git commit -m 'Fix the parser' && go test ./...", "git commit -m 'Fix the parser' && go test ./..."},
		{"a CamelCase path is kept", "src/components/UserProfileCardComponent2.tsx", "src/components/UserProfileCardComponent2.tsx"},
		{"a JWT inside a command is masked", "curl -H 'X-Token: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl' https://x",
			"curl -H 'X-Token: <masked>' https://x"},
		{"a bearer token keeps its scheme", "Authorization: Bearer abcdefgh12345", "Authorization: Bearer <masked>"},
		{"an AWS access key id", "AKIAIOSFODNN7EXAMPLE", "<masked>"},
		{"a GitHub token", "token ghp_abcdefghijklmnopqrstuvwxyz0123", "token <masked>"},
		{"a Slack token", "xoxb-1234567890-abcdefghij", "<masked>"},
		{"an API secret key", "export KEY=sk-abcdefghijklmnop1234", "export KEY=<masked>"},
		{"a PEM block masks the whole value", "echo '-----BEGIN PRIVATE KEY-----\nMIIE' > k", "<masked>"},
		{"a long hex string", "secret 0123456789abcdef0123456789abcdef", "secret <masked>"},
		{"random base64", "echo dGhpcyBpcyBhIHNlY3JldCBrZXkgMTIzNDU2Nzg5MA== | base64 -d", "echo <masked> | base64 -d"},
		{"a long identifier is kept", "getUserProfileByIdentifierV2Handler", "getUserProfileByIdentifierV2Handler"},
		{"random mixed case", "key=q8Zr3TfK1xWb9LmP2sVd7HnYa4Qe6JcU", "key=<masked>"},
		{"short words are kept", "hello world", "hello world"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maskString(tc.in); got != tc.want {
				t.Errorf("maskString(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestPreviewArguments(t *testing.T) {
	args := map[string]any{
		"path":    "/workspace/deploy.sh",
		"token":   "hunter2",
		"headers": map[string]any{"Authorization": "Basic dXNlcjpwYXNz", "Accept": "text/plain"},
		"content": strings.Repeat("é", 600),
		"count":   3.0,
	}
	got := previewArguments(args)
	want := map[string]string{
		"count":   `3`,
		"headers": `{"Accept":"text/plain","Authorization":"<masked>"}`,
		"path":    `"/workspace/deploy.sh"`,
		"token":   `<masked>`,
	}
	if len(got) != len(args) {
		t.Fatalf("got %d previews, want %d: %+v", len(got), len(args), got)
	}
	for i, p := range got {
		if i > 0 && got[i-1].Name >= p.Name {
			t.Errorf("previews not sorted: %q before %q", got[i-1].Name, p.Name)
		}
		if w, ok := want[p.Name]; ok && p.Value != w {
			t.Errorf("%s = %s, want %s", p.Name, p.Value, w)
		}
		if len(p.Value) > maxPreviewValue || !utf8.ValidString(p.Value) {
			t.Errorf("%s: %d bytes or invalid UTF-8", p.Name, len(p.Value))
		}
	}
	if c := got[0]; c.Name != "content" || !strings.HasSuffix(c.Value, "...") {
		t.Errorf("content = %+v, want it shortened", c)
	}

	many := map[string]any{}
	for i := range 40 {
		many[strings.Repeat("a", i+1)] = i
	}
	if n := len(previewArguments(many)); n != maxPreviewArgs {
		t.Errorf("40 arguments preview as %d, want %d", n, maxPreviewArgs)
	}
}

// FuzzMaskString checks that a planted credential never survives masking,
// whatever surrounds it.
func FuzzMaskString(f *testing.F) {
	f.Add("echo ", " done")
	f.Add("", "")
	f.Add("x=", "\n")
	f.Add("/path/", "/more")
	const planted = "ghp_0123456789abcdefghijABCDEFGHIJ"
	f.Fuzz(func(t *testing.T, before, after string) {
		// A word character on either side would make the token another word.
		if before != "" && isWordByte(before[len(before)-1]) || after != "" && isWordByte(after[0]) {
			return
		}
		if got := maskString(before + planted + after); strings.Contains(got, planted) {
			t.Fatalf("maskString(%q) kept the token: %q", before+planted+after, got)
		}
	})
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
