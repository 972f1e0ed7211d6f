package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks/autonomy"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/plugins"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/audit"
	"github.com/toolhooks/toolhooks/internal/hooks/resultscan"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func meta(ns, name string, createdSec int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Generation: 1,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(createdSec) * time.Second))}
}

func ap(ns, name string, sec int, mutate ...func(*policyv1alpha1.AutonomyPolicySpec)) policyv1alpha1.AutonomyPolicy {
	p := policyv1alpha1.AutonomyPolicy{ObjectMeta: meta(ns, name, sec), Spec: policyv1alpha1.AutonomyPolicySpec{
		Mode: policyv1alpha1.AutonomyFull, ForbiddenPathGlobs: []string{"/workspace/secret*"},
		Workspace: &policyv1alpha1.Workspace{Root: "/workspace"},
	}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

// ctp returns a ContractPolicy in namespace team-a.
func ctp(name string, sec int) policyv1alpha1.ContractPolicy {
	return policyv1alpha1.ContractPolicy{ObjectMeta: meta("team-a", name, sec), Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 10}}
}

// ph returns a PluginHook in namespace team-a, with the timeout the CRD's
// default gives it.
func ph(name string, sec int) policyv1alpha1.PluginHook {
	return policyv1alpha1.PluginHook{ObjectMeta: meta("team-a", name, sec), Spec: policyv1alpha1.PluginHookSpec{
		Timeout:   &metav1.Duration{Duration: 5 * time.Second},
		Events:    []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolAll},
		Transport: policyv1alpha1.PluginTransport{Stdio: &policyv1alpha1.StdioTransport{Command: "node", Args: []string{"plugin.mjs"}}},
	}}
}

// rp returns a ResultPolicy in namespace team-a redacting secrets from read_file.
func rp(name string, sec int) policyv1alpha1.ResultPolicy {
	return policyv1alpha1.ResultPolicy{ObjectMeta: meta("team-a", name, sec), Spec: policyv1alpha1.ResultPolicySpec{
		Tools: []string{"read_file"}, Detectors: []policyv1alpha1.ResultDetector{"secrets"},
	}}
}

func names(cfg *gatewayconfig.Config) []string {
	out := make([]string, len(cfg.Hooks))
	for i, h := range cfg.Hooks {
		out[i] = h.Name
	}
	return out
}

var gw = Gateway{Namespace: "team-a", Labels: map[string]string{policyv1alpha1.GatewayLabel: "main", "tier": "prod"}}

func TestCompileOrdersAuditLogThenKindsThenCreationTimeThenName(t *testing.T) {
	p := PoliciesOf(
		ObjectsOf[policyv1alpha1.ResultPolicy](rp("redact", 0)),
		ObjectsOf[policyv1alpha1.PluginHook](ph("approvals", 1)),
		ObjectsOf[policyv1alpha1.ContractPolicy](ctp("budget-late", 9), ctp("budget", 2)),
		ObjectsOf[policyv1alpha1.AutonomyPolicy](
			ap("team-a", "zeta", 5), ap("team-a", "alpha", 5), ap("team-a", "old", 3),
		),
	)
	cfg, outcomes := Compile(gw, p)
	want := []string{
		"AuditLog",
		"AutonomyPolicy/team-a/old", "AutonomyPolicy/team-a/alpha", "AutonomyPolicy/team-a/zeta",
		"ContractPolicy/team-a/budget", "ContractPolicy/team-a/budget-late",
		"PluginHook/team-a/approvals",
		"ResultPolicy/team-a/redact",
	}
	if got := names(cfg); !slices.Equal(got, want) {
		t.Fatalf("hook order = %v\nwant %v", got, want)
	}
	if len(outcomes) != 7 {
		t.Fatalf("got %d outcomes, want 7", len(outcomes))
	}
	ref := cfg.Hooks[1].Policy
	if ref.Kind != "AutonomyPolicy" || ref.Namespace != "team-a" || ref.Name != "old" || ref.UID != "team-a-old" || ref.Generation != 1 {
		t.Errorf("entry carries policy ref %+v, want kind/namespace/name/uid/generation of team-a/old", ref)
	}
}

