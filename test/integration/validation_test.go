package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
)

// validationCase is one object sent to the API server and what it must answer.
type validationCase struct {
	name string
	obj  client.Object
	// wantErr is a substring of the rejection (field path and message); empty
	// means the object must be accepted.
	wantErr string
	// check, for accepted objects, inspects the object as stored (defaults).
	check func(t *testing.T, stored client.Object)
}

// runValidationCases creates each case's object and compares the answer.
func runValidationCases(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := testEnv.Client.Create(t.Context(), tc.obj)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Create() = %v, want the object accepted", err)
				}
				if tc.check != nil {
					tc.check(t, tc.obj)
				}
				return
			}
			if err == nil {
				t.Fatalf("Create() accepted the object, want it rejected with %q", tc.wantErr)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create() = %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Create() = %v\nwant the message to contain %q", err, tc.wantErr)
			}
		})
	}
}

// validationMeta names every validation object uniquely in the default namespace.
func validationMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{GenerateName: "validation-", Namespace: "default"}
}

func autonomyPolicy(spec policyv1alpha1.AutonomyPolicySpec) *policyv1alpha1.AutonomyPolicy {
	return &policyv1alpha1.AutonomyPolicy{ObjectMeta: validationMeta(), Spec: spec}
}

// contractPolicy returns a ContractPolicy with a budget of 10 calls changed by mutate.
func contractPolicy(mutate func(spec *policyv1alpha1.ContractPolicySpec)) *policyv1alpha1.ContractPolicy {
	p := &policyv1alpha1.ContractPolicy{ObjectMeta: validationMeta(), Spec: policyv1alpha1.ContractPolicySpec{MaxToolCalls: 10}}
	mutate(&p.Spec)
	return p
}

// pluginHook returns a valid stdio PluginHook on tool:before changed by mutate.
func pluginHook(mutate func(spec *policyv1alpha1.PluginHookSpec)) *policyv1alpha1.PluginHook {
	p := &policyv1alpha1.PluginHook{ObjectMeta: validationMeta(), Spec: policyv1alpha1.PluginHookSpec{
		Events:    []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolBefore},
		Transport: policyv1alpha1.PluginTransport{Stdio: &policyv1alpha1.StdioTransport{Command: "node", Args: []string{"plugin.js"}}},
	}}
	mutate(&p.Spec)
	return p
}

// httpPlugin returns a valid PluginHook whose transport is http.
func httpPlugin(transport policyv1alpha1.HTTPTransport) *policyv1alpha1.PluginHook {
	return pluginHook(func(s *policyv1alpha1.PluginHookSpec) {
		s.Transport = policyv1alpha1.PluginTransport{HTTP: &transport}
	})
}

func timeout(d time.Duration) func(*policyv1alpha1.PluginHookSpec) {
	return func(s *policyv1alpha1.PluginHookSpec) { s.Timeout = &metav1.Duration{Duration: d} }
}

func stdioEnv(name string) func(*policyv1alpha1.PluginHookSpec) {
	return func(s *policyv1alpha1.PluginHookSpec) {
		s.Transport.Stdio.Env = []policyv1alpha1.EnvVar{{Name: name, Value: "1"}}
	}
}

