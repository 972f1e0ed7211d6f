package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/controller"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
)

type staticTokens string

func (s staticTokens) Token(context.Context) (string, error) { return string(s), nil }

// BenchmarkPropagation measures the time from a policy update to every one of
// N gateways enforcing the new revision: the controller runs against envtest
// and pushes to N in-process gateway servers on 127.0.0.x. It reports the
// median and the maximum over 20 updates.
func BenchmarkPropagation(b *testing.B) {
	for _, n := range propagationSizes() {
		b.Run(fmt.Sprintf("gateways=%d", n), func(b *testing.B) {
			for b.Loop() {
				p50, pmax := propagation(b, n, 20)
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(pmax.Microseconds())/1000, "max-ms")
			}
		})
	}
}

func propagation(b *testing.B, n, updates int) (p50, pmax time.Duration) {
	ctx := context.Background()
	const token = "propagation-benchmark-token"
	ns := fmt.Sprintf("prop-%d-%d", n, time.Now().UnixNano())
	if err := testEnv.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	port := freePortB(b)
	ws := b.TempDir()
	auth, err := gateway.NewStaticToken(token)
	if err != nil {
		b.Fatal(err)
	}
	servers := make([]*gateway.Server, n)
	for i := range n {
		srv, err := gateway.New(gateway.Options{Workspace: ws, Authenticator: auth,
			Audit:  audit.SinkFunc(func(context.Context, audit.Record) error { return nil }),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		ip := fmt.Sprintf("127.0.%d.%d", 10+i/200, 10+i%200)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		b.Cleanup(func() { _ = hs.Close(); srv.Close() })
		podName := fmt.Sprintf("gw-%d", i)
		b.Cleanup(func() {
			_ = testEnv.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName}})
		})
		servers[i] = srv
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("gw-%d", i),
			Labels: map[string]string{policyv1alpha1.GatewayLabel: "main"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "gw"}}}}
		if err := testEnv.Client.Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
		pod.Status = corev1.PodStatus{PodIP: ip}
		if err := testEnv.Client.Status().Update(ctx, pod); err != nil {
			b.Fatal(err)
		}
	}

	gw := controller.GatewayReconciler{Pusher: &controller.Pusher{Tokens: staticTokens(token), Port: port}}
	testEnv.StartManager(b, controller.CacheOptions(), func(mgr ctrl.Manager) error {
		return controller.SetupAll(mgr, controller.NewStore(), gw, controller.DefaultApprovalRetention)
	})

	policy := &policyv1alpha1.AutonomyPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: policyv1alpha1.AutonomyPolicySpec{Workspace: &policyv1alpha1.Workspace{Root: ws}, ForbiddenPathGlobs: []string{"**/x-0"}}}
	if err := testEnv.Client.Create(ctx, policy); err != nil {
		b.Fatal(err)
	}
	revisions := func() []string {
		out := make([]string, len(servers))
		for i, s := range servers {
			out[i] = s.Status().Revision
		}
		return out
	}
	// waitAll waits until every gateway enforces one revision other than prev's.
	waitAll := func(prev []string) []string {
		deadline := time.Now().Add(60 * time.Second)
		for {
			cur := revisions()
			moved := true
			for i := range cur {
				if cur[i] == "" || cur[i] == prev[i] || cur[i] != cur[0] {
					moved = false
					break
				}
			}
			if moved {
				return cur
			}
			if time.Now().After(deadline) {
				b.Fatalf("gateways did not all move to a new revision within 60s: %v", cur)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	prev := waitAll(make([]string, n))
	var took []time.Duration
	for u := 1; u <= updates; u++ {
		base := policy.DeepCopy()
		policy.Spec.ForbiddenPathGlobs = []string{fmt.Sprintf("**/x-%d", u)}
		start := time.Now()
		if err := testEnv.Client.Patch(ctx, policy, client.MergeFrom(base)); err != nil {
			b.Fatal(err)
		}
		prev = waitAll(prev)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)-1]
}

func freePortB(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// propagationSizes are the gateway counts measured (PROPAGATION_N overrides).
func propagationSizes() []int {
	if v, err := strconv.Atoi(os.Getenv("PROPAGATION_N")); err == nil && v > 0 {
		return []int{v}
	}
	return []int{1, 10, 50}
}