func TestCompileIsDeterministicUnderShuffledInputs(t *testing.T) {
	var p Policies
	for i := range 30 {
		p.Add(ObjectsOf(ap("team-a", fmt.Sprintf("ap-%02d", i), i%4))...)
		p.Add(ObjectsOf(ctp(fmt.Sprintf("ctp-%02d", i), i%3))...)
		p.Add(ObjectsOf(ph(fmt.Sprintf("ph-%02d", i), i%5))...)
	}
	first, _ := Compile(gw, p)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		rng.Shuffle(len(p.Of("AutonomyPolicy")), func(i, j int) {
			p.Of("AutonomyPolicy")[i], p.Of("AutonomyPolicy")[j] = p.Of("AutonomyPolicy")[j], p.Of("AutonomyPolicy")[i]
		})
		rng.Shuffle(len(p.Of("ContractPolicy")), func(i, j int) {
			p.Of("ContractPolicy")[i], p.Of("ContractPolicy")[j] = p.Of("ContractPolicy")[j], p.Of("ContractPolicy")[i]
		})
		rng.Shuffle(len(p.Of("PluginHook")), func(i, j int) {
			p.Of("PluginHook")[i], p.Of("PluginHook")[j] = p.Of("PluginHook")[j], p.Of("PluginHook")[i]
		})
		got, _ := Compile(gw, p)
		if got.Revision != first.Revision || !slices.Equal(names(got), names(first)) {
			t.Fatalf("shuffled input gave revision %s (order %v), want %s", got.Revision, names(got)[:4], first.Revision)
		}
	}
}

func TestCompileRevisionChangesWithAnySpecChange(t *testing.T) {
	base := PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](ap("team-a", "coding", 1)))
	cfg0, _ := Compile(gw, base)
	changes := map[string]func(*policyv1alpha1.AutonomyPolicySpec){
		"a new forbidden glob": func(s *policyv1alpha1.AutonomyPolicySpec) {
			s.ForbiddenPathGlobs = append(s.ForbiddenPathGlobs, "**/.env")
		},
		"read-only mode":          func(s *policyv1alpha1.AutonomyPolicySpec) { s.Mode = policyv1alpha1.AutonomyReadOnly },
		"warn enforcement action": func(s *policyv1alpha1.AutonomyPolicySpec) { s.EnforcementAction = policyv1alpha1.EnforcementWarn },
		"a shell allow-list": func(s *policyv1alpha1.AutonomyPolicySpec) {
			s.Shell = &policyv1alpha1.ShellPolicy{Allow: true, AllowedCommands: []string{"git *"}}
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			p := PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](ap("team-a", "coding", 1, change)))
			cfg, _ := Compile(gw, p)
			if cfg.Revision == cfg0.Revision {
				t.Errorf("revision %s unchanged after %s", cfg.Revision, name)
			}
		})
	}
	again, _ := Compile(gw, PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](ap("team-a", "coding", 1))))
	if again.Revision != cfg0.Revision {
		t.Errorf("same inputs gave revision %s, then %s", cfg0.Revision, again.Revision)
	}
}

func TestCompileSelectsByNamespaceAndLabels(t *testing.T) {
	other := ap("team-b", "elsewhere", 1)
	staging := ap("team-a", "staging-only", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
		s.GatewaySelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "staging"}}
	})
	prod := ap("team-a", "prod-only", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
		s.GatewaySelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "canary"}},
		}}
	})
	cfg, outcomes := Compile(gw, PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](other, staging, prod)))
	if got, want := names(cfg), []string{"AuditLog", "AutonomyPolicy/team-a/prod-only"}; !slices.Equal(got, want) {
		t.Fatalf("hooks = %v, want %v", got, want)
	}
	if len(outcomes) != 2 {
		t.Fatalf("outcomes cover %d policies, want the 2 of the gateway's namespace", len(outcomes))
	}
	for _, o := range outcomes {
		if want := o.Policy.Name == "prod-only"; o.Selected != want || o.Err != nil {
			t.Errorf("outcome %s: selected=%v err=%v, want selected=%v and no error", o.Policy.Name, o.Selected, o.Err, want)
		}
	}
}