// rawTimeoutPlugin returns a valid PluginHook as an unstructured object whose
// spec.timeout is raw, a string the typed client could not send.
func rawTimeoutPlugin(t *testing.T, raw string) client.Object {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pluginHook(func(*policyv1alpha1.PluginHookSpec) {}))
	if err != nil {
		t.Fatalf("Converting a PluginHook to unstructured: %v", err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(policyv1alpha1.GroupVersion.WithKind("PluginHook"))
	if err := unstructured.SetNestedField(u.Object, raw, "spec", "timeout"); err != nil {
		t.Fatalf("Setting spec.timeout: %v", err)
	}
	return u
}

func TestAutonomyPolicyValidation(t *testing.T) {
	type spec = policyv1alpha1.AutonomyPolicySpec
	runValidationCases(t, []validationCase{
		{
			name: "an empty spec is accepted and defaults to mode Full and enforcementAction Deny",
			obj:  autonomyPolicy(spec{}),
			check: func(t *testing.T, stored client.Object) {
				s := stored.(*policyv1alpha1.AutonomyPolicy).Spec
				if s.Mode != policyv1alpha1.AutonomyFull || s.EnforcementAction != policyv1alpha1.EnforcementDeny {
					t.Errorf("Defaults = mode %q enforcementAction %q, want Full and Deny", s.Mode, s.EnforcementAction)
				}
			},
		},
		{
			name: "workspace.only with an absolute root is accepted",
			obj:  autonomyPolicy(spec{Workspace: &policyv1alpha1.Workspace{Root: "/workspace", Only: true}}),
		},
		{
			name:    "workspace.only with a relative root is rejected",
			obj:     autonomyPolicy(spec{Workspace: &policyv1alpha1.Workspace{Root: "work", Only: true}}),
			wantErr: `spec.workspace: Invalid value: workspace.only needs an absolute workspace.root`,
		},
		{
			name: "a relative root without workspace.only is accepted",
			obj:  autonomyPolicy(spec{Workspace: &policyv1alpha1.Workspace{Root: "work"}}),
		},
		{
			name:    "an empty workspace root is rejected",
			obj:     autonomyPolicy(spec{Workspace: &policyv1alpha1.Workspace{Root: ""}}),
			wantErr: "spec.workspace.root in body should be at least 1 chars long",
		},
		{
			name: "a workspace root of 4096 bytes is accepted",
			obj:  autonomyPolicy(spec{Workspace: &policyv1alpha1.Workspace{Root: "/" + strings.Repeat("a", 4095), Only: true}}),
		},
		{
			name:    "a workspace root longer than 4096 bytes is rejected",
			obj:     autonomyPolicy(spec{Workspace: &policyv1alpha1.Workspace{Root: "/" + strings.Repeat("a", 4096), Only: true}}),
			wantErr: "spec.workspace.root: Too long: may not be more than 4096 bytes",
		},
		{
			name: "shell.allowedCommands with shell.allow is accepted",
			obj:  autonomyPolicy(spec{Shell: &policyv1alpha1.ShellPolicy{Allow: true, AllowedCommands: []string{"git *"}}}),
		},
		{
			name:    "shell.allowedCommands without shell.allow is rejected",
			obj:     autonomyPolicy(spec{Shell: &policyv1alpha1.ShellPolicy{AllowedCommands: []string{"git *"}}}),
			wantErr: `spec.shell: Invalid value: shell.allowedCommands has no effect unless shell.allow is true`,
		},
		{
			name: "shell.allow without allowedCommands is accepted",
			obj:  autonomyPolicy(spec{Shell: &policyv1alpha1.ShellPolicy{Allow: true}}),
		},
		{
			name: "mode Full is accepted",
			obj:  autonomyPolicy(spec{Mode: policyv1alpha1.AutonomyFull}),
		},
		{
			name: "mode Supervised is accepted",
			obj:  autonomyPolicy(spec{Mode: policyv1alpha1.AutonomySupervised}),
		},
		{
			name: "mode ReadOnly is accepted",
			obj:  autonomyPolicy(spec{Mode: policyv1alpha1.AutonomyReadOnly}),
		},
		{
			name:    "a lower-case mode is rejected",
			obj:     autonomyPolicy(spec{Mode: "readonly"}),
			wantErr: `spec.mode: Unsupported value: "readonly": supported values: "Full", "Supervised", "ReadOnly"`,
		},
		{
			name: "enforcementAction Warn is accepted",
			obj:  autonomyPolicy(spec{EnforcementAction: policyv1alpha1.EnforcementWarn}),
		},
		{
			name:    "an unknown enforcementAction is rejected",
			obj:     autonomyPolicy(spec{EnforcementAction: "Block"}),
			wantErr: `spec.enforcementAction: Unsupported value: "Block": supported values: "Deny", "Warn"`,
		},
		{
			name: "a tool's pathArguments with one key is accepted",
			obj: autonomyPolicy(spec{Tools: &policyv1alpha1.ToolRules{PathArguments: []policyv1alpha1.ToolPathArguments{
				{Tool: "read_file", Keys: []string{"path"}},
			}}}),
		},
		{
			name: "a tool's pathArguments without keys is rejected",
			obj: autonomyPolicy(spec{Tools: &policyv1alpha1.ToolRules{PathArguments: []policyv1alpha1.ToolPathArguments{
				{Tool: "read_file", Keys: []string{}},
			}}}),
			wantErr: "spec.tools.pathArguments[0].keys in body should have at least 1 items",
		},
		{
			name: "two pathArguments entries for the same tool are rejected",
			obj: autonomyPolicy(spec{Tools: &policyv1alpha1.ToolRules{PathArguments: []policyv1alpha1.ToolPathArguments{
				{Tool: "read_file", Keys: []string{"path"}},
				{Tool: "read_file", Keys: []string{"file"}},
			}}}),
			wantErr: "spec.tools.pathArguments[1]: Duplicate value:",
		},
		{
			name:    "a repeated readOnly tool name is rejected",
			obj:     autonomyPolicy(spec{Tools: &policyv1alpha1.ToolRules{ReadOnly: []string{"search", "search"}}}),
			wantErr: `spec.tools.readOnly[1]: Duplicate value: "search"`,
		},
		{
			name: "callers naming a ServiceAccount, a User and a Group are accepted",
			obj: autonomyPolicy(spec{Subjects: &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{
				{Kind: policyv1alpha1.CallerServiceAccount, Name: "coding-agent", Namespace: "agents"},
				{Kind: policyv1alpha1.CallerServiceAccount, Name: "local-agent"},
				{Kind: policyv1alpha1.CallerUser, Name: "alice@example.com"},
				{Kind: policyv1alpha1.CallerGroup, Name: "system:serviceaccounts:agents"},
			}}}),
		},
		{
			name: "a User caller with a namespace is rejected",
			obj: autonomyPolicy(spec{Subjects: &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{
				{Kind: policyv1alpha1.CallerUser, Name: "alice", Namespace: "agents"},
			}}}),
			wantErr: "spec.subjects.callers[0]: Invalid value: namespace is only for kind ServiceAccount",
		},
		{
			name: "a Group caller with a namespace is rejected",
			obj: autonomyPolicy(spec{Subjects: &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{
				{Kind: policyv1alpha1.CallerGroup, Name: "team"}, {Kind: policyv1alpha1.CallerGroup, Name: "ops", Namespace: "agents"},
			}}}),
			wantErr: "spec.subjects.callers[1]: Invalid value: namespace is only for kind ServiceAccount",
		},
		{
			name: "a caller of an unknown kind is rejected",
			obj: autonomyPolicy(spec{Subjects: &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{
				{Kind: "Role", Name: "admin"},
			}}}),
			wantErr: `spec.subjects.callers[0].kind: Unsupported value: "Role"`,
		},
		{
			name: "a caller without a name is rejected",
			obj: autonomyPolicy(spec{Subjects: &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{
				{Kind: policyv1alpha1.CallerUser},
			}}}),
			wantErr: "spec.subjects.callers[0].name in body should be at least 1 chars long",
		},
		{
			name: "more than 64 callers are rejected",
			obj: autonomyPolicy(spec{Subjects: &policyv1alpha1.Subjects{Callers: slices.Repeat([]policyv1alpha1.CallerSubject{
				{Kind: policyv1alpha1.CallerUser, Name: "alice"},
			}, 65)}}),
			wantErr: "spec.subjects.callers: Too many: 65: must have at most 64 items",
		},
		{
			name: "protectedPaths that add globs, lift default entries and allow git's programs are accepted",
			obj: autonomyPolicy(spec{ProtectedPaths: &policyv1alpha1.ProtectedPaths{
				Add: []string{"deploy/**", "Makefile"}, Lift: []string{".envrc", ".git/config"}, AllowGitPrograms: true}}),
		},
		{
			name:    "protectedPaths naming the same path in add and lift are rejected",
			obj:     autonomyPolicy(spec{ProtectedPaths: &policyv1alpha1.ProtectedPaths{Add: []string{".envrc"}, Lift: []string{".envrc"}}}),
			wantErr: "spec.protectedPaths: Invalid value: protectedPaths names the same path in add and lift",
		},
		{
			name:    "an empty protectedPaths.add glob is rejected",
			obj:     autonomyPolicy(spec{ProtectedPaths: &policyv1alpha1.ProtectedPaths{Add: []string{""}}}),
			wantErr: "spec.protectedPaths.add[0] in body should be at least 1 chars long",
		},
		{
			name:    "more than 64 protectedPaths.lift names are rejected",
			obj:     autonomyPolicy(spec{ProtectedPaths: &policyv1alpha1.ProtectedPaths{Lift: slices.Repeat([]string{".envrc"}, 65)}}),
			wantErr: "spec.protectedPaths.lift: Too many: 65: must have at most 64 items",
		},
		{
			name: "256 forbiddenPathGlobs are accepted",
			obj:  autonomyPolicy(spec{ForbiddenPathGlobs: slices.Repeat([]string{"**/.env"}, 256)}),
		},
		{
			name:    "more than 256 forbiddenPathGlobs are rejected",
			obj:     autonomyPolicy(spec{ForbiddenPathGlobs: slices.Repeat([]string{"**/.env"}, 257)}),
			wantErr: "spec.forbiddenPathGlobs: Too many: 257: must have at most 256 items",
		},
	})
}

