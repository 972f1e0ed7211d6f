package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// PolicyKind is one of the policy kinds denials are recorded on.
type PolicyKind struct {
	// Kind is the API kind, e.g. AutonomyPolicy.
	Kind string
	// Resource is the plural resource name, e.g. autonomypolicies.
	Resource string
	// Short is the short name, e.g. ap.
	Short string
}

// PolicyKinds are the kinds the gateway records denials on.
var PolicyKinds = func() []PolicyKind {
	out := make([]PolicyKind, len(compile.Kinds))
	for i, k := range compile.Kinds {
		out[i] = PolicyKind{Kind: string(k.Kind), Resource: k.Resource, Short: k.Short}
	}
	return out
}()

// ParsePolicyKind resolves a kind as kubectl would: the kind, its singular
// or plural resource name or its short name, in any case, optionally
// followed by ".policy.toolhooks.dev" (or ".v1alpha1.policy.toolhooks.dev").
func ParsePolicyKind(s string) (PolicyKind, error) {
	base := strings.ToLower(s)
	gv := policyv1alpha1.GroupVersion
	for _, suffix := range []string{"." + gv.Version + "." + gv.Group, "." + gv.Group} {
		if b, ok := strings.CutSuffix(base, suffix); ok {
			base = b
			break
		}
	}
	for _, k := range PolicyKinds {
		if base == strings.ToLower(k.Kind) || base == k.Resource || base == k.Short {
			return k, nil
		}
	}
	return PolicyKind{}, fmt.Errorf("%w: unknown kind %q: denials are recorded on "+
		"autonomypolicy (ap), contractpolicy (ctp), pluginhook (ph), resultpolicy (rp)",
		ErrBadInput, s)
}

// DenialQuery selects denials.
type DenialQuery struct {
	// Namespace is the policies' namespace (required).
	Namespace string
	// Kind, when set, restricts the denials to policies of this kind.
	Kind *PolicyKind
	// Name, when set (with Kind), restricts them to this policy, which must exist.
	Name string
	// Since, when positive, keeps the denials last seen within it.
	Since time.Duration
	// Limit, when positive, keeps the most recent Limit denials.
	Limit int
	// Now is the time Since counts back from (default time.Now()).
	Now time.Time
}

