package controller

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
)

// Store holds, per gateway pod, the configuration the controller wants it to
// enforce and the one it acknowledged, plus each policy's last good compiled
// version and the hook lists compiled for each group of gateways that the same
// policies select. The gateway reconciler writes it; the status reconcilers
// read it.
type Store struct {
	mu       sync.RWMutex
	desired  map[types.NamespacedName]*gatewayconfig.Config
	acked    map[types.NamespacedName]ack
	lastGood map[string]gatewayconfig.Hook
	subs     []chan event.GenericEvent

	// cmu guards groups (by namespace, then selection) and podGroups (each
	// pod's selection); it is taken before mu, never after.
	cmu       sync.Mutex
	groups    map[string]map[string]*group
	podGroups map[types.NamespacedName]string
	// Pushing is true when a Pusher delivers configurations, so Enforced is reported.
	Pushing bool
}

type ack struct {
	podUID   types.UID
	cfg      *gatewayconfig.Config
	degraded []string
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		desired:  map[types.NamespacedName]*gatewayconfig.Config{},
		acked:    map[types.NamespacedName]ack{},
		lastGood: map[string]gatewayconfig.Hook{},

		groups:    map[string]map[string]*group{},
		podGroups: map[types.NamespacedName]string{},
	}
}

// Set records pod's desired configuration and reports whether its revision changed.
func (s *Store) Set(pod types.NamespacedName, cfg *gatewayconfig.Config) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.desired[pod]
	changed := !ok || old.Revision != cfg.Revision
	if changed {
		s.desired[pod] = cfg
	}
	return changed
}

// Get returns pod's desired configuration.
func (s *Store) Get(pod types.NamespacedName) (*gatewayconfig.Config, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cfg, ok := s.desired[pod]
	return cfg, ok
}

// Delete forgets pod.
func (s *Store) Delete(pod types.NamespacedName) {
	s.cmu.Lock()
	s.leaveLocked(pod)
	s.cmu.Unlock()
	s.mu.Lock()
	_, had := s.acked[pod]
	delete(s.desired, pod)
	delete(s.acked, pod)
	s.mu.Unlock()
	if had {
		s.notify(pod)
	}
}

// Ack records that the pod (by UID) enforces cfg and which of its plugin
// hooks it reports degraded.
func (s *Store) Ack(pod types.NamespacedName, podUID types.UID, cfg *gatewayconfig.Config, degraded []string) {
	degraded = slices.Sorted(slices.Values(degraded))
	s.mu.Lock()
	old, ok := s.acked[pod]
	changed := !ok || old.podUID != podUID || old.cfg.Revision != cfg.Revision || !slices.Equal(old.degraded, degraded)
	s.acked[pod] = ack{podUID: podUID, cfg: cfg, degraded: degraded}
	s.mu.Unlock()
	if changed {
		s.notify(pod)
	}
}

// Enforces reports whether pod acknowledged a configuration holding the
// policy (by UID) at generation.
func (s *Store) Enforces(pod *corev1.Pod, policyUID types.UID, generation int64) bool {
	s.mu.RLock()
	a, ok := s.acked[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	s.mu.RUnlock()
	if !ok || a.podUID != pod.UID {
		return false
	}
	for _, h := range a.cfg.Hooks {
		if h.Policy.UID == string(policyUID) && h.Policy.Generation == generation {
			return true
		}
	}
	return false
}

// Degraded reports whether pod (by UID) reported the hook degraded.
func (s *Store) Degraded(pod *corev1.Pod, hookName string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.acked[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	return ok && a.podUID == pod.UID && slices.Contains(a.degraded, hookName)
}

// Remember keeps the hooks of cfg as their policies' last good versions and
// forgets those of namespace's policies that no longer exist (live holds the
// UIDs that do).
func (s *Store) Remember(namespace string, cfg *gatewayconfig.Config, live map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range cfg.Hooks {
		if h.Policy.UID != "" {
			s.lastGood[h.Policy.UID] = h
		}
	}
	for uid, h := range s.lastGood {
		if h.Policy.Namespace == namespace && !live[uid] {
			delete(s.lastGood, uid)
		}
	}
}

// LastGood returns a policy's last good compiled version.
func (s *Store) LastGood(uid string) (gatewayconfig.Hook, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.lastGood[uid]
	return h, ok
}

// AckEvents returns a channel that receives the gateway pod whenever what it
// acknowledged changes (for the status reconcilers).
func (s *Store) AckEvents() <-chan event.GenericEvent {
	ch := make(chan event.GenericEvent, 4096)
	s.mu.Lock()
	s.subs = append(s.subs, ch)
	s.mu.Unlock()
	return ch
}

func (s *Store) notify(pod types.NamespacedName) {
	ev := event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ch := range s.subs {
		select {
		case ch <- ev:
		default: // full: the status reconcilers' periodic resync catches up
		}
	}
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
