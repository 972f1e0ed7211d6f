package gateway_test

import (
	"strings"
	"testing"
)

const ratePolicy = `apiVersion: policy.toolhooks.dev/v1alpha1
kind: ContractPolicy
metadata: {name: rate, uid: 6a1d0f4e-0000-4000-8000-000000000001}
spec:
  rateLimits: [{tools: "read_*", perSenderPerMinute: 5}]
`

// A rate-limit window survives configuration changes that keep the limit
// (same policy and rules): a push of another policy must not hand a caller
// a fresh window.
func TestRateLimitWindowsSurviveConfigurationChanges(t *testing.T) {
	e := newEnv(t, nil)
	first := e.mustPush(compileYAML(t, e.ws, basePolicy+"---\n"+ratePolicy))
	allowed := 0
	for range 5 {
		if r := e.call("read_file", `{"path":"README.md"}`); r.Status == "succeeded" {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("%d of 5 calls allowed under the limit", allowed)
	}
	cfg := compileYAML(t, e.ws, strings.Replace(basePolicy, `"**/.env"`, `"**/.env", "**/*.key"`, 1)+"---\n"+ratePolicy)
	cfg.IssuedAt = first.IssuedAt + 1
	if res := e.mustPush(cfg); !res.Changed {
		t.Fatal("the second configuration was not applied")
	}
	if r := e.call("read_file", `{"path":"README.md"}`); r.Status != "denied" {
		t.Errorf("the 6th call within a minute was %s after a configuration change, want denied", r.Status)
	}
}