func TestCompileLeavesOutInvalidPoliciesAndReportsWhy(t *testing.T) {
	cases := []struct {
		name       string
		policies   Policies
		wantReason string
		wantText   string
	}{
		{
			name: "an unclosed glob class is InvalidGlob",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](ap("team-a", "bad", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
				s.ForbiddenPathGlobs = []string{"/workspace/[unclosed"}
			}))),
			wantReason: policyv1alpha1.ReasonInvalidGlob, wantText: "[unclosed",
		},
		{
			name: "a relative workspace root with workspace-only is InvalidPath",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](ap("team-a", "bad", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
				s.Workspace = &policyv1alpha1.Workspace{Root: "workspace", Only: true}
			}))),
			wantReason: policyv1alpha1.ReasonInvalidPath, wantText: "workspace",
		},
		{
			name: "a bad subject glob in a contract is InvalidGlob",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ContractPolicy](func() policyv1alpha1.ContractPolicy {
				c := ctp("bad", 1)
				c.Spec.Subjects = &policyv1alpha1.Subjects{Senders: []string{"bot[-"}}
				return c
			}())),
			wantReason: policyv1alpha1.ReasonInvalidGlob, wantText: "bot[-",
		},
		{
			name: "a bad rate-limit tool glob is InvalidGlob",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ContractPolicy](func() policyv1alpha1.ContractPolicy {
				c := ctp("bad", 1)
				c.Spec.RateLimits = []policyv1alpha1.RateLimit{{Tools: "sk_[", PerSenderPerMinute: 5}}
				return c
			}())),
			wantReason: policyv1alpha1.ReasonInvalidGlob, wantText: "sk_[",
		},
		{
			name: "a plugin timeout over 30s is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.PluginHook](func() policyv1alpha1.PluginHook {
				p := ph("bad", 1)
				p.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
				return p
			}())),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: "timeout",
		},
		{
			name: "a result pattern that is not RE2 is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](func() policyv1alpha1.ResultPolicy {
				r := rp("bad", 1)
				r.Spec.Patterns = []policyv1alpha1.ResultPattern{{Name: "ticket", Regex: "TICKET-(\\d+"}}
				return r
			}())),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: `pattern "ticket"`,
		},
		{
			name: "a result pattern named as a built-in rule is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](func() policyv1alpha1.ResultPolicy {
				r := rp("bad", 1)
				r.Spec.RemoveLines = []policyv1alpha1.ResultPattern{{Name: "jwt", Regex: "token"}}
				return r
			}())),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: "used twice",
		},
		{
			name: "a bad result tool glob is InvalidGlob",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](func() policyv1alpha1.ResultPolicy {
				r := rp("bad", 1)
				r.Spec.Tools = []string{"read_[file"}
				return r
			}())),
			wantReason: policyv1alpha1.ReasonInvalidGlob, wantText: "read_[file",
		},
		{
			name: "a result scan timeout over 30s is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](func() policyv1alpha1.ResultPolicy {
				r := rp("bad", 1)
				r.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
				return r
			}())),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: "timeout",
		},
		{
			name: "a result policy that looks for nothing is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](func() policyv1alpha1.ResultPolicy {
				r := rp("bad", 1)
				r.Spec.Detectors = nil
				return r
			}())),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: "looks for nothing",
		},
		{
			name: "an unknown detector is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](func() policyv1alpha1.ResultPolicy {
				r := rp("bad", 1)
				r.Spec.Detectors = []policyv1alpha1.ResultDetector{"passwords"}
				return r
			}())),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: `detector "passwords"`,
		},
		{
			name: "an invalid gateway selector is InvalidSpec",
			policies: PoliciesOf(ObjectsOf[policyv1alpha1.AutonomyPolicy](ap("team-a", "bad", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
				s.GatewaySelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
			}))),
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantText: "gatewaySelector",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.policies.Add(ObjectsOf(ap("team-a", "good", 0))...)
			cfg, outcomes := Compile(gw, tc.policies)
			if got, want := names(cfg), []string{"AuditLog", "AutonomyPolicy/team-a/good"}; !slices.Equal(got, want) {
				t.Fatalf("hooks = %v, want only the valid policy %v", got, want)
			}
			var bad *Outcome
			for i := range outcomes {
				if outcomes[i].Policy.Name == "bad" {
					bad = &outcomes[i]
				}
			}
			if bad == nil || bad.Err == nil {
				t.Fatalf("no error reported for the invalid policy: %+v", outcomes)
			}
			if got := Reason(bad.Err); got != tc.wantReason {
				t.Errorf("reason = %s (%v), want %s", got, bad.Err, tc.wantReason)
			}
			if !containsFold(bad.Err.Error(), tc.wantText) {
				t.Errorf("message %q does not mention %q", bad.Err, tc.wantText)
			}
		})
	}
}

