package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
)

// Store holds the desired configuration of every gateway pod, as compiled by
// the GatewayReconciler. The push half delivers it; tests read it.
type Store struct {
	mu      sync.RWMutex
	configs map[types.NamespacedName]*gatewayconfig.Config
	// OnChange, when set, is called (outside the lock) with the key of a pod
	// whose desired configuration changed or was removed.
	OnChange func(types.NamespacedName)
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{configs: map[types.NamespacedName]*gatewayconfig.Config{}} }

// Set records pod's desired configuration and reports whether its revision changed.
func (s *Store) Set(pod types.NamespacedName, cfg *gatewayconfig.Config) bool {
	s.mu.Lock()
	old, ok := s.configs[pod]
	changed := !ok || old.Revision != cfg.Revision
	if changed {
		s.configs[pod] = cfg
	}
	s.mu.Unlock()
	if changed && s.OnChange != nil {
		s.OnChange(pod)
	}
	return changed
}

// Get returns pod's desired configuration.
func (s *Store) Get(pod types.NamespacedName) (*gatewayconfig.Config, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cfg, ok := s.configs[pod]
	return cfg, ok
}

// Delete forgets pod.
func (s *Store) Delete(pod types.NamespacedName) {
	s.mu.Lock()
	_, ok := s.configs[pod]
	delete(s.configs, pod)
	s.mu.Unlock()
	if ok && s.OnChange != nil {
		s.OnChange(pod)
	}
}

// Len returns the number of gateway pods with a configuration.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.configs)
}

// CacheOptions limits the manager's pod cache to gateway pods, so the
// controller's memory does not grow with the cluster's other pods.
func CacheOptions() cache.Options {
	gateways := labels.NewSelector()
	req, err := labels.NewRequirement(policyv1alpha1.GatewayLabel, selection.Exists, nil)
	if err != nil { // constant input: cannot happen
		panic(err)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: gateways.Add(*req)},
	}}
}
