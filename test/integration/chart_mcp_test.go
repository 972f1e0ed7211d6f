package integration

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolhooks/toolhooks/internal/mcpgate"
)

// TestChartMCPValues renders the gateway's MCP settings and checks the
// upstreams file the chart mounts is one the gateway's own parser accepts,
// with the tools' traits intact.
func TestChartMCPValues(t *testing.T) {
	gatewayPod := func(m manifest) corev1.PodSpec {
		return into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec
	}

	m := parseManifest(t, mustTemplate(t, "toolhooks", "ns"))
	if args := gatewayPod(m).Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--mcp") }) {
		t.Errorf("MCP is off by default, but the gateway gets %q", args)
	}

	m = parseManifest(t, mustTemplate(t, "toolhooks", "ns",
		"gateway.mcp.enabled=true",
		"gateway.mcp.upstreams[0].name=fs",
		"gateway.mcp.upstreams[0].stdio.command=node",
		"gateway.mcp.upstreams[0].stdio.args[0]=/srv/server-filesystem/dist/index.js",
		"gateway.mcp.upstreams[0].stdio.args[1]=/workspace",
		"gateway.mcp.upstreams[0].connectTimeout=10s",
		"gateway.mcp.upstreams[0].tools.read_text_file.readOnly=true",
		"gateway.mcp.upstreams[0].tools.search_files.pathArgs[0]=root",
		"gateway.mcp.upstreams[1].name=tickets",
		"gateway.mcp.upstreams[1].http.url=http://tickets:8080/mcp"))
	pod := gatewayPod(m)
	args := pod.Containers[0].Args
	for _, want := range []string{"--mcp", "--auth-audience=toolhooks.dev/gateway", "--mcp-denied-tools=mark",
		"--mcp-session-idle-timeout=5m", "--mcp-max-sessions=2000", "--mcp-max-sessions-per-caller=100",
		"--auth-token-cache-ttl=1m", "--mcp-upstreams=/etc/toolhooks/mcp/upstreams.yaml"} {
		if !slices.Contains(args, want) {
			t.Errorf("gateway args %q lack %s", args, want)
		}
	}
	if slices.Contains(args, "--mcp-allow-anonymous") {
		t.Errorf("anonymous MCP callers are allowed by default: %q", args)
	}
	cm := into[corev1.ConfigMap](t, m.get(t, "ConfigMap", "toolhooks-gateway-mcp"))
	mounted := slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(v corev1.VolumeMount) bool {
		return v.Name == "mcp-upstreams" && v.MountPath == "/etc/toolhooks/mcp" && v.ReadOnly
	})
	fromCM := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "mcp-upstreams" && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name
	})
	if !mounted || !fromCM {
		t.Errorf("the upstreams ConfigMap is not mounted read-only at /etc/toolhooks/mcp: %+v %+v", pod.Volumes, pod.Containers[0].VolumeMounts)
	}
	cfg, err := mcpgate.ParseConfig([]byte(cm.Data["upstreams.yaml"]))
	if err != nil {
		t.Fatalf("the gateway rejects the rendered upstreams file: %v\n%s", err, cm.Data["upstreams.yaml"])
	}
	if len(cfg.Upstreams) != 2 || cfg.Upstreams[0].Name != "fs" || cfg.Upstreams[0].Stdio == nil ||
		cfg.Upstreams[0].Stdio.Command != "node" || !cfg.Upstreams[0].Tools["read_text_file"].ReadOnly ||
		!slices.Equal(cfg.Upstreams[0].Tools["search_files"].PathArgs, []string{"root"}) ||
		cfg.Upstreams[1].HTTP == nil || cfg.Upstreams[1].HTTP.URL != "http://tickets:8080/mcp" {
		t.Errorf("rendered upstreams = %+v\n%s", cfg.Upstreams, cm.Data["upstreams.yaml"])
	}

	m = parseManifest(t, mustTemplate(t, "toolhooks", "ns", "gateway.mcp.enabled=true", "gateway.mcp.upstreamsSecret=mcp-creds"))
	pod = gatewayPod(m)
	if m.count("ConfigMap") != 0 || !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "mcp-upstreams" && v.Secret != nil && v.Secret.SecretName == "mcp-creds"
	}) {
		t.Errorf("upstreamsSecret: volumes %+v, %d ConfigMaps", pod.Volumes, m.count("ConfigMap"))
	}

	m = parseManifest(t, mustTemplate(t, "toolhooks", "ns", "gateway.mcp.enabled=true",
		"gateway.mcp.resourceURL=https://toolhooks.example/mcp",
		"gateway.mcp.allowedOrigins[0]=https://app.example", "gateway.mcp.allowedOrigins[1]=http://localhost:6274"))
	args = gatewayPod(m).Containers[0].Args
	for _, want := range []string{"--mcp-resource-url=https://toolhooks.example/mcp",
		"--mcp-allowed-origins=https://app.example,http://localhost:6274"} {
		if !slices.Contains(args, want) {
			t.Errorf("gateway args %q lack %s", args, want)
		}
	}

	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"gateway.mcp.enabled=true", "gateway.mcp.allowedOrigins[0]=*"}, "allowedOrigins"},
		{[]string{"gateway.mcp.enabled=true", "gateway.mcp.resourceURL=toolhooks.example/mcp"}, "resourceURL"},
		{[]string{"gateway.mcp.upstreams[0].name=fs"}, "need gateway.mcp.enabled=true"},
		{[]string{"gateway.mcp.enabled=true", "gateway.mcp.upstreams[0].name=fs", "gateway.mcp.upstreamsSecret=s"}, "not both"},
		{[]string{"gateway.mcp.enabled=true", "gateway.mcp.maxSessions=50"},
			"gateway.mcp.maxSessionsPerCaller (100) is more than gateway.mcp.maxSessions (50)"},
	} {
		if out, err := helmTemplate(t, "toolhooks", "ns", c.sets...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template --set %q: err %v, want one saying %q\n%.300s", c.sets, err, c.want, out)
		}
	}
}
