package integration

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChartStateStore renders the gateway's state store settings: none by
// default (each pod counts in process), else the Redis flags, with the
// password and the CA mounted read-only from existing Secrets where the
// flags point, and the username read from a Secret through the environment.
func TestChartStateStore(t *testing.T) {
	const p = "gateway.stateStore.redis."
	gatewayPod := func(t *testing.T, sets ...string) corev1.PodSpec {
		t.Helper()
		m := parseManifest(t, mustTemplate(t, "toolhooks", "agents", sets...))
		return into[deployment](t, m.get(t, "Deployment", "toolhooks-gateway")).Spec.Template.Spec
	}
	stateStoreArgs := func(pod corev1.PodSpec) []string {
		var out []string
		for _, a := range pod.Containers[0].Args {
			if strings.HasPrefix(a, "--state-store-") {
				out = append(out, a)
			}
		}
		return out
	}
	volume := func(pod corev1.PodSpec, name string) *corev1.Volume {
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == name {
				return &pod.Volumes[i]
			}
		}
		return nil
	}
	// mountedAt returns where volume name is mounted read-only ("" if not).
	mountedAt := func(pod corev1.PodSpec, name string) string {
		for _, vm := range pod.Containers[0].VolumeMounts {
			if vm.Name == name && vm.ReadOnly {
				return vm.MountPath
			}
		}
		return ""
	}

	t.Run("in process by default", func(t *testing.T) {
		pod := gatewayPod(t)
		if args := stateStoreArgs(pod); len(args) != 0 {
			t.Errorf("a default install passes %q", args)
		}
		for _, name := range []string{"redis-password", "redis-ca"} {
			if volume(pod, name) != nil || mountedAt(pod, name) != "" {
				t.Errorf("a default install mounts %s", name)
			}
		}
		for _, env := range pod.Containers[0].Env {
			if strings.Contains(env.Name, "REDIS") {
				t.Errorf("a default install sets %s", env.Name)
			}
		}
	})

	t.Run("address and a password Secret", func(t *testing.T) {
		pod := gatewayPod(t, p+"address=redis.data.svc:6379", p+"db=3", p+"keyPrefix=team-a:", p+"timeout=20ms",
			p+"existingSecret=redis-auth", p+"passwordKey=redis-password", p+"username=gateway")
		want := []string{"--state-store-redis-address=redis.data.svc:6379", "--state-store-redis-db=3",
			"--state-store-key-prefix=team-a:", "--state-store-timeout=20ms", "--state-store-redis-username=gateway",
			"--state-store-redis-password-file=/etc/toolhooks/redis/password"}
		if got := stateStoreArgs(pod); !slices.Equal(got, want) {
			t.Errorf("state store args %q, want %q", got, want)
		}
		v := volume(pod, "redis-password")
		if v == nil || v.Secret == nil || v.Secret.SecretName != "redis-auth" || len(v.Secret.Items) != 1 ||
			v.Secret.Items[0].Key != "redis-password" || v.Secret.Items[0].Path != "password" {
			t.Fatalf("redis-password volume %+v: want key redis-password of Secret redis-auth as file password", v)
		}
		if dir := mountedAt(pod, "redis-password"); dir+"/password" != "/etc/toolhooks/redis/password" {
			t.Errorf("redis-password mounted read-only at %q; the flag reads /etc/toolhooks/redis/password", dir)
		}
		if volume(pod, "redis-ca") != nil {
			t.Error("a CA volume without TLS")
		}
	})

	t.Run("username from the Secret", func(t *testing.T) {
		pod := gatewayPod(t, p+"address=10.0.0.7:6379", p+"existingSecret=redis-auth", p+"usernameKey=user")
		c := pod.Containers[0]
		if got := argValue(t, c.Args, "state-store-redis-username"); got != "$(TOOLHOOKS_REDIS_USERNAME)" {
			t.Errorf("--state-store-redis-username=%s, want the kubelet to expand $(TOOLHOOKS_REDIS_USERNAME)", got)
		}
		var ref *corev1.SecretKeySelector
		for _, env := range c.Env {
			if env.Name == "TOOLHOOKS_REDIS_USERNAME" && env.ValueFrom != nil {
				ref = env.ValueFrom.SecretKeyRef
			}
		}
		if ref == nil || ref.Name != "redis-auth" || ref.Key != "user" {
			t.Errorf("TOOLHOOKS_REDIS_USERNAME comes from %+v, want key user of Secret redis-auth", ref)
		}
		// The password key defaults to "password".
		if v := volume(pod, "redis-password"); v == nil || v.Secret == nil || v.Secret.Items[0].Key != "password" {
			t.Errorf("redis-password volume %+v: want key password", v)
		}
	})

	t.Run("TLS with a CA", func(t *testing.T) {
		pod := gatewayPod(t, p+"address=redis.data.svc:6380", p+"tls.enabled=true", p+"tls.caSecret=redis-ca-bundle",
			p+"tls.caKey=bundle.pem", p+"tls.serverName=redis.example")
		args := stateStoreArgs(pod)
		for _, want := range []string{"--state-store-redis-tls", "--state-store-redis-server-name=redis.example",
			"--state-store-redis-ca-file=/etc/toolhooks/redis-ca/ca.crt"} {
			if !slices.Contains(args, want) {
				t.Errorf("state store args %q lack %s", args, want)
			}
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--state-store-redis-password-file") }) {
			t.Errorf("a password file without existingSecret: %q", args)
		}
		v := volume(pod, "redis-ca")
		if v == nil || v.Secret == nil || v.Secret.SecretName != "redis-ca-bundle" || len(v.Secret.Items) != 1 ||
			v.Secret.Items[0].Key != "bundle.pem" || v.Secret.Items[0].Path != "ca.crt" {
			t.Fatalf("redis-ca volume %+v: want key bundle.pem of Secret redis-ca-bundle as file ca.crt", v)
		}
		if dir := mountedAt(pod, "redis-ca"); dir != "/etc/toolhooks/redis-ca" {
			t.Errorf("redis-ca mounted read-only at %q, want /etc/toolhooks/redis-ca", dir)
		}
		// TLS against the system roots: no CA flag or volume.
		pod = gatewayPod(t, p+"address=redis.data.svc:6380", p+"tls.enabled=true")
		if got := stateStoreArgs(pod); !slices.Contains(got, "--state-store-redis-tls") ||
			slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--state-store-redis-ca-file") }) ||
			volume(pod, "redis-ca") != nil {
			t.Errorf("TLS without a CA Secret: args %q", got)
		}
	})

	t.Run("what cannot work does not render", func(t *testing.T) {
		for _, c := range []struct {
			sets []string
			want string
		}{
			{[]string{p + "existingSecret=redis-auth"},
				"gateway.stateStore.redis.existingSecret is set but gateway.stateStore.redis.address is empty"},
			{[]string{p + "tls.enabled=true"}, "gateway.stateStore.redis.tls.enabled is set but gateway.stateStore.redis.address is empty"},
			{[]string{p + "username=gateway"}, "gateway.stateStore.redis.username is set but gateway.stateStore.redis.address is empty"},
			{[]string{p + "address=r:6379", p + "tls.caSecret=ca"}, "need gateway.stateStore.redis.tls.enabled=true"},
			{[]string{p + "address=r:6379", p + "usernameKey=user"}, "usernameKey needs gateway.stateStore.redis.existingSecret"},
			{[]string{p + "address=r:6379", p + "existingSecret=s", p + "usernameKey=user", p + "username=u"}, "not both"},
		} {
			if out, err := helmTemplate(t, "toolhooks", "ns", c.sets...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template --set %q: err %v, want one saying %q\n%.300s", c.sets, err, c.want, out)
			}
		}
		for set, field := range map[string]string{
			p + "address=redis://r:6379": "gateway.stateStore.redis.address",
			p + "address=redis":          "gateway.stateStore.redis.address",
			p + "db=-1":                  "gateway.stateStore.redis.db",
			p + "keyPrefix=":             "gateway.stateStore.redis.keyPrefix",
			p + "timeout=0s":             "gateway.stateStore.redis.timeout",
			p + "timeout=fast":           "gateway.stateStore.redis.timeout",
			p + "tls.enabled=yes":        "gateway.stateStore.redis.tls.enabled",
			p + "passwordKey=":           "gateway.stateStore.redis.passwordKey",
			p + "sentinel=true":          "sentinel",
		} {
			out, err := helmTemplate(t, "toolhooks", "ns", p+"address=r:6379", set)
			if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") ||
				!strings.Contains(err.Error(), field) {
				t.Errorf("--set %s: %v, want a schema error naming %s\n%.300s", set, err, field, out)
			}
		}
	})
}