func TestContractPolicyValidation(t *testing.T) {
	type spec = policyv1alpha1.ContractPolicySpec
	const needsOne = `spec: Invalid value: a contract needs at least one of maxToolCalls, maxToolCallsPerSender, scopedCapabilities, allowedPaths, rateLimits or ask`
	subjectsOnly := func(s *spec) {
		*s = spec{Subjects: &policyv1alpha1.Subjects{Channels: []string{"slack"}}}
	}
	runValidationCases(t, []validationCase{
		{
			name: "a contract binding a ServiceAccount caller is accepted",
			obj: contractPolicy(func(s *spec) {
				s.Subjects = &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{{Kind: policyv1alpha1.CallerServiceAccount, Name: "coding-agent"}}}
			}),
		},
		{
			name: "a contract binding a User caller with a namespace is rejected",
			obj: contractPolicy(func(s *spec) {
				s.Subjects = &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{{Kind: policyv1alpha1.CallerUser, Name: "bob", Namespace: "agents"}}}
			}),
			wantErr: "spec.subjects.callers[0]: Invalid value: namespace is only for kind ServiceAccount",
		},
		{
			name: "a contract caller of an unknown kind is rejected",
			obj: contractPolicy(func(s *spec) {
				s.Subjects = &policyv1alpha1.Subjects{Callers: []policyv1alpha1.CallerSubject{{Kind: "serviceaccount", Name: "x"}}}
			}),
			wantErr: `spec.subjects.callers[0].kind: Unsupported value: "serviceaccount"`,
		},
		{
			name: "a budget alone is accepted and enforcementAction defaults to Deny",
			obj:  contractPolicy(func(*spec) {}),
			check: func(t *testing.T, stored client.Object) {
				if got := stored.(*policyv1alpha1.ContractPolicy).Spec.EnforcementAction; got != policyv1alpha1.EnforcementDeny {
					t.Errorf("enforcementAction = %q, want Deny", got)
				}
			},
		},
		{
			name: "scopedCapabilities alone are accepted",
			obj: contractPolicy(func(s *spec) {
				*s = spec{ScopedCapabilities: []policyv1alpha1.ScopedCapability{{Tool: "read_file", AllowedPaths: []string{"/workspace"}}}}
			}),
		},
		{
			name: "allowedPaths alone are accepted",
			obj:  contractPolicy(func(s *spec) { *s = spec{AllowedPaths: []string{"/workspace"}} }),
		},
		{
			name: "rateLimits alone are accepted",
			obj: contractPolicy(func(s *spec) {
				*s = spec{RateLimits: []policyv1alpha1.RateLimit{{Tools: "*", PerSenderPerMinute: 10}}}
			}),
		},
		{
			name:    "a contract with subjects and nothing to enforce is rejected",
			obj:     contractPolicy(subjectsOnly),
			wantErr: needsOne,
		},
		{
			name:    "an empty spec is rejected",
			obj:     contractPolicy(func(s *spec) { *s = spec{} }),
			wantErr: needsOne,
		},
		{
			name: "a contract whose only grant list is empty is rejected",
			obj: contractPolicy(func(s *spec) {
				*s = spec{ScopedCapabilities: []policyv1alpha1.ScopedCapability{}, RateLimits: []policyv1alpha1.RateLimit{}}
			}),
			wantErr: needsOne,
		},
		{
			name:    "a negative maxToolCalls is rejected",
			obj:     contractPolicy(func(s *spec) { s.MaxToolCalls = -1; s.AllowedPaths = []string{"/workspace"} }),
			wantErr: "spec.maxToolCalls in body should be greater than or equal to 0",
		},
		{
			name: "maxToolCalls of 10000000 is accepted",
			obj:  contractPolicy(func(s *spec) { s.MaxToolCalls = 10_000_000 }),
		},
		{
			name:    "maxToolCalls above 10000000 is rejected",
			obj:     contractPolicy(func(s *spec) { s.MaxToolCalls = 10_000_001 }),
			wantErr: "spec.maxToolCalls in body should be less than or equal to 10000000",
		},
		{
			name: "maxToolCallsPerSender alone is accepted",
			obj: contractPolicy(func(s *spec) {
				*s = spec{MaxToolCallsPerSender: &policyv1alpha1.SenderBudget{Calls: 100, Window: metav1.Duration{Duration: 24 * time.Hour}}}
			}),
		},
		{
			name: "a maxToolCallsPerSender window under a minute is rejected",
			obj: contractPolicy(func(s *spec) {
				s.MaxToolCallsPerSender = &policyv1alpha1.SenderBudget{Calls: 100, Window: metav1.Duration{Duration: 30 * time.Second}}
			}),
			wantErr: "window must be between 1m and 720h",
		},
		{
			name: "a maxToolCallsPerSender of no calls is rejected",
			obj: contractPolicy(func(s *spec) {
				s.MaxToolCallsPerSender = &policyv1alpha1.SenderBudget{Calls: 0, Window: metav1.Duration{Duration: time.Hour}}
			}),
			wantErr: "spec.maxToolCallsPerSender.calls in body should be greater than or equal to 1",
		},
		{
			name: "perSenderPerMinute of 1 is accepted",
			obj: contractPolicy(func(s *spec) {
				s.RateLimits = []policyv1alpha1.RateLimit{{Tools: "shell", PerSenderPerMinute: 1}}
			}),
		},
		{
			name: "perSenderPerMinute of 0 is rejected",
			obj: contractPolicy(func(s *spec) {
				s.RateLimits = []policyv1alpha1.RateLimit{{Tools: "shell", PerSenderPerMinute: 0}}
			}),
			wantErr: "spec.rateLimits[0].perSenderPerMinute in body should be greater than or equal to 1",
		},
		{
			name: "perSenderPerMinute of 100000 is accepted",
			obj: contractPolicy(func(s *spec) {
				s.RateLimits = []policyv1alpha1.RateLimit{{Tools: "shell", PerSenderPerMinute: 100_000}}
			}),
		},
		{
			name: "perSenderPerMinute above 100000 is rejected",
			obj: contractPolicy(func(s *spec) {
				s.RateLimits = []policyv1alpha1.RateLimit{{Tools: "shell", PerSenderPerMinute: 100_001}}
			}),
			wantErr: "spec.rateLimits[0].perSenderPerMinute in body should be less than or equal to 100000",
		},
		{
			name: "a rate limit without a tools glob is rejected",
			obj: contractPolicy(func(s *spec) {
				s.RateLimits = []policyv1alpha1.RateLimit{{Tools: "", PerSenderPerMinute: 5}}
			}),
			wantErr: "spec.rateLimits[0].tools in body should be at least 1 chars long",
		},
		{
			name: "scopedCapabilities for two different tools are accepted",
			obj: contractPolicy(func(s *spec) {
				s.ScopedCapabilities = []policyv1alpha1.ScopedCapability{{Tool: "read_file"}, {Tool: "write_file"}}
			}),
		},
		{
			name: "two scopedCapabilities for the same tool are rejected",
			obj: contractPolicy(func(s *spec) {
				s.ScopedCapabilities = []policyv1alpha1.ScopedCapability{{Tool: "read_file"}, {Tool: "read_file", AllowedPaths: []string{"/tmp"}}}
			}),
			wantErr: "spec.scopedCapabilities[1]: Duplicate value:",
		},
		{
			name: "enforcementAction Warn is accepted",
			obj:  contractPolicy(func(s *spec) { s.EnforcementAction = policyv1alpha1.EnforcementWarn }),
		},
		{
			name:    "a lower-case enforcementAction is rejected",
			obj:     contractPolicy(func(s *spec) { s.EnforcementAction = "warn" }),
			wantErr: `spec.enforcementAction: Unsupported value: "warn": supported values: "Deny", "Warn"`,
		},
	})
}

