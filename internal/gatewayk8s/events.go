package gatewayk8s

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/toolhooks/toolhooks/internal/authn/tokenreview"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// maxNote and maxAction are the longest note and action the events API accepts.
const (
	maxNote   = 1024
	maxAction = 128
)

// EventSinkOptions configure Events.
type EventSinkOptions struct {
	// Pod is the gateway pod the events are related to.
	Pod corev1.ObjectReference
	// QPS and Burst bound the events this gateway sends (defaults 5 and 50);
	// denials beyond them are dropped and counted, never queued without bound.
	QPS   float64
	Burst int
}

// Events is a gateway.DenialSink that records each denial (and warn-mode
// would-deny) as an Event regarding the policy object that decided it and
// related to the gateway pod, through client-go's events broadcaster (which
// aggregates repeats into series). A token bucket in front of it keeps a
// denial storm from flooding the API server.
type Events struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	pod         *corev1.ObjectReference
	limiter     *rate.Limiter
	dropped     atomic.Int64
}

var _ gateway.DenialSink = (*Events)(nil)

// The gateway reviews tokens (tokenreview.TokenReview authenticates its
// pushes and callers) and records Events.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch,namespace=system

var _ gateway.Authenticator = (*tokenreview.TokenReview)(nil)

// NewEvents starts an events broadcaster writing through cs; Stop ends it.
func NewEvents(ctx context.Context, cs kubernetes.Interface, o EventSinkOptions) (*Events, error) {
	if o.QPS <= 0 {
		o.QPS = 5
	}
	if o.Burst <= 0 {
		o.Burst = 50
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("starting events broadcaster: %w", err)
	}
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	pod := o.Pod
	if pod.Kind == "" {
		pod.Kind, pod.APIVersion = "Pod", "v1"
	}
	return &Events{
		broadcaster: b,
		recorder:    b.NewRecorder(s, "toolhooks-gateway"),
		pod:         &pod,
		limiter:     rate.NewLimiter(rate.Limit(o.QPS), o.Burst),
	}, nil
}

// Denied records d as an Event on its policy. Decisions without a policy
// (the gateway's own "no policy yet" denial, invalid arguments) are skipped.
func (e *Events) Denied(_ context.Context, call *hooks.Call, d hooks.Decision) {
	if d.Policy.Kind == "" || d.Policy.Name == "" {
		return
	}
	if !e.limiter.Allow() {
		e.dropped.Add(1)
		return
	}
	regarding := &corev1.ObjectReference{
		APIVersion: policyv1alpha1.GroupVersion.String(), Kind: d.Policy.Kind,
		Namespace: d.Policy.Namespace, Name: d.Policy.Name, UID: types.UID(d.Policy.UID),
	}
	reason, eventType, verb := wire.ReasonToolCallDenied, corev1.EventTypeWarning, "Denied"
	if d.Action == hooks.ActionWarn {
		reason, eventType, verb = wire.ReasonToolCallWarned, corev1.EventTypeNormal, "Would deny"
	}
	related := e.relatedPod()
	note := fmt.Sprintf("%s tool %q for session %q sender %q (rule %s): %s",
		verb, call.Tool, call.SessionID, call.SenderID, d.Rule, d.Reason)
	// The action is the tool, so the broadcaster's series (keyed on
	// regarding, related, reason and action) count repeats per tool instead
	// of folding every tool's denials into the first one's note.
	action := call.Tool
	if action == "" {
		action = "GateToolCall"
	}
	e.recorder.Eventf(regarding, related, eventType, reason, truncate(action, maxAction), "%s", truncate(note, maxNote))
}

var _ gateway.ResultSink = (*Events)(nil)

