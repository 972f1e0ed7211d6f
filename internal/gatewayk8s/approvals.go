package gatewayk8s

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/hooks"
)

// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=toolcallapprovals,verbs=get;list;watch;create,namespace=system
// +kubebuilder:rbac:groups=policy.toolhooks.dev,resources=toolcallapprovals/status,verbs=get;update;patch,namespace=system
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// DefaultApprovalWait is how long a call waits for a decision when its
// request asks to wait and ApprovalsOptions.Wait is zero.
const DefaultApprovalWait = 60 * time.Second

// callIndex indexes the cached ToolCallApprovals by their CallLabel.
const callIndex = "toolhooks.callKey"

// callKeyLength is how many hex digits of the call's SHA-256 its label holds
// (a label value holds at most 63 characters).
const callKeyLength = 40

// maxConsumeAttempts bounds the retries of using an approval whose cached
// copy was stale.
const maxConsumeAttempts = 3

// cacheSyncTimeout bounds NewApprovals' wait for the first list of the
// approvals (a missing permission would make it wait for ever).
const cacheSyncTimeout = 30 * time.Second

// maxSenderGroups is the most groups a request records of its sender.
const maxSenderGroups = 64

// maxPolicyReason and maxPolicyRule are the longest reason and rule a
// ToolCallApproval holds.
const (
	maxPolicyReason = 1024
	maxPolicyRule   = 128
)

// ErrNoSender is the error of a request for approval of a call without an
// authenticated sender: nobody could be told apart from the person deciding it.
var ErrNoSender = errors.New("the call has no authenticated sender, so nobody can be asked to approve it")

// ApprovalsOptions configure Approvals.
type ApprovalsOptions struct {
	// Namespace holds the ToolCallApprovals (the gateway's namespace).
	Namespace string
	// Pod is this gateway's pod name: the requests' spec.gateway and the
	// used approvals' status.usedBy.
	Pod string
	// Wait bounds how long a request that asks to wait waits for a decision
	// (default DefaultApprovalWait).
	Wait time.Duration
	// Events, when set, records a ToolCallApprovalRequested Event on each
	// request and on its asking policy.
	Events *Events
	// Registry, when set, receives the approval metrics.
	Registry prometheus.Registerer
	// Logger logs the errors Approvals swallows; nil means slog.Default().
	Logger *slog.Logger
	// Clock returns the current time (nil: time.Now); requests expire by it.
	Clock func() time.Time
}

// Approvals is a hooks.Approver backed by ToolCallApproval objects in one
// namespace. It reads them from an informer's cache, so that a waiting call
// wakes up on the decision's watch event instead of polling, and writes
// them with optimistic concurrency, so that of several gateways only one
// uses an approval.
type Approvals struct {
	client  client.Client
	cache   cache.Cache
	reviews authzclient.SubjectAccessReviewInterface
	opts    ApprovalsOptions
	log     *slog.Logger
	metrics *approvalMetrics
	stop    func()

	mu      sync.Mutex
	changed chan struct{}
}

var _ hooks.Approver = (*Approvals)(nil)