func TestPluginHookValidation(t *testing.T) {
	type spec = policyv1alpha1.PluginHookSpec
	const (
		exactlyOneTransport = `spec.transport: Invalid value: exactly one of transport.http and transport.stdio must be set`
		exactlyOneHTTP      = `spec.transport.http: Invalid value: exactly one of http.url and http.service must be set`
		badTimeout          = `spec.timeout: Invalid value: timeout must be more than 0s and at most 30s`
	)
	service := func(path string) *policyv1alpha1.ServiceReference {
		return &policyv1alpha1.ServiceReference{Name: "approvals", Namespace: "plugins", Path: path}
	}
	runValidationCases(t, []validationCase{
		{
			name: "a stdio plugin is accepted with timeout 5s, failurePolicy Fail and enforcementAction Deny by default",
			obj:  pluginHook(func(*spec) {}),
			check: func(t *testing.T, stored client.Object) {
				s := stored.(*policyv1alpha1.PluginHook).Spec
				if s.Timeout == nil || s.Timeout.Duration != 5*time.Second {
					t.Errorf("timeout = %v, want 5s", s.Timeout)
				}
				if s.FailurePolicy != policyv1alpha1.FailurePolicyFail || s.EnforcementAction != policyv1alpha1.EnforcementDeny {
					t.Errorf("Defaults = failurePolicy %q enforcementAction %q, want Fail and Deny", s.FailurePolicy, s.EnforcementAction)
				}
			},
		},
		{
			name:    "a transport with neither http nor stdio is rejected",
			obj:     pluginHook(func(s *spec) { s.Transport = policyv1alpha1.PluginTransport{} }),
			wantErr: exactlyOneTransport,
		},
		{
			name: "a transport with both http and stdio is rejected",
			obj: pluginHook(func(s *spec) {
				s.Transport.HTTP = &policyv1alpha1.HTTPTransport{URL: "https://approvals.example:8443/hook"}
			}),
			wantErr: exactlyOneTransport,
		},
		{
			name: "an https url is accepted",
			obj:  httpPlugin(policyv1alpha1.HTTPTransport{URL: "https://approvals.example:8443/hook"}),
		},
		{
			name: "an http url is accepted",
			obj:  httpPlugin(policyv1alpha1.HTTPTransport{URL: "http://approvals.plugins.svc/hook"}),
		},
		{
			name:    "an ftp url is rejected",
			obj:     httpPlugin(policyv1alpha1.HTTPTransport{URL: "ftp://x"}),
			wantErr: `spec.transport.http.url: Invalid value: "ftp://x": http.url must be an http or https URL`,
		},
		{
			name:    "a url without a scheme is rejected",
			obj:     httpPlugin(policyv1alpha1.HTTPTransport{URL: "approvals.example/hook"}),
			wantErr: `spec.transport.http.url: Invalid value: "approvals.example/hook": http.url must be an http or https URL`,
		},
		{
			name:    "a url longer than 2048 bytes is rejected",
			obj:     httpPlugin(policyv1alpha1.HTTPTransport{URL: "https://approvals.example/" + strings.Repeat("a", 2048)}),
			wantErr: "spec.transport.http.url: Too long: may not be more than 2048 bytes",
		},
		{
			name: "a service is accepted with port 80 by default",
			obj:  httpPlugin(policyv1alpha1.HTTPTransport{Service: service("/hook")}),
			check: func(t *testing.T, stored client.Object) {
				if got := stored.(*policyv1alpha1.PluginHook).Spec.Transport.HTTP.Service.Port; got != 80 {
					t.Errorf("service.port = %d, want 80", got)
				}
			},
		},
		{
			name:    "an http transport with neither url nor service is rejected",
			obj:     httpPlugin(policyv1alpha1.HTTPTransport{CABundle: "-----BEGIN CERTIFICATE-----"}),
			wantErr: exactlyOneHTTP,
		},
		{
			name:    "an http transport with both url and service is rejected",
			obj:     httpPlugin(policyv1alpha1.HTTPTransport{URL: "https://approvals.example/hook", Service: service("/hook")}),
			wantErr: exactlyOneHTTP,
		},
		{
			name:    "a service path without a leading slash is rejected",
			obj:     httpPlugin(policyv1alpha1.HTTPTransport{Service: service("hook")}),
			wantErr: `spec.transport.http.service.path: Invalid value: "hook": service.path must start with /`,
		},
		{
			name: "a service port above 65535 is rejected",
			obj: httpPlugin(policyv1alpha1.HTTPTransport{Service: &policyv1alpha1.ServiceReference{
				Name: "approvals", Port: 65536,
			}}),
			wantErr: "spec.transport.http.service.port in body should be less than or equal to 65535",
		},
		{
			name: "a service name longer than 63 bytes is rejected",
			obj: httpPlugin(policyv1alpha1.HTTPTransport{Service: &policyv1alpha1.ServiceReference{
				Name: strings.Repeat("a", 64),
			}}),
			wantErr: "spec.transport.http.service.name: Too long: may not be more than 63 bytes",
		},
		{
			name: "a timeout of 30s is accepted",
			obj:  pluginHook(timeout(30 * time.Second)),
		},
		{
			name: "a timeout of 100ms is accepted",
			obj:  pluginHook(timeout(100 * time.Millisecond)),
		},
		{
			name:    "a timeout above 30s is rejected",
			obj:     pluginHook(timeout(30*time.Second + time.Millisecond)),
			wantErr: badTimeout,
		},
		{
			name:    "a timeout of 0s is rejected",
			obj:     pluginHook(timeout(0)),
			wantErr: badTimeout,
		},
		{
			name:    "a negative timeout is rejected",
			obj:     pluginHook(timeout(-time.Second)),
			wantErr: badTimeout,
		},
		{
			name:    "a timeout that is not a duration is rejected",
			obj:     rawTimeoutPlugin(t, "5 seconds"),
			wantErr: "evaluating rule: timeout must be more than 0s and at most 30s",
		},
		{
			name: "a timeout written in minutes is accepted",
			obj:  rawTimeoutPlugin(t, "0.5m"),
		},
		{
			name: "failurePolicy Fail is accepted",
			obj:  pluginHook(func(s *spec) { s.FailurePolicy = policyv1alpha1.FailurePolicyFail }),
		},
		{
			name:    "an unknown failurePolicy is rejected",
			obj:     pluginHook(func(s *spec) { s.FailurePolicy = "Deny" }),
			wantErr: `spec.failurePolicy: Unsupported value: "Deny": supported values: "Ignore", "Fail"`,
		},
		{
			name:    "an unknown enforcementAction is rejected",
			obj:     pluginHook(func(s *spec) { s.EnforcementAction = "Audit" }),
			wantErr: `spec.enforcementAction: Unsupported value: "Audit": supported values: "Deny", "Warn"`,
		},
		{
			name: "all three events are accepted",
			obj: pluginHook(func(s *spec) {
				s.Events = []policyv1alpha1.PluginEvent{
					policyv1alpha1.EventToolBefore, policyv1alpha1.EventToolAfter, policyv1alpha1.EventToolAll,
				}
			}),
		},
		{
			name:    "no events are rejected",
			obj:     pluginHook(func(s *spec) { s.Events = []policyv1alpha1.PluginEvent{} }),
			wantErr: "spec.events in body should have at least 1 items",
		},
		{
			name:    "an unknown event is rejected",
			obj:     pluginHook(func(s *spec) { s.Events = []policyv1alpha1.PluginEvent{"tool:during"} }),
			wantErr: `spec.events[0]: Unsupported value: "tool:during": supported values: "tool:before", "tool:after", "tool:*"`,
		},
		{
			name: "a repeated event is rejected",
			obj: pluginHook(func(s *spec) {
				s.Events = []policyv1alpha1.PluginEvent{policyv1alpha1.EventToolAfter, policyv1alpha1.EventToolAfter}
			}),
			wantErr: `spec.events[1]: Duplicate value: "tool:after"`,
		},
		{
			name: "an env name of letters, digits and underscores is accepted",
			obj:  pluginHook(stdioEnv("_PLUGIN_MODE_2")),
		},
		{
			name:    "an env name with a dash is rejected",
			obj:     pluginHook(stdioEnv("PLUGIN-MODE")),
			wantErr: "spec.transport.stdio.env[0].name in body should match '^[A-Za-z_][A-Za-z0-9_]*$'",
		},
		{
			name:    "an env name starting with a digit is rejected",
			obj:     pluginHook(stdioEnv("2MODE")),
			wantErr: "spec.transport.stdio.env[0].name in body should match '^[A-Za-z_][A-Za-z0-9_]*$'",
		},
		{
			name: "two env vars with the same name are rejected",
			obj: pluginHook(func(s *spec) {
				s.Transport.Stdio.Env = []policyv1alpha1.EnvVar{{Name: "MODE", Value: "a"}, {Name: "MODE", Value: "b"}}
			}),
			wantErr: "spec.transport.stdio.env[1]: Duplicate value:",
		},
		{
			name:    "an empty stdio command is rejected",
			obj:     pluginHook(func(s *spec) { s.Transport.Stdio.Command = "" }),
			wantErr: "spec.transport.stdio.command in body should be at least 1 chars long",
		},
	})
}