// ResultFiltered records what one ResultPolicy found in a call's result as
// an Event on the policy: ToolResultWithheld (Warning) when it withheld the
// result, ToolResultWarned when its findings were only recorded, else
// ToolResultRedacted; the note names each rule, its matches and bytes,
// never the values, and the action is the tool and its rules.
func (e *Events) ResultFiltered(_ context.Context, call *hooks.Call, f hooks.ResultFiltering, withheld *hooks.Decision) {
	if f.Policy.Kind == "" || f.Policy.Name == "" {
		return
	}
	if !e.limiter.Allow() {
		e.dropped.Add(1)
		return
	}
	regarding := &corev1.ObjectReference{
		APIVersion: policyv1alpha1.GroupVersion.String(), Kind: f.Policy.Kind,
		Namespace: f.Policy.Namespace, Name: f.Policy.Name, UID: types.UID(f.Policy.UID),
	}
	applied := false
	var found []string
	for _, x := range f.Findings {
		found = append(found, fmt.Sprintf("%s ×%d (%d bytes, %s)", x.Rule, x.Count, x.Bytes, x.Action))
		applied = applied || (x.Action != string(hooks.ActionWarn) && !f.Warn)
	}
	reason, eventType, verb := wire.ReasonToolResultRedacted, corev1.EventTypeNormal, "Redacted"
	switch {
	case withheld != nil:
		reason, eventType, verb = wire.ReasonToolResultWithheld, corev1.EventTypeWarning, "Withheld"
	case !applied:
		reason, verb = wire.ReasonToolResultWarned, "Would redact"
	}
	related := e.relatedPod()
	note := fmt.Sprintf("%s the result of tool %q for session %q sender %q: %s",
		verb, call.Tool, call.SessionID, call.SenderID, strings.Join(found, ", "))
	// The action is the tool and the rules that fired: the broadcaster folds
	// Events of one action into a series that keeps the first note, so each
	// set of rules gets its own series and none is hidden behind another.
	action := call.Tool
	if action == "" {
		action = "ScanToolResult"
	}
	rules := make([]string, len(f.Findings))
	for i, x := range f.Findings {
		rules[i] = x.Rule
	}
	if len(rules) > 0 {
		action += " " + strings.Join(rules, ",")
	}
	e.recorder.Eventf(regarding, related, eventType, reason, truncate(action, maxAction), "%s", truncate(note, maxNote))
}

// ApprovalRequested records that this gateway asked for a person's approval
// in tca, as an Event on tca and one on the asking policy (related to tca).
func (e *Events) ApprovalRequested(tca *policyv1alpha1.ToolCallApproval, policy hooks.PolicyRef) {
	if !e.limiter.Allow() {
		e.dropped.Add(1)
		return
	}
	spec := &tca.Spec
	note := truncate(fmt.Sprintf("Approval requested for tool %q, sender %q, session %q (%s %s, rule %s): %s",
		spec.Tool, spec.Sender.Username, spec.Session, spec.Policy.Kind, spec.Policy.Name, spec.Policy.Rule, spec.Policy.Reason), maxNote)
	action := truncate(spec.Tool, maxAction)
	related := e.relatedPod()
	e.recorder.Eventf(tca, related, corev1.EventTypeNormal, wire.ReasonToolCallApprovalRequested, action, "%s", note)
	if policy.Kind == "" || policy.Name == "" {
		return
	}
	namespace := policy.Namespace
	if namespace == "" {
		namespace = tca.Namespace
	}
	regarding := &corev1.ObjectReference{
		APIVersion: policyv1alpha1.GroupVersion.String(), Kind: policy.Kind,
		Namespace: namespace, Name: policy.Name, UID: types.UID(policy.UID),
	}
	e.recorder.Eventf(regarding, tca, corev1.EventTypeNormal, wire.ReasonToolCallApprovalRequested, action, "%s", note)
}

// relatedPod is the gateway's pod, the related object of its Events, or nil
// when the gateway does not know its pod.
func (e *Events) relatedPod() runtime.Object {
	if e.pod.Name == "" {
		return nil
	}
	return e.pod
}

// truncate shortens s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Dropped returns how many denials and approval requests the rate limit kept
// from becoming Events.
func (e *Events) Dropped() int64 { return e.dropped.Load() }

// Stop flushes and stops the broadcaster.
func (e *Events) Stop() { e.broadcaster.Shutdown() }