func TestCompileUsesTheExecutorsOwnValidationMessages(t *testing.T) {
	p := ap("team-a", "bad", 1, func(s *policyv1alpha1.AutonomyPolicySpec) { s.ForbiddenPathGlobs = []string{"/a/[b"} })
	_, err := One(&p)
	if !errors.Is(err, hooks.ErrInvalidGlob) {
		t.Fatalf("One() error = %v, want ErrInvalidGlob", err)
	}
	spec := autonomySpec(Ref(autonomy.KindName, p.ObjectMeta), &policyv1alpha1.AutonomyPolicySpec{
		Workspace: &policyv1alpha1.Workspace{Root: "/workspace"}})
	spec.ForbiddenPathGlobs = []string{"/a/[b"}
	_, _, direct := spec.Build(&hooks.EntryRef{Name: "a"}, &hooks.BuildEnv{Validate: true})
	if direct == nil || direct.Error() != err.Error() {
		t.Errorf("compile message %q differs from the executor's %q", err, direct)
	}
}

func TestPluginServiceReferenceBecomesClusterURL(t *testing.T) {
	p := ph("svc", 1)
	p.Spec.Transport = policyv1alpha1.PluginTransport{HTTP: &policyv1alpha1.HTTPTransport{
		Service: &policyv1alpha1.ServiceReference{Name: "approvals", Port: 8443, Path: "/hook"}, CABundle: "PEM",
	}}
	p.Spec.FailurePolicy = policyv1alpha1.FailurePolicyFail
	h, err := One(&p)
	if err != nil {
		t.Fatal(err)
	}
	if gatewayconfig.SpecAs[*plugins.Spec](h).HTTP.URL != "https://approvals.team-a.svc:8443/hook" || gatewayconfig.SpecAs[*plugins.Spec](h).FailOpen || gatewayconfig.SpecAs[*plugins.Spec](h).TimeoutMillis != 5000 {
		t.Errorf("plugin = %+v / %+v, want https service URL, fail closed, 5000ms", gatewayconfig.SpecAs[*plugins.Spec](h), gatewayconfig.SpecAs[*plugins.Spec](h).HTTP)
	}
	if !gatewayconfig.SpecAs[*plugins.Spec](h).Before || !gatewayconfig.SpecAs[*plugins.Spec](h).After {
		t.Errorf("tool:* must subscribe to both events, got before=%v after=%v", gatewayconfig.SpecAs[*plugins.Spec](h).Before, gatewayconfig.SpecAs[*plugins.Spec](h).After)
	}
}

func TestPluginFailurePolicyDefaultsToFail(t *testing.T) {
	for policy, open := range map[policyv1alpha1.FailurePolicy]bool{
		"":                                 false,
		policyv1alpha1.FailurePolicyFail:   false,
		policyv1alpha1.FailurePolicyIgnore: true,
		"Bogus":                            false,
	} {
		p := ph("p", 1)
		p.Spec.FailurePolicy = policy
		h, err := One(&p)
		if err != nil {
			t.Fatal(err)
		}
		if gatewayconfig.SpecAs[*plugins.Spec](h).FailOpen != open {
			t.Errorf("failurePolicy %q compiled to FailOpen=%v, want %v", policy, gatewayconfig.SpecAs[*plugins.Spec](h).FailOpen, open)
		}
	}
}

