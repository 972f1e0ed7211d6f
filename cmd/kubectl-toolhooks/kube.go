package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags reach the cluster as kubectl does: --kubeconfig, --context, -n
// and the other kubeconfig flags; $KUBECONFIG.
type kubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

func (k *kubeFlags) bind(fl *pflag.FlagSet) {
	fl.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(&k.overrides, fl, clientcmd.RecommendedConfigOverrideFlags(""))
}

// load returns the namespace and the client configuration.
func (k *kubeFlags) load() (string, *rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &k.overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return "", nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return "", nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return ns, cfg, nil
}