// DenialRecord is one denial Event: client-go aggregates repeated denials of
// one policy from one gateway pod into a series, so Count may exceed 1 and
// then Tool, Session, Sender, Rule and Reason are those of the first denial
// of the series.
type DenialRecord struct {
	// LastSeen is when the denial (or the series' last) was observed.
	LastSeen time.Time `json:"lastSeen"`
	// Count is how many denials the Event stands for.
	Count int32 `json:"count"`
	// Action is Denied or Warned (a warn-mode would-deny).
	Action string `json:"action"`
	// Policy is the policy that decided.
	Policy PolicyObject `json:"policy"`
	// Gateway is the gateway pod that decided (namespace/name when the
	// pod's namespace differs from the policy's).
	Gateway string `json:"gateway,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Session string `json:"session,omitempty"`
	Sender  string `json:"sender,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason"`
}

// PolicyObject names a policy object.
type PolicyObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ListDenials returns the denial Events matching q, most recent first. A
// query naming a policy that does not exist is an error (found through dyn).
func ListDenials(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, q DenialQuery) ([]DenialRecord, error) {
	if q.Namespace == "" {
		return nil, fmt.Errorf("%w: a namespace is required", ErrBadInput)
	}
	if q.Name != "" && q.Kind == nil {
		return nil, fmt.Errorf("%w: a policy name needs its kind (KIND/NAME)", ErrBadInput)
	}
	sel := fields.Set{}
	if q.Kind != nil {
		sel["regarding.kind"] = q.Kind.Kind
	}
	if q.Name != "" {
		gvr := policyv1alpha1.GroupVersion.WithResource(q.Kind.Resource)
		if _, err := dyn.Resource(gvr).Namespace(q.Namespace).Get(ctx, q.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%s %q not found in namespace %q", strings.ToLower(q.Kind.Kind), q.Name, q.Namespace)
			}
			return nil, fmt.Errorf("getting %s %s/%s: %w", strings.ToLower(q.Kind.Kind), q.Namespace, q.Name, err)
		}
		sel["regarding.name"] = q.Name
	}
	opts := metav1.ListOptions{FieldSelector: sel.AsSelector().String()}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	var out []DenialRecord
	for {
		list, err := cs.EventsV1().Events(q.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing events in namespace %q: %w", q.Namespace, err)
		}
		for i := range list.Items {
			ev := &list.Items[i]
			r, ok := denialOf(ev)
			if !ok || (q.Since > 0 && r.LastSeen.Before(now.Add(-q.Since))) {
				continue
			}
			out = append(out, r)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.SortStableFunc(out, func(a, b DenialRecord) int {
		if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
			return c
		}
		return cmp.Compare(a.Policy.Kind+"/"+a.Policy.Name, b.Policy.Kind+"/"+b.Policy.Name)
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// denialOf converts a gateway denial Event, reporting false for other Events.
func denialOf(ev *eventsv1.Event) (DenialRecord, bool) {
	var action string
	switch ev.Reason {
	case wire.ReasonToolCallDenied:
		action = "Denied"
	case wire.ReasonToolCallWarned:
		action = "Warned"
	default:
		return DenialRecord{}, false
	}
	gv, err := schema.ParseGroupVersion(ev.Regarding.APIVersion)
	if err != nil || gv.Group != policyv1alpha1.GroupVersion.Group {
		return DenialRecord{}, false
	}
	r := DenialRecord{
		LastSeen: lastSeen(ev), Count: 1, Action: action,
		Policy: PolicyObject{Kind: ev.Regarding.Kind, Namespace: ev.Regarding.Namespace, Name: ev.Regarding.Name},
	}
	if r.Policy.Namespace == "" {
		r.Policy.Namespace = ev.Namespace
	}
	if ev.Series != nil && ev.Series.Count > 0 {
		r.Count = ev.Series.Count
	} else if ev.DeprecatedCount > 1 {
		r.Count = ev.DeprecatedCount
	}
	if rel := ev.Related; rel != nil && rel.Name != "" {
		r.Gateway = rel.Name
		if rel.Namespace != "" && rel.Namespace != r.Policy.Namespace {
			r.Gateway = rel.Namespace + "/" + rel.Name
		}
	}
	n, ok := parseNote(ev.Note)
	if !ok {
		r.Reason = ev.Note
		return r, true
	}
	r.Tool, r.Session, r.Sender, r.Rule, r.Reason = n.tool, n.session, n.sender, n.rule, n.reason
	return r, true
}

// lastSeen is the most recent time an Event records.
func lastSeen(ev *eventsv1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.DeprecatedLastTimestamp.IsZero():
		return ev.DeprecatedLastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

type note struct{ tool, session, sender, rule, reason string }

var errNote = errors.New("not a gateway denial note")

// parseNote reads the note the gateway writes:
// `Denied tool "T" for session "S" sender "U" (rule R): REASON`
// (or "Would deny tool ..." for warn mode).
func parseNote(s string) (note, bool) {
	var n note
	rest, ok := strings.CutPrefix(s, "Denied tool ")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "Would deny tool "); !ok {
			return n, false
		}
	}
	var err error
	if n.tool, rest, err = quoted(rest, " for session "); err != nil {
		return n, false
	}
	if n.session, rest, err = quoted(rest, " sender "); err != nil {
		return n, false
	}
	if n.sender, rest, err = quoted(rest, " (rule "); err != nil {
		return n, false
	}
	rule, reason, ok := strings.Cut(rest, "): ")
	if !ok {
		return n, false
	}
	n.rule, n.reason = rule, reason
	return n, true
}

// quoted reads a Go-quoted string at the start of s followed by sep.
func quoted(s, sep string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", errNote
	}
	v, err := strconv.Unquote(q)
	if err != nil {
		return "", "", errNote
	}
	rest, ok := strings.CutPrefix(s[len(q):], sep)
	if !ok {
		return "", "", errNote
	}
	return v, rest, nil
}