func TestAPluginHookWithoutATimeoutDoesNotCompile(t *testing.T) {
	// Defaults are the API server's (and the file loader's) to apply; an
	// object that skipped them is refused rather than given a second default.
	p := ph("p", 1)
	p.Spec.Timeout = nil
	if _, err := One(&p); !errors.Is(err, hooks.ErrInvalidSpec) || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("One() = %v, want an invalid spec naming the timeout", err)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func BenchmarkCompileThousandPolicies(b *testing.B) {
	var p Policies
	for i := range 400 {
		p.Add(ObjectsOf(ap("team-a", fmt.Sprintf("ap-%04d", i), i%60, func(s *policyv1alpha1.AutonomyPolicySpec) {
			s.Shell = &policyv1alpha1.ShellPolicy{Allow: true, AllowedCommands: []string{"git *", "go test *"}}
			s.Tools = &policyv1alpha1.ToolRules{Deny: []string{"delegate_*"}}
		}))...)
	}
	for i := range 400 {
		c := ctp(fmt.Sprintf("ctp-%04d", i), i%60)
		c.Spec.RateLimits = []policyv1alpha1.RateLimit{{Tools: "*", PerSenderPerMinute: 60}}
		p.Add(ObjectsOf(c)...)
	}
	for i := range 200 {
		p.Add(ObjectsOf(ph(fmt.Sprintf("ph-%04d", i), i%60))...)
	}
	b.ReportAllocs()
	for b.Loop() {
		cfg, _ := Compile(gw, p)
		if len(cfg.Hooks) != 1001 {
			b.Fatalf("compiled %d hooks, want 1001", len(cfg.Hooks))
		}
	}
}

// A ServiceAccount caller without a namespace is one of the policy's
// namespace, as in a RoleBinding; both kinds compile the same subjects.
func TestSubjectsDefaultAServiceAccountsNamespaceToThePolicys(t *testing.T) {
	in := &policyv1alpha1.Subjects{Senders: []string{"bot-*"}, Callers: []policyv1alpha1.CallerSubject{
		{Kind: policyv1alpha1.CallerServiceAccount, Name: "coder"},
		{Kind: policyv1alpha1.CallerServiceAccount, Name: "ci", Namespace: "ci"},
		{Kind: policyv1alpha1.CallerGroup, Name: "system:serviceaccounts:agents"},
		{Kind: policyv1alpha1.CallerUser, Name: "alice"},
	}}
	want := hooks.Subjects{Senders: []string{"bot-*"}, Callers: []hooks.CallerSubject{
		{Kind: hooks.CallerServiceAccount, Name: "coder", Namespace: "agents"},
		{Kind: hooks.CallerServiceAccount, Name: "ci", Namespace: "ci"},
		{Kind: hooks.CallerGroup, Name: "system:serviceaccounts:agents"},
		{Kind: hooks.CallerUser, Name: "alice"},
	}}
	a := autonomySpec(Ref(autonomy.KindName, meta("agents", "a", 0)), &policyv1alpha1.AutonomyPolicySpec{Subjects: in})
	c := contractSpec(Ref(contract.KindName, meta("agents", "c", 0)), &policyv1alpha1.ContractPolicySpec{MaxToolCalls: 1, Subjects: in})
	for name, got := range map[string]hooks.Subjects{"autonomy": a.Subjects, "contract": c.Subjects} {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s subjects = %+v, want %+v", name, got, want)
		}
	}
}