// NewApprovals starts an informer on the ToolCallApprovals of o.Namespace
// and returns when its cache is synced; Stop ends it.
func NewApprovals(ctx context.Context, cfg *rest.Config, o ApprovalsOptions) (*Approvals, error) {
	if o.Namespace == "" {
		return nil, errors.New("approvals need a namespace")
	}
	if o.Wait <= 0 {
		o.Wait = DefaultApprovalWait
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	s := k8sruntime.NewScheme()
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating the approvals client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the access review client: %w", err)
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: s, DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("creating the approvals cache: %w", err)
	}
	m, err := newApprovalMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	a := &Approvals{client: c, cache: ca, reviews: cs.AuthorizationV1().SubjectAccessReviews(), opts: o,
		log: cmp.Or(o.Logger, slog.Default()), metrics: m, changed: make(chan struct{})}
	if err := ca.IndexField(ctx, &policyv1alpha1.ToolCallApproval{}, callIndex, func(obj client.Object) []string {
		if key := obj.GetLabels()[policyv1alpha1.CallLabel]; key != "" {
			return []string{key}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing approvals: %w", err)
	}
	inf, err := ca.GetInformer(ctx, &policyv1alpha1.ToolCallApproval{})
	if err != nil {
		return nil, fmt.Errorf("watching approvals: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.notify() },
		UpdateFunc: a.updated,
		DeleteFunc: func(any) { a.notify() },
	}); err != nil {
		return nil, fmt.Errorf("watching approvals: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ca.Start(ctx) }()
	a.stop = func() {
		cancel()
		if err := <-done; err != nil {
			a.log.Error("Approvals cache stopped", "error", err)
		}
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancelSync()
	if !ca.WaitForCacheSync(syncCtx) {
		a.stop()
		return nil, fmt.Errorf("the ToolCallApprovals of namespace %s could not be listed and watched within %s", o.Namespace, cacheSyncTimeout)
	}
	return a, nil
}

// Stop stops the informer.
func (a *Approvals) Stop() { a.stop() }

// notify wakes the waiting requests up to look at the cache again.
func (a *Approvals) notify() {
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// changes returns a channel closed on the next change of any approval.
func (a *Approvals) changes() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// updated observes the decision time of the requests this gateway made,
// when they are decided, and wakes the waiting requests.
func (a *Approvals) updated(oldObj, newObj any) {
	defer a.notify()
	prev, ok1 := oldObj.(*policyv1alpha1.ToolCallApproval)
	cur, ok2 := newObj.(*policyv1alpha1.ToolCallApproval)
	if !ok1 || !ok2 || cur.Spec.Gateway != a.opts.Pod || !undecided(prev) {
		return
	}
	condition := ""
	switch cur.Status.State {
	case policyv1alpha1.ApprovalApproved:
		condition = policyv1alpha1.ConditionApproved
	case policyv1alpha1.ApprovalDenied:
		condition = policyv1alpha1.ConditionDenied
	default:
		return
	}
	at := a.opts.Clock()
	if c := meta.FindStatusCondition(cur.Status.Conditions, condition); c != nil {
		at = c.LastTransitionTime.Time
	}
	a.metrics.decision.Observe(max(at.Sub(cur.CreationTimestamp.Time), 0).Seconds())
}

// undecided reports whether tca waits for a decision.
func undecided(tca *policyv1alpha1.ToolCallApproval) bool {
	return tca.Status.State == "" || tca.Status.State == policyv1alpha1.ApprovalPending
}

// callRequest is what RequestApproval knows of one call.
type callRequest struct {
	key    string
	spec   policyv1alpha1.ToolCallApprovalSpec
	expiry time.Duration
	policy hooks.PolicyRef
}

// describe returns the request of req's call, or ErrNoSender.
func describe(req hooks.ApprovalRequest) (*callRequest, error) {
	call := req.Call
	if call == nil {
		return nil, errors.New("a request for approval without a call")
	}
	var sender policyv1alpha1.ApprovalSender
	switch {
	case call.Caller != nil:
		if hooks.KindOf(call.Caller) == hooks.IdentityAnonymous || call.Caller.Username == "" {
			return nil, ErrNoSender
		}
		sender = policyv1alpha1.ApprovalSender{Username: call.Caller.Username, UID: call.Caller.UID,
			Groups: slices.Clone(call.Caller.Groups[:min(len(call.Caller.Groups), maxSenderGroups)])}
	case call.SenderID != "":
		sender = policyv1alpha1.ApprovalSender{Username: call.SenderID}
	default:
		return nil, ErrNoSender
	}
	rule := truncate(req.Ask.Rule, maxPolicyRule)
	digest := hooks.ArgumentsDigest(call)
	key, err := json.Marshal([]string{sender.Username, call.SessionID, call.Tool, digest, req.Ask.Policy.UID, rule})
	if err != nil {
		return nil, fmt.Errorf("hashing the call: %w", err)
	}
	sum := sha256.Sum256(key)
	return &callRequest{
		key: hex.EncodeToString(sum[:])[:callKeyLength],
		spec: policyv1alpha1.ToolCallApprovalSpec{
			Policy: policyv1alpha1.AskingPolicy{Kind: req.Ask.Policy.Kind, Name: req.Ask.Policy.Name, UID: req.Ask.Policy.UID,
				Rule: rule, Reason: truncate(req.Ask.Reason, maxPolicyReason)},
			Sender:          sender,
			Session:         call.SessionID,
			Tool:            call.Tool,
			ArgumentsDigest: digest,
			Arguments:       previewArguments(call.Args),
		},
		expiry: cmp.Or(req.Expiry, hooks.DefaultApprovalExpiry),
		policy: req.Ask.Policy,
	}, nil
}

// matches reports whether tca describes exactly the call of c.
func (c *callRequest) matches(tca *policyv1alpha1.ToolCallApproval) bool {
	s := &tca.Spec
	return s.Sender.Username == c.spec.Sender.Username && s.Session == c.spec.Session && s.Tool == c.spec.Tool &&
		s.ArgumentsDigest == c.spec.ArgumentsDigest && s.Policy.UID == c.spec.Policy.UID && s.Policy.Rule == c.spec.Policy.Rule
}

// RequestApproval answers with the recorded decision on req's call, using
// an approval it grants; without a request for the call it creates one. A
// pending request is waited for when req.Wait, up to the Wait option or
// the end of ctx.
func (a *Approvals) RequestApproval(ctx context.Context, req hooks.ApprovalRequest) (hooks.Approval, error) {
	out, err := a.request(ctx, req)
	a.metrics.count(out, err)
	return out, err
}

func (a *Approvals) request(ctx context.Context, req hooks.ApprovalRequest) (hooks.Approval, error) {
	c, err := describe(req)
	if err != nil {
		return hooks.Approval{}, err
	}
	var waitEnd <-chan time.Time
	if req.Wait {
		t := time.NewTimer(a.opts.Wait)
		defer t.Stop()
		waitEnd = t.C
	}
	// used holds the approvals this request saw used by another call, which
	// the cache may still show as approved.
	used := map[string]bool{}
	for {
		changed := a.changes()
		tca, err := a.find(ctx, c, used)
		if err != nil {
			return hooks.Approval{}, err
		}
		if tca == nil {
			if tca, err = a.create(ctx, c); err != nil {
				return hooks.Approval{}, err
			}
		}
		out, err := a.settle(ctx, c, tca)
		if errors.Is(err, errUsedElsewhere) {
			used[tca.Name] = true
			continue
		}
		if err != nil || out.State != hooks.ApprovalPending || !req.Wait {
			return out, err
		}
		expires := time.NewTimer(tca.Spec.ExpiresAt.Sub(a.opts.Clock()))
		select {
		case <-changed:
		case <-expires.C:
		case <-waitEnd:
			expires.Stop()
			return out, nil
		case <-ctx.Done():
			expires.Stop()
			return out, nil
		}
		expires.Stop()
	}
}

// find returns the request of c's call that still counts (not used), from
// the cache or, when the cache holds none, from the API server (the cache
// may not have seen a request created a moment ago); nil when there is none.
// Of several (gateways that asked at once), a denial wins over an
// approval, an approval over a pending request, and the oldest wins ties.
func (a *Approvals) find(ctx context.Context, c *callRequest, used map[string]bool) (*policyv1alpha1.ToolCallApproval, error) {
	var list policyv1alpha1.ToolCallApprovalList
	if err := a.cache.List(ctx, &list, client.InNamespace(a.opts.Namespace), client.MatchingFields{callIndex: c.key}); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	best := a.pick(c, list.Items, used)
	if best != nil {
		return best, nil
	}
	if err := a.client.List(ctx, &list, client.InNamespace(a.opts.Namespace),
		client.MatchingLabels{policyv1alpha1.CallLabel: c.key}); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return a.pick(c, list.Items, used), nil
}

func (a *Approvals) pick(c *callRequest, items []policyv1alpha1.ToolCallApproval, used map[string]bool) *policyv1alpha1.ToolCallApproval {
	rank := map[policyv1alpha1.ApprovalState]int{
		policyv1alpha1.ApprovalDenied: 0, policyv1alpha1.ApprovalApproved: 1,
		policyv1alpha1.ApprovalPending: 2, "": 2, policyv1alpha1.ApprovalExpired: 3,
	}
	var best *policyv1alpha1.ToolCallApproval
	for i := range items {
		tca := &items[i]
		r, ok := rank[tca.Status.State]
		if !ok || used[tca.Name] || !c.matches(tca) {
			continue
		}
		if best == nil || r < rank[best.Status.State] ||
			r == rank[best.Status.State] && tca.CreationTimestamp.Before(&best.CreationTimestamp) {
			best = tca
		}
	}
	return best.DeepCopy()
}

// create records a pending request for c's call.
func (a *Approvals) create(ctx context.Context, c *callRequest) (*policyv1alpha1.ToolCallApproval, error) {
	tca := &policyv1alpha1.ToolCallApproval{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: dnsPrefix(c.spec.Tool),
			Namespace:    a.opts.Namespace,
			Labels:       map[string]string{policyv1alpha1.CallLabel: c.key},
		},
		Spec: c.spec,
	}
	tca.Spec.Gateway = a.opts.Pod
	tca.Spec.ExpiresAt = metav1.NewTime(a.opts.Clock().Add(c.expiry).Truncate(time.Second))
	if err := a.client.Create(ctx, tca); err != nil {
		return nil, fmt.Errorf("creating a ToolCallApproval: %w", err)
	}
	a.metrics.outcomes.WithLabelValues("requested").Inc()
	if a.opts.Events != nil {
		a.opts.Events.ApprovalRequested(tca, c.policy)
	}
	tca.Status.State = policyv1alpha1.ApprovalPending
	if err := a.client.Status().Update(ctx, tca); err != nil {
		// An empty state reads as pending; a conflict means someone decided already.
		a.log.WarnContext(ctx, "Could not mark a ToolCallApproval pending", "name", tca.Name, "error", err)
		tca.Status.State = ""
	}
	return tca, nil
}

// errUsedElsewhere: the approval was used by another call in the meantime.
var errUsedElsewhere = errors.New("the approval was used by another call")

// settle answers with tca's decision, using it when it grants the call.
func (a *Approvals) settle(ctx context.Context, c *callRequest, tca *policyv1alpha1.ToolCallApproval) (hooks.Approval, error) {
	for attempt := 1; ; attempt++ {
		out := hooks.Approval{Name: tca.Name, State: hooks.ApprovalPending, DecidedBy: tca.Status.DecidedBy}
		switch {
		case tca.Status.State == policyv1alpha1.ApprovalDenied:
			out.State, out.Reason = hooks.ApprovalDenied, conditionMessage(tca, policyv1alpha1.ConditionDenied)
			return out, nil
		case tca.Status.State == policyv1alpha1.ApprovalUsed:
			return out, errUsedElsewhere
		case tca.Status.State == policyv1alpha1.ApprovalExpired || !a.opts.Clock().Before(tca.Spec.ExpiresAt.Time):
			a.expire(ctx, tca)
			out.State = hooks.ApprovalExpired
			return out, nil
		case tca.Status.State != policyv1alpha1.ApprovalApproved:
			return out, nil
		}
		out.Reason = conditionMessage(tca, policyv1alpha1.ConditionApproved)
		if why, err := a.mayApprove(ctx, c, tca); err != nil || why != "" {
			out.State, out.Reason = hooks.ApprovalDenied, why
			return out, err
		}
		err := a.use(ctx, tca)
		if err == nil {
			out.State = hooks.ApprovalApproved
			return out, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxConsumeAttempts {
			return hooks.Approval{}, fmt.Errorf("using ToolCallApproval %s: %w", tca.Name, err)
		}
		// Another gateway changed it, or the cached copy was stale: look again.
		fresh := &policyv1alpha1.ToolCallApproval{}
		if err := a.client.Get(ctx, client.ObjectKeyFromObject(tca), fresh); err != nil {
			return hooks.Approval{}, fmt.Errorf("reading ToolCallApproval %s: %w", tca.Name, err)
		}
		tca = fresh
	}
}

// mayApprove returns why tca's approval is not honoured ("" when it is): it
// must name who decided, who must not be the sender, and who must hold the
// approve verb on it.
func (a *Approvals) mayApprove(ctx context.Context, c *callRequest, tca *policyv1alpha1.ToolCallApproval) (string, error) {
	by := tca.Status.DecidedBy
	if by == "" {
		return fmt.Sprintf("ToolCallApproval %s is approved without saying by whom, so it is not honoured", tca.Name), nil
	}
	if by == c.spec.Sender.Username {
		return fmt.Sprintf("approved by %s, the sender of the call, who may not approve it", by), nil
	}
	groups := append([]string{"system:authenticated"}, tca.Status.DecidedByGroups...)
	if ns, ok := strings.CutPrefix(by, "system:serviceaccount:"); ok {
		if i := strings.IndexByte(ns, ':'); i > 0 {
			groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+ns[:i])
		}
	}
	review, err := a.reviews.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   by,
		Groups: groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: tca.Namespace, Verb: policyv1alpha1.ApprovalVerb, Group: policyv1alpha1.GroupVersion.Group,
			Version: policyv1alpha1.GroupVersion.Version, Resource: "toolcallapprovals", Name: tca.Name,
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("checking that %s may approve ToolCallApproval %s: %w", by, tca.Name, err)
	}
	if !review.Status.Allowed {
		return fmt.Sprintf("approved by %s, who may not approve it", by), nil
	}
	return "", nil
}

// use marks tca used by this gateway, failing with a conflict when anyone
// changed it since it was read.
func (a *Approvals) use(ctx context.Context, tca *policyv1alpha1.ToolCallApproval) error {
	upd := tca.DeepCopy()
	upd.Status.State = policyv1alpha1.ApprovalUsed
	upd.Status.UsedBy = a.opts.Pod
	meta.SetStatusCondition(&upd.Status.Conditions, metav1.Condition{
		Type: policyv1alpha1.ConditionUsed, Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonAdmitted,
		Message: truncate("Gateway "+cmp.Or(a.opts.Pod, "(unnamed)")+" admitted the call", maxNote), ObservedGeneration: tca.Generation,
	})
	return a.client.Status().Update(ctx, upd)
}

// expire marks tca expired unless it is decided, used or expired already;
// a failure is logged, since the call is denied as expired either way.
func (a *Approvals) expire(ctx context.Context, tca *policyv1alpha1.ToolCallApproval) {
	for attempt := 1; ; attempt++ {
		switch tca.Status.State {
		case policyv1alpha1.ApprovalExpired, policyv1alpha1.ApprovalDenied, policyv1alpha1.ApprovalUsed:
			return
		}
		upd := tca.DeepCopy()
		upd.Status.State = policyv1alpha1.ApprovalExpired
		meta.SetStatusCondition(&upd.Status.Conditions, metav1.Condition{
			Type: policyv1alpha1.ConditionExpired, Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonNotDecided,
			Message: "Nobody decided before " + tca.Spec.ExpiresAt.UTC().Format(time.RFC3339), ObservedGeneration: tca.Generation,
		})
		err := a.client.Status().Update(ctx, upd)
		if err == nil {
			return
		}
		if apierrors.IsConflict(err) && attempt < maxConsumeAttempts {
			// The cached copy was stale: look again.
			fresh := &policyv1alpha1.ToolCallApproval{}
			if err = a.client.Get(ctx, client.ObjectKeyFromObject(tca), fresh); err == nil {
				tca = fresh
				continue
			}
		}
		a.log.WarnContext(ctx, "Could not mark a ToolCallApproval expired", "name", tca.Name, "error", err)
		return
	}
}

// conditionMessage is the message of tca's condition of type t, if any.
func conditionMessage(tca *policyv1alpha1.ToolCallApproval, t string) string {
	if c := meta.FindStatusCondition(tca.Status.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}

// dnsPrefix is a generateName for a request about tool: its name in lower
// case with every other character a hyphen, shortened, and a hyphen.
func dnsPrefix(tool string) string {
	b := []byte(strings.ToLower(tool))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	name := strings.Trim(string(b[:min(len(b), 40)]), "-")
	if name == "" {
		name = "call"
	}
	return name + "-"
}

// approvalMetrics count the requests' outcomes and time their decisions.
type approvalMetrics struct {
	outcomes *prometheus.CounterVec
	decision prometheus.Histogram
}

func newApprovalMetrics(reg prometheus.Registerer) (*approvalMetrics, error) {
	m := &approvalMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolhooks_approvals_total",
			Help: "Requests for approval by outcome: requested (a ToolCallApproval was created), approved (an approval was used), " +
				"denied, expired, pending (no decision in time) or error.",
		}, []string{"outcome"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolhooks_approval_decision_seconds",
			Help:    "Time from the creation of this gateway's ToolCallApprovals to their approval or denial.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
		}),
	}
	for _, o := range []string{"requested", "approved", "denied", "expired", "pending", "error"} {
		m.outcomes.WithLabelValues(o)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.outcomes, m.decision} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering approval metrics: %w", err)
			}
		}
	}
	return m, nil
}

// count records a request's outcome.
func (m *approvalMetrics) count(out hooks.Approval, err error) {
	outcome := strings.ToLower(string(out.State))
	if err != nil || out.State == "" {
		outcome = "error"
	}
	m.outcomes.WithLabelValues(outcome).Inc()
}
