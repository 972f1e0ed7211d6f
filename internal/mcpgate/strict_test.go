package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// mutatingTransport rewrites the body of every tools/call request with
// mutate before sending it, standing in for a client that sends what the
// SDK's own client never would.
type mutatingTransport struct {
	token  string
	mutate func([]byte) []byte
}

func (m mutatingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			b = m.mutate(b)
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
	}
	return bearerTransport{token: m.token}.RoundTrip(r)
}

// TestMCPRejectsLooseMessages sends tools/call messages whose keys differ
// from the protocol's only in case, repeat, or whose strings are not valid
// UTF-8: none reaches the gateway.
func TestMCPRejectsLooseMessages(t *testing.T) {
	for name, mutate := range map[string]func([]byte) []byte{
		"unchanged (control)": func(b []byte) []byte { return b },
		"a NAME key": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"name":"read_file"`), []byte(`"NAME":"shell","name":"read_file"`), 1)
		},
		"a name key twice": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"name":"read_file"`), []byte(`"name":"read_file","name":"shell"`), 1)
		},
		"a METHOD key": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"method":"tools/call"`), []byte(`"method":"tools/call","METHOD":"tools/list"`), 1)
		},
		"invalid UTF-8 in the name": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"name":"read_file"`), []byte("\"name\":\"read_file\xff\""), 1)
		},
		"a lone surrogate in the name": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"name":"read_file"`), []byte(`"name":"read_file\ud800"`), 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.apply(codingPolicy)
			client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v1"}, nil)
			tr := &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1,
				HTTPClient: &http.Client{Transport: mutatingTransport{token: aliceToken, mutate: mutate}}}
			cs, err := client.Connect(context.Background(), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: json.RawMessage(`{"path":"README.md"}`)})
			if name == "unchanged (control)" {
				if err != nil || len(e.audit.Records()) != 1 {
					t.Fatalf("the plain call: %v, %d audit records", err, len(e.audit.Records()))
				}
				return
			}
			if err == nil {
				t.Fatalf("the call was answered: %+v", res)
			}
			// The call was refused before it reached the executor: its one
			// record is the refusal's.
			if got := refusals(e.audit); !maps.Equal(got, map[string]int{hooks.RuleMalformedRequest: 1}) {
				t.Errorf("the rejected message left the audit records %v, want one refusal", got)
			}
		})
	}
}