// TestCRDShortNamesAndCategory lists one object of each kind through kubectl by
// the toolhooks category and by each short name.
func TestCRDShortNamesAndCategory(t *testing.T) {
	ctx := t.Context()
	const ns = "kubectl-names"
	if err := testEnv.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("Creating namespace %s: %v", ns, err)
	}
	meta := metav1.ObjectMeta{Name: "listed", Namespace: ns}
	for _, obj := range []client.Object{
		&policyv1alpha1.AutonomyPolicy{ObjectMeta: meta},
		contractPolicy(func(*policyv1alpha1.ContractPolicySpec) {}),
		pluginHook(func(*policyv1alpha1.PluginHookSpec) {}),
	} {
		obj.SetGenerateName("")
		obj.SetName(meta.Name)
		obj.SetNamespace(ns)
		if err := testEnv.Client.Create(ctx, obj); err != nil {
			t.Fatalf("Creating %T: %v", obj, err)
		}
	}

	const (
		ap  = "autonomypolicy.policy.toolhooks.dev/listed"
		ctp = "contractpolicy.policy.toolhooks.dev/listed"
		ph  = "pluginhook.policy.toolhooks.dev/listed"
	)
	for _, tc := range []struct {
		name     string
		resource string
		want     []string
	}{
		{name: "the toolhooks category lists all three kinds", resource: "toolhooks", want: []string{ap, ctp, ph}},
		{name: "the short name ap lists AutonomyPolicies", resource: "ap", want: []string{ap}},
		{name: "the short name ctp lists ContractPolicies", resource: "ctp", want: []string{ctp}},
		{name: "the short name ph lists PluginHooks", resource: "ph", want: []string{ph}},
		{name: "the three short names together list all three kinds", resource: "ap,ctp,ph", want: []string{ap, ctp, ph}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := testEnv.Kubectl(t, "get", tc.resource, "-n", ns, "-o", "name")
			if err != nil {
				t.Fatalf("kubectl get %s: %v\n%s", tc.resource, err, out)
			}
			got := strings.Fields(out)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("kubectl get %s -o name = %q, want %q", tc.resource, got, tc.want)
			}
		})
	}
}
