package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/gatewayk8s"
)

// kubeFlags configure cluster mode: pushes authenticated by TokenReview and
// denials recorded as Events.
type kubeFlags struct {
	inCluster          bool
	kubeconfig         string
	controllerIdentity string
	audience           string
	podName            string
	podNamespace       string
	podUID             string
	eventsQPS          float64
	eventsBurst        int
	approvalWait       time.Duration
	// tokenReviews is set by setup, for the callers' authenticator.
	tokenReviews authnclient.TokenReviewInterface
}

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&k.inCluster, "in-cluster", false, "cluster mode with the pod's ServiceAccount credentials")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "cluster mode with this kubeconfig (for running outside a pod)")
	fs.StringVar(&k.controllerIdentity, "controller-identity", "",
		"the only user allowed to push configurations (default system:serviceaccount:$POD_NAMESPACE:toolhooks-controller-manager)")
	fs.StringVar(&k.audience, "push-audience", gatewayconfig.PushAudience, "the audience push tokens must be bound to")
	fs.StringVar(&k.podName, "pod-name", os.Getenv("POD_NAME"), "this gateway's pod name (Events are related to it)")
	fs.StringVar(&k.podNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "this gateway's pod namespace")
	fs.StringVar(&k.podUID, "pod-uid", os.Getenv("POD_UID"), "this gateway's pod UID")
	fs.Float64Var(&k.eventsQPS, "events-qps", 5, "the most denial Events per second this gateway sends (beyond the burst)")
	fs.IntVar(&k.eventsBurst, "events-burst", 50, "how many denial Events may be sent at once")
	fs.DurationVar(&k.approvalWait, "approval-wait", gatewayk8s.DefaultApprovalWait,
		"how long /v1/tool-calls and MCP tools/call wait for a person to decide a call that needs approval")
}

func (k *kubeFlags) enabled() bool { return k.inCluster || k.kubeconfig != "" }

// setup sets the TokenReview authenticator, the Events sink and the
// ToolCallApprovals approver (in the pod's namespace) on opts.
func (k *kubeFlags) setup(ctx context.Context, opts *gateway.Options, log *slog.Logger) (stop func(), err error) {
	var cfg *rest.Config
	if k.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes credentials: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	identity := k.controllerIdentity
	if identity == "" {
		if k.podNamespace == "" {
			return nil, errors.New("--controller-identity is required when the pod namespace is unknown")
		}
		identity = "system:serviceaccount:" + k.podNamespace + ":toolhooks-controller-manager"
	}
	k.tokenReviews = cs.AuthenticationV1().TokenReviews()
	opts.Authenticator = &tokenreview.TokenReview{Client: cs.AuthenticationV1().TokenReviews(), Audience: k.audience,
		Allowed: []string{identity}}
	events, err := gatewayk8s.NewEvents(ctx, cs, gatewayk8s.EventSinkOptions{
		Pod:   corev1.ObjectReference{Namespace: k.podNamespace, Name: k.podName, UID: types.UID(k.podUID)},
		QPS:   k.eventsQPS,
		Burst: k.eventsBurst,
	})
	if err != nil {
		return nil, err
	}
	opts.DenialSink = events
	if opts.Registry != nil {
		opts.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolhooks_denial_events_rate_limited_total",
			Help: "Denials not recorded as Kubernetes Events because the events rate limit was reached.",
		}, func() float64 { return float64(events.Dropped()) }))
	}
	stop = events.Stop
	if k.podNamespace == "" {
		log.Warn("No approvals without --pod-namespace: calls that need a person's approval are denied")
	} else {
		approvals, err := gatewayk8s.NewApprovals(ctx, cfg, gatewayk8s.ApprovalsOptions{
			Namespace: k.podNamespace, Pod: k.podName, Wait: k.approvalWait, Events: events, Registry: opts.Registry, Logger: log,
		})
		if err != nil {
			events.Stop()
			return nil, err
		}
		opts.Approver = approvals
		stop = func() { approvals.Stop(); events.Stop() }
	}
	log.Info("Cluster mode", "controllerIdentity", identity, "audience", k.audience, "pod", k.podNamespace+"/"+k.podName,
		"approvalWait", k.approvalWait)
	return stop, nil
}