func TestResultCompilesToTheScanSpec(t *testing.T) {
	p := rp("scan", 1)
	p.Spec = policyv1alpha1.ResultPolicySpec{
		Tools:     []string{"read_file", "GitHub__*"},
		Subjects:  &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{{Kind: policyv1alpha1.CallerServiceAccount, Name: "agent"}}},
		Detectors: []policyv1alpha1.ResultDetector{"secrets", "email-address"},
		Patterns: []policyv1alpha1.ResultPattern{
			{Name: "ticket", Regex: `TICKET-\d+`},
			{Name: "internal-host", Regex: `[a-z]+\.corp\.example`, Action: policyv1alpha1.ResultWithhold},
		},
		RemoveLines:       []policyv1alpha1.ResultPattern{{Name: "debug", Regex: `^DEBUG `, Action: policyv1alpha1.ResultWarn}},
		RemovePaths:       []policyv1alpha1.ResultPath{{Name: "ssn", Path: "$..ssn", Action: policyv1alpha1.ResultWithhold}},
		Action:            policyv1alpha1.ResultRedact,
		MaxBytes:          1 << 20,
		Timeout:           &metav1.Duration{Duration: 2500 * time.Millisecond},
		EnforcementAction: policyv1alpha1.EnforcementWarn,
	}
	h, err := One(&p)
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != resultscan.KindName || h.Name != "ResultPolicy/team-a/scan" || h.Action != hooks.ActionWarn || gatewayconfig.SpecAs[*resultscan.Spec](h) == nil {
		t.Fatalf("hook = %+v, want a warn-mode ResultPolicy entry named ResultPolicy/team-a/scan", h)
	}
	r := gatewayconfig.SpecAs[*resultscan.Spec](h)
	if !slices.Equal(r.Tools, []string{"read_file", "GitHub__*"}) || !slices.Equal(r.Detectors, []string{"secrets", "email-address"}) {
		t.Errorf("tools %v, detectors %v", r.Tools, r.Detectors)
	}
	if len(r.Patterns) != 2 || r.Patterns[1].Name != "internal-host" || r.Patterns[1].Action != "Withhold" || r.Patterns[0].Action != "" {
		t.Errorf("patterns = %+v", r.Patterns)
	}
	if len(r.RemoveLines) != 1 || r.RemoveLines[0].Regex != `^DEBUG ` || r.RemoveLines[0].Action != "Warn" {
		t.Errorf("removeLines = %+v", r.RemoveLines)
	}
	if len(r.RemovePaths) != 1 || r.RemovePaths[0] != (resultscan.PathSpec{Name: "ssn", Path: "$..ssn", Action: "Withhold"}) {
		t.Errorf("removePaths = %+v", r.RemovePaths)
	}
	if r.Action != "Redact" || r.MaxBytes != 1<<20 || r.TimeoutMillis != 2500 {
		t.Errorf("action %q, maxBytes %d, timeoutMillis %d; want Redact, %d, 2500", r.Action, r.MaxBytes, r.TimeoutMillis, 1<<20)
	}
	if c := r.Subjects.Callers; len(c) != 1 || c[0].Namespace != "team-a" {
		t.Errorf("callers = %+v, want the ServiceAccount in the policy's namespace", c)
	}
}

func TestAResultPolicyWithoutTimeoutOrMaxBytesLeavesTheGatewayDefaults(t *testing.T) {
	p := rp("defaults", 1)
	h, err := One(&p)
	if err != nil {
		t.Fatal(err)
	}
	if gatewayconfig.SpecAs[*resultscan.Spec](h).TimeoutMillis != 0 || gatewayconfig.SpecAs[*resultscan.Spec](h).MaxBytes != 0 || h.Action != hooks.ActionDeny {
		t.Errorf("timeoutMillis %d, maxBytes %d, action %q; want 0, 0 (the gateway's defaults) and Deny",
			gatewayconfig.SpecAs[*resultscan.Spec](h).TimeoutMillis, gatewayconfig.SpecAs[*resultscan.Spec](h).MaxBytes, h.Action)
	}
	p.Spec.Timeout = &metav1.Duration{}
	if _, err := One(&p); !errors.Is(err, hooks.ErrInvalidSpec) {
		t.Errorf("a zero timeout compiled (err %v): it would silently mean the default", err)
	}
}

