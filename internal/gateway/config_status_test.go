package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/wire"
)

func grepLines(text, prefix string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return fmt.Sprint(out)
}

func TestConfigStatusReportsDegradedPlugins(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Degraded = func() []string { return []string{"PluginHook/default/approvals"} }
	})
	e.mustPush(compileYAML(t, e.ws, basePolicy))
	var st wire.ConfigStatus
	_, body := e.do(http.MethodGet, "/v1/config", "", nil, nil)
	mustUnmarshal(t, body, &st)
	if len(st.Degraded) != 1 || st.Degraded[0] != "PluginHook/default/approvals" {
		t.Errorf("GET /v1/config degraded = %v, want the approvals plugin", st.Degraded)
	}
}
