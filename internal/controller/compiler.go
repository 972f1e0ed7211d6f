package controller

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
)

var (
	compilesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolhooks_controller_compiles_total",
		Help: "Compiles the controller ran: one hook list per distinct namespace, policy generations and gateway selection, " +
			"or one policy for the status of a namespace without gateways.",
	})
	compileReusesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolhooks_controller_compile_reuses_total",
		Help: "Gateway pod and policy status reconciles that reused a hook list compiled for the same input.",
	})
)

func init() {
	metrics.Registry.MustRegister(compilesTotal, compileReusesTotal)
}

// group is the gateways of one namespace that the same policies select: they
// share one compiled hook list.
type group struct {
	// pods counts the gateway pods whose last reconcile used the group.
	pods int
	cur  *compiled
}

// compiled is one hook list with what it was compiled from.
type compiled struct {
	// inputs identifies the namespace's policies (see fingerprint).
	inputs string
	// ready is closed once cfg, outcomes and fallbacks are set.
	ready    chan struct{}
	cfg      *gatewayconfig.Config
	outcomes []compile.Outcome
	// fallbacks holds, per policy UID whose last good version was asked for,
	// the generation of the version found (0: none).
	fallbacks map[string]int64
}

// compiled returns the hook list of gw (of namespace gw.Namespace, whose
// policies are p), compiling only when no gateway with the same input was:
// the same namespace, the same policies at the same generations, the same
// selection of them, and the same last good versions of those that fail. When
// pod is not nil the pod joins the group, which is forgotten once no pod uses
// it. Concurrent callers with one input share one compile.
func (s *Store) compiled(pod *types.NamespacedName, gw compile.Gateway, p compile.Policies) *compiled {
	inputs, selection := fingerprint(p, gw.Labels)
	s.cmu.Lock()
	groups := s.groups[gw.Namespace]
	if groups == nil {
		groups = map[string]*group{}
		s.groups[gw.Namespace] = groups
	}
	g := groups[selection]
	if g == nil {
		g = &group{}
		groups[selection] = g
	}
	if pod != nil {
		s.joinLocked(*pod, gw.Namespace, selection)
	}
	c := g.cur
	if c != nil && c.inputs == inputs && (!isReady(c) || s.fallbacksHold(c)) {
		s.cmu.Unlock()
		<-c.ready
		compileReusesTotal.Inc()
		return c
	}
	if c == nil || c.inputs != inputs {
		// The namespace's policies changed: lists of unused groups compiled
		// from other inputs are of no more use.
		for sel, other := range groups {
			if other.pods == 0 && sel != selection && other.cur != nil && other.cur.inputs != inputs {
				delete(groups, sel)
			}
		}
	}
	c = &compiled{inputs: inputs, ready: make(chan struct{})}
	g.cur = c
	s.cmu.Unlock()

	used := map[string]int64{}
	c.cfg, c.outcomes = compile.WithFallback(gw, p, func(uid string) (gatewayconfig.Hook, bool) {
		h, ok := s.LastGood(uid)
		used[uid] = h.Policy.Generation
		return h, ok
	})
	c.fallbacks = used
	s.Remember(gw.Namespace, c.cfg, liveUIDs(p))
	compilesTotal.Inc()
	close(c.ready)
	return c
}

func isReady(c *compiled) bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// fallbacksHold reports whether the last good versions c was compiled with
// are still the current ones.
func (s *Store) fallbacksHold(c *compiled) bool {
	for uid, gen := range c.fallbacks {
		h, _ := s.LastGood(uid)
		if h.Policy.Generation != gen {
			return false
		}
	}
	return true
}

// joinLocked moves pod into the group of namespace and selection (s.cmu held).
func (s *Store) joinLocked(pod types.NamespacedName, namespace, selection string) {
	if old, ok := s.podGroups[pod]; ok {
		if old == selection {
			return
		}
		s.leaveLocked(pod)
	}
	s.podGroups[pod] = selection
	s.groups[namespace][selection].pods++
}

// leaveLocked takes pod out of its group and forgets the group when no pod
// uses it any more (s.cmu held).
func (s *Store) leaveLocked(pod types.NamespacedName) {
	selection, ok := s.podGroups[pod]
	if !ok {
		return
	}
	delete(s.podGroups, pod)
	groups := s.groups[pod.Namespace]
	if g := groups[selection]; g != nil {
		if g.pods--; g.pods <= 0 {
			delete(groups, selection)
		}
	}
	if len(groups) == 0 {
		delete(s.groups, pod.Namespace)
	}
}

// Groups returns how many distinct compiled inputs the store holds.
func (s *Store) Groups() int {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	n := 0
	for _, groups := range s.groups {
		n += len(groups)
	}
	return n
}

// fingerprint identifies what compiling p for a gateway with labels depends
// on besides the last good versions: inputs names every policy by kind, name,
// UID, generation and creation time (its spec, selector included, changes
// only with its generation); selection tells, in the same order, which of
// them select the labels. The gateways of one namespace with equal inputs and
// selection get the same hook list.
func fingerprint(p compile.Policies, labels map[string]string) (inputs, selection string) {
	type entry struct {
		kind     gatewayconfig.Kind
		obj      selecting
		selected bool
	}
	entries := make([]entry, 0, p.Len())
	for _, k := range compile.Kinds {
		for _, o := range p.Of(k.Kind) {
			ok, err := compile.Selects(o.GetGatewaySelector(), labels)
			entries = append(entries, entry{kind: k.Kind, obj: o, selected: err == nil && ok})
		}
	}
	// Names are unique per kind within a namespace.
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.obj.GetName(), b.obj.GetName()))
	})
	var in []byte
	sel := make([]byte, len(entries))
	for i, e := range entries {
		in = append(in, e.kind...)
		in = append(in, '/')
		in = append(in, e.obj.GetName()...)
		in = append(in, '/')
		in = append(in, e.obj.GetUID()...)
		in = append(in, '/')
		in = strconv.AppendInt(in, e.obj.GetGeneration(), 10)
		in = append(in, '/')
		in = strconv.AppendInt(in, e.obj.GetCreationTimestamp().UnixNano(), 10)
		in = append(in, '\n')
		sel[i] = '0'
		if e.selected {
			sel[i] = '1'
		}
	}
	return string(in), string(sel)
}

// selecting is a policy object with its gatewaySelector.
type selecting interface {
	metav1.Object
	GetGatewaySelector() *metav1.LabelSelector
}