// TestACompiledResultPolicyRedactsOnTheGateway builds the compiled list as a
// gateway does and runs the ResultPolicy's filter on a tool's output.
func TestACompiledResultPolicyRedactsOnTheGateway(t *testing.T) {
	p := rp("redact", 1)
	p.Spec.Patterns = []policyv1alpha1.ResultPattern{{Name: "ticket", Regex: `TICKET-\d+`}}
	cfg, outcomes := Compile(gw, PoliciesOf(ObjectsOf[policyv1alpha1.ResultPolicy](p)))
	if len(outcomes) != 1 || outcomes[0].Err != nil || !outcomes[0].Selected {
		t.Fatalf("outcomes = %+v", outcomes)
	}
	if cfg.DecidesCalls() {
		t.Error("a list of the AuditLog and a result policy decides calls; it must not allow every call")
	}
	entries, err := gatewayconfig.Build(cfg, gatewayconfig.BuildOptions{Audit: &audit.Memory{}})
	if err != nil {
		t.Fatal(err)
	}
	var f hooks.ResultFilter
	for _, e := range entries {
		if rf, ok := e.Hook.(hooks.ResultFilter); ok {
			f = rf
		}
	}
	if f == nil {
		t.Fatalf("no result filter among %d entries", len(entries))
	}
	key := "AKIA" + strings.Repeat("Q", 16)
	out, err := f.FilterResult(t.Context(), &hooks.Call{Tool: "READ_FILE"}, "key="+key+" see TICKET-42\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "key=[REDACTED:aws-access-key-id] see [REDACTED:ticket]\n"; out.Output != want || out.Withhold {
		t.Errorf("filtered output %q (withhold %v), want %q", out.Output, out.Withhold, want)
	}
	out, err = f.FilterResult(t.Context(), &hooks.Call{Tool: "write_file"}, key)
	if err != nil || out.Scanned {
		t.Errorf("an unselected tool's result was scanned: %+v, %v", out, err)
	}
}

// TestContractAskAfterCalls checks that ask.afterCalls reaches the hook and
// that one the budget never lets a session reach is linted.
func TestContractAskAfterCalls(t *testing.T) {
	after := int32(3)
	p := &policyv1alpha1.ContractPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
		Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 10, Ask: &policyv1alpha1.ContractAsk{AfterCalls: &after}}}
	h, err := One(p)
	if err != nil {
		t.Fatal(err)
	}
	if spec := gatewayconfig.SpecAs[*contract.Spec](h); spec == nil || spec.Ask == nil || spec.Ask.AfterCalls != 3 || len(spec.Ask.Tools) != 0 {
		t.Fatalf("compiled contract = %+v", gatewayconfig.SpecAs[*contract.Spec](h))
	}
	if w := Lint(p); w != nil {
		t.Errorf("Lint = %q, want none", w)
	}
	p.Spec.MaxToolCalls = 3
	if w := Lint(p); len(w) != 1 || !strings.Contains(w[0], "ask.afterCalls (3) is not below maxToolCalls (3)") {
		t.Errorf("Lint = %q, want the afterCalls warning", w)
	}
}

func TestProtectedPathsCompileAndAnUnknownLiftIsInvalid(t *testing.T) {
	ok := ap("team-a", "ok", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
		s.ProtectedPaths = &policyv1alpha1.ProtectedPaths{Add: []string{"deploy/**"}, Lift: []string{".envrc"}, AllowGitPrograms: true}
	})
	h, err := One(&ok)
	if err != nil {
		t.Fatal(err)
	}
	if pp := gatewayconfig.SpecAs[*autonomy.Config](h).ProtectedPaths; pp == nil || !slices.Equal(pp.Add, []string{"deploy/**"}) ||
		!slices.Equal(pp.Lift, []string{".envrc"}) || !pp.AllowGitPrograms {
		t.Errorf("compiled protectedPaths = %+v", gatewayconfig.SpecAs[*autonomy.Config](h).ProtectedPaths)
	}
	bad := ap("team-a", "bad", 1, func(s *policyv1alpha1.AutonomyPolicySpec) {
		s.ProtectedPaths = &policyv1alpha1.ProtectedPaths{Lift: []string{".git/objects"}}
	})
	if _, err := One(&bad); !errors.Is(err, hooks.ErrInvalidSpec) || !strings.Contains(err.Error(), `".git/objects"`) {
		t.Errorf("One() error = %v, want ErrInvalidSpec naming the entry", err)
	}
}
