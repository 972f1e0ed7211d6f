package policyfile_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	crdbases "github.com/toolhooks/toolhooks/config/crd/bases"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/policyfile"
	"github.com/toolhooks/toolhooks/internal/testenv"
)

// The cases below are checked against the CRDs themselves: each test first
// asserts that its table covers every default, enum or CEL rule the CRDs
// declare under spec, so a new marker in api/v1alpha1 fails here until it has
// a case. Status is left out: the API server ignores it on create, and so
// does the loader.

// crdRules is what the CRDs declare at one schema path, e.g.
// "PluginHook spec.events[*]".
type crdRules struct {
	defaults map[string]json.RawMessage
	enums    map[string][]string
	rules    map[string][]string // CEL rule messages
}

// crdSchemaRules walks the spec schema of every embedded CRD.
func crdSchemaRules(t *testing.T) crdRules {
	t.Helper()
	r := crdRules{defaults: map[string]json.RawMessage{}, enums: map[string][]string{}, rules: map[string][]string{}}
	files, err := fs.Glob(crdbases.FS, "*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded CRDs: %v", err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(crdbases.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			r.walk(crd.Spec.Names.Kind+" spec", &spec)
		}
	}
	return r
}

func (r crdRules) walk(path string, s *apiextensionsv1.JSONSchemaProps) {
	if s.Default != nil {
		r.defaults[path] = s.Default.Raw
	}
	for _, e := range s.Enum {
		var v string
		if err := json.Unmarshal(e.Raw, &v); err != nil {
			panic(fmt.Sprintf("%s: a non-string enum value %s", path, e.Raw))
		}
		r.enums[path] = append(r.enums[path], v)
	}
	for _, rule := range s.XValidations {
		r.rules[path] = append(r.rules[path], rule.Message)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[k]
		r.walk(path+"."+k, &p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		r.walk(path+"[*]", s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		r.walk(path+"[*]", s.AdditionalProperties.Schema)
	}
}

// object is a policy document with the given spec (JSON is YAML).
func object(kind, name, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"policy.toolhooks.dev/v1alpha1","kind":%q,"metadata":{"name":%q},"spec":%s}`, kind, name, spec)
}

// Minimal valid specs of each kind.
const (
	urlTransport = `{"http":{"url":"http://127.0.0.1:9/hook"}}`
	pluginSpec   = `{"events":["tool:before"],"transport":` + urlTransport + `}`
	resultSpec   = `{"tools":["read_file"],"detectors":["secrets"]}`
)

// defaultCases are objects without the defaulted field: the loader must set
// the CRD's default, and an API server the same (see the envtest test).
var defaultCases = []struct {
	path string // kind and schema path of the default, as crdSchemaRules names it
	doc  string
}{
	{"AutonomyPolicy spec.enforcementAction", object("AutonomyPolicy", "no-action", `{}`)},
	{"AutonomyPolicy spec.mode", object("AutonomyPolicy", "no-mode", `{"workspace":{"root":"/srv"}}`)},
	{"ContractPolicy spec.enforcementAction", object("ContractPolicy", "no-action", `{"maxToolCalls":3}`)},
	{"ContractPolicy spec.stateFailurePolicy", object("ContractPolicy", "no-state-failure-policy", `{"maxToolCalls":3}`)},
	{"PluginHook spec.enforcementAction", object("PluginHook", "no-action", pluginSpec)},
	{"PluginHook spec.failurePolicy", object("PluginHook", "no-failure-policy", `{"events":["tool:after"],"transport":{"stdio":{"command":"node"}}}`)},
	{"PluginHook spec.timeout", object("PluginHook", "no-timeout", `{"events":["tool:*"],"transport":`+urlTransport+`,"failurePolicy":"Ignore"}`)},
	{"ResultPolicy spec.action", object("ResultPolicy", "no-action", resultSpec)},
	{"ResultPolicy spec.enforcementAction", object("ResultPolicy", "no-enforcement-action", resultSpec)},
	{"PluginHook spec.transport.http.service.port", object("PluginHook", "no-port",
		`{"events":["tool:before"],"transport":{"http":{"service":{"name":"approvals","path":"/hook"}}}}`)},
}

// rejectCase is an object the CRDs refuse.
type rejectCase struct {
	name string
	// path is the kind and schema path of the enum or rule the case breaks.
	path string
	doc  string
	// want is a substring of the error: the field and what is wrong with it.
	want string
}

var enumCases = []rejectCase{
	{"a lower-case mode", "AutonomyPolicy spec.mode", object("AutonomyPolicy", "bad-mode", `{"mode":"readonly"}`),
		`spec.mode: Unsupported value: "readonly"`},
	{"an unknown autonomy enforcement action", "AutonomyPolicy spec.enforcementAction",
		object("AutonomyPolicy", "bad-action", `{"enforcementAction":"Audit"}`), `spec.enforcementAction: Unsupported value: "Audit"`},
	{"an unknown shell dialect", "AutonomyPolicy spec.shell.dialects[*]",
		object("AutonomyPolicy", "bad-dialect", `{"shell":{"allow":true,"dialects":["posix","zsh"]}}`),
		`spec.shell.dialects[1]: Unsupported value: "zsh"`},
	{"an unknown contract enforcement action", "ContractPolicy spec.enforcementAction",
		object("ContractPolicy", "bad-action", `{"maxToolCalls":1,"enforcementAction":"Block"}`),
		`spec.enforcementAction: Unsupported value: "Block"`},
	{"a misspelt state failure policy, which must not fail open", "ContractPolicy spec.stateFailurePolicy",
		object("ContractPolicy", "bad-state", `{"maxToolCalls":1,"stateFailurePolicy":"ignore"}`),
		`spec.stateFailurePolicy: Unsupported value: "ignore"`},
	{"an unknown plugin enforcement action", "PluginHook spec.enforcementAction",
		object("PluginHook", "bad-action", `{"events":["tool:before"],"transport":`+urlTransport+`,"enforcementAction":"deny"}`),
		`spec.enforcementAction: Unsupported value: "deny"`},
	{"a misspelt failure policy, which must not fail open", "PluginHook spec.failurePolicy",
		object("PluginHook", "bad-failure-policy", `{"events":["tool:before"],"transport":`+urlTransport+`,"failurePolicy":"Fial"}`),
		`spec.failurePolicy: Unsupported value: "Fial"`},
	{"an unknown autonomy caller kind", "AutonomyPolicy spec.subjects.callers[*].kind",
		object("AutonomyPolicy", "bad-caller", `{"subjects":{"callers":[{"kind":"Role","name":"admin"}]}}`),
		`spec.subjects.callers[0].kind: Unsupported value: "Role"`},
	{"an unknown contract caller kind", "ContractPolicy spec.subjects.callers[*].kind",
		object("ContractPolicy", "bad-caller", `{"maxToolCalls":1,"subjects":{"callers":[{"kind":"serviceaccount","name":"a"}]}}`),
		`spec.subjects.callers[0].kind: Unsupported value: "serviceaccount"`},
	{"a lower-case result action", "ResultPolicy spec.action",
		object("ResultPolicy", "bad-action", `{"tools":["*"],"detectors":["secrets"],"action":"redact"}`),
		`spec.action: Unsupported value: "redact"`},
	{"an unknown detector", "ResultPolicy spec.detectors[*]",
		object("ResultPolicy", "bad-detector", `{"tools":["*"],"detectors":["secrets","passwords"]}`),
		`spec.detectors[1]: Unsupported value: "passwords"`},
	{"an unknown result enforcement action", "ResultPolicy spec.enforcementAction",
		object("ResultPolicy", "bad-enforcement", `{"tools":["*"],"detectors":["jwt"],"enforcementAction":"Redact"}`),
		`spec.enforcementAction: Unsupported value: "Redact"`},
	{"an unknown pattern action", "ResultPolicy spec.patterns[*].action",
		object("ResultPolicy", "bad-pattern-action", `{"tools":["*"],"patterns":[{"name":"t","regex":"T-\\d+","action":"Drop"}]}`),
		`spec.patterns[0].action: Unsupported value: "Drop"`},
	{"an unknown removeLines action", "ResultPolicy spec.removeLines[*].action",
		object("ResultPolicy", "bad-remove-action", `{"tools":["*"],"removeLines":[{"name":"d","regex":"^DEBUG","action":"Remove"}]}`),
		`spec.removeLines[0].action: Unsupported value: "Remove"`},
	{"an unknown removePaths action", "ResultPolicy spec.removePaths[*].action",
		object("ResultPolicy", "bad-path-action", `{"tools":["*"],"removePaths":[{"name":"d","path":"$.a","action":"Delete"}]}`),
		`spec.removePaths[0].action: Unsupported value: "Delete"`},
	{"an unknown result caller kind", "ResultPolicy spec.subjects.callers[*].kind",
		object("ResultPolicy", "bad-caller", `{"tools":["*"],"detectors":["jwt"],"subjects":{"callers":[{"kind":"Team","name":"a"}]}}`),
		`spec.subjects.callers[0].kind: Unsupported value: "Team"`},
	{"an unknown plugin event", "PluginHook spec.events[*]",
		object("PluginHook", "bad-event", `{"events":["tool:during"],"transport":`+urlTransport+`}`),
		`spec.events[0]: Unsupported value: "tool:during"`},
}

var celCases = []rejectCase{
	{"shell.allowedCommands without shell.allow", "AutonomyPolicy spec.shell",
		object("AutonomyPolicy", "commands-no-shell", `{"shell":{"allowedCommands":["git *"]}}`), "spec.shell: Invalid value"},
	{"a protected path both added and lifted", "AutonomyPolicy spec.protectedPaths",
		object("AutonomyPolicy", "add-lift", `{"protectedPaths":{"add":[".envrc"],"lift":[".envrc"]}}`), "spec.protectedPaths: Invalid value"},
	{"a relative workspace root with workspace.only", "AutonomyPolicy spec.workspace",
		object("AutonomyPolicy", "relative-root", `{"workspace":{"root":"srv","only":true}}`), "spec.workspace: Invalid value"},
	{"an autonomy User caller with a namespace", "AutonomyPolicy spec.subjects.callers[*]",
		object("AutonomyPolicy", "user-ns", `{"subjects":{"callers":[{"kind":"ServiceAccount","name":"a"},{"kind":"User","name":"a","namespace":"b"}]}}`),
		"spec.subjects.callers[1]: Invalid value"},
	{"a contract Group caller with a namespace", "ContractPolicy spec.subjects.callers[*]",
		object("ContractPolicy", "group-ns", `{"maxToolCalls":1,"subjects":{"callers":[{"kind":"Group","name":"a","namespace":"b"}]}}`),
		"spec.subjects.callers[0]: Invalid value"},
	{"an ask expiry over a day", "AutonomyPolicy spec.ask.expiry",
		object("AutonomyPolicy", "long-ask", `{"ask":{"tools":["deploy_*"],"expiry":"25h"}}`), "spec.ask.expiry: Invalid value"},
	{"a contract ask expiry of zero", "ContractPolicy spec.ask.expiry",
		object("ContractPolicy", "zero-ask", `{"ask":{"tools":["deploy_*"],"expiry":"0s"}}`), "spec.ask.expiry: Invalid value"},
	{"a contract ask that names no calls", "ContractPolicy spec.ask",
		object("ContractPolicy", "empty-ask", `{"ask":{"expiry":"1m"}}`), "spec.ask: Invalid value"},
	{"a contract that limits nothing", "ContractPolicy spec", object("ContractPolicy", "limitless", `{"subjects":{"senders":["a"]}}`),
		"spec: Invalid value"},
	{"a per-sender window under a minute", "ContractPolicy spec.maxToolCallsPerSender",
		object("ContractPolicy", "short-window", `{"maxToolCallsPerSender":{"calls":5,"window":"30s"}}`),
		"spec.maxToolCallsPerSender: Invalid value"},
	{"a timeout above 30s", "PluginHook spec", object("PluginHook", "slow", `{"events":["tool:before"],"transport":`+urlTransport+`,"timeout":"31s"}`),
		"spec.timeout: Invalid value"},
	{"a result policy that looks for nothing", "ResultPolicy spec",
		object("ResultPolicy", "looks-for-nothing", `{"tools":["read_file"],"detectors":[]}`), "spec: Invalid value"},
	{"a result scan timeout above 30s", "ResultPolicy spec.timeout",
		object("ResultPolicy", "slow-scan", `{"tools":["read_file"],"detectors":["secrets"],"timeout":"1m"}`), `spec.timeout: Invalid value`},
	{"a result User caller with a namespace", "ResultPolicy spec.subjects.callers[*]",
		object("ResultPolicy", "user-ns", `{"tools":["*"],"detectors":["jwt"],"subjects":{"callers":[{"kind":"User","name":"a","namespace":"b"}]}}`),
		"spec.subjects.callers[0]: Invalid value"},
	{"a transport with both http and stdio", "PluginHook spec.transport",
		object("PluginHook", "two-transports", `{"events":["tool:before"],"transport":{"http":{"url":"http://a/"},"stdio":{"command":"node"}}}`),
		"spec.transport: Invalid value"},
	{"an http transport with both url and service", "PluginHook spec.transport.http",
		object("PluginHook", "url-and-service", `{"events":["tool:before"],"transport":{"http":{"url":"http://a/","service":{"name":"b"}}}}`),
		"spec.transport.http: Invalid value"},
	{"a service path without a leading slash", "PluginHook spec.transport.http.service.path",
		object("PluginHook", "relative-path", `{"events":["tool:before"],"transport":{"http":{"service":{"name":"b","path":"hook"}}}}`),
		`spec.transport.http.service.path: Invalid value: "hook"`},
	{"an ftp url", "PluginHook spec.transport.http.url",
		object("PluginHook", "ftp", `{"events":["tool:before"],"transport":{"http":{"url":"ftp://a/hook"}}}`),
		`spec.transport.http.url: Invalid value: "ftp://a/hook"`},
}

// unknownFieldCases are objects with fields no CRD defines, which the API
// server rejects under strict field validation.
var unknownFieldCases = []rejectCase{
	{"an unknown spec field", "", object("AutonomyPolicy", "typo", `{"forbiddenPaths":["x"]}`), `unknown field "spec.forbiddenPaths"`},
	{"a field in the wrong case", "", object("AutonomyPolicy", "case", `{"ForbiddenPathGlobs":["x"]}`), `unknown field "spec.ForbiddenPathGlobs"`},
	{"an unknown nested field", "", object("PluginHook", "nested", `{"events":["tool:before"],"transport":{"http":{"url":"http://a/","tls":true}}}`),
		`unknown field "spec.transport.http.tls"`},
	{"an unknown field in a list element", "", object("ContractPolicy", "in-list", `{"rateLimits":[{"tools":"*","perSenderPerMinute":1,"burst":2}]}`),
		`unknown field "spec.rateLimits[0].burst"`},
	{"an unknown top-level field", "", strings.TrimSuffix(object("ContractPolicy", "top", `{"maxToolCalls":1}`), "}") + `,"extra":1}`,
		`unknown field "extra"`},
	{"an unknown metadata field", "", `{"apiVersion":"policy.toolhooks.dev/v1alpha1","kind":"ContractPolicy","metadata":{"name":"m","lables":{}},"spec":{"maxToolCalls":1}}`,
		`unknown field "metadata.lables"`},
	{"an unknown status field", "", strings.TrimSuffix(object("ContractPolicy", "status", `{"maxToolCalls":1}`), "}") + `,"status":{"phase":"Ready"}}`,
		`unknown field "status.phase"`},
}

// otherRejectCases break bounds and formats other than enums and rules.
var otherRejectCases = []rejectCase{
	{"a missing required field", "", object("PluginHook", "no-events", `{"transport":`+urlTransport+`}`), "spec.events: Required value"},
	{"a value of the wrong type", "", object("ContractPolicy", "string-budget", `{"maxToolCalls":"3"}`), "spec.maxToolCalls: Invalid value"},
	{"a number above the maximum", "", object("ContractPolicy", "huge", `{"maxToolCalls":10000001}`),
		"spec.maxToolCalls: Invalid value: 10000001: spec.maxToolCalls in body should be less than or equal to 10000000"},
	{"a repeated set element", "", object("PluginHook", "twice", `{"events":["tool:after","tool:after"],"transport":`+urlTransport+`}`),
		`spec.events[1]: Duplicate value: "tool:after"`},
	{"a repeated map key", "", object("ContractPolicy", "twice", `{"scopedCapabilities":[{"tool":"a"},{"tool":"a"}]}`),
		`spec.scopedCapabilities[1]: Duplicate value`},
	{"a name that is not a DNS subdomain", "", object("ContractPolicy", "Budget_1", `{"maxToolCalls":1}`), "metadata.name: Invalid value: \"Budget_1\""},
	{"a missing spec", "", `{"apiVersion":"policy.toolhooks.dev/v1alpha1","kind":"AutonomyPolicy","metadata":{"name":"nospec"}}`,
		"spec: Required value"},
	{"a removePaths path that is not a JSONPath query", "", object("ResultPolicy", "bad-path", `{"tools":["*"],"removePaths":[{"name":"d","path":"user.ssn"}]}`),
		`spec.removePaths[0].path: Invalid value`},
	{"a result policy with only an empty removePaths", "", object("ResultPolicy", "nothing", `{"tools":["*"],"removePaths":[]}`),
		`spec: Invalid value`},
}

func TestEveryCRDDefaultIsSetOnAFileWithoutTheField(t *testing.T) {
	crd := crdSchemaRules(t)
	var covered []string
	for _, tc := range defaultCases {
		covered = append(covered, tc.path)
		t.Run(tc.path, func(t *testing.T) {
			want, ok := crd.defaults[tc.path]
			if !ok {
				t.Fatalf("the CRDs declare no default at %s", tc.path)
			}
			if strings.Contains(tc.doc, `"`+last(tc.path)+`"`) {
				t.Fatalf("the case sets %s itself", last(tc.path))
			}
			got := loadedField(t, tc.doc, tc.path)
			if !jsonEqual(t, got, want) {
				t.Errorf("%s = %s, want the CRD default %s", tc.path, got, want)
			}
		})
	}
	assertCovers(t, "default", slices.Collect(maps.Keys(crd.defaults)), covered)
}

func TestEveryEnumRejectsAnUnknownValueNamingTheField(t *testing.T) {
	crd := crdSchemaRules(t)
	var covered []string
	for _, tc := range enumCases {
		covered = append(covered, tc.path)
		t.Run(tc.name, func(t *testing.T) {
			values, ok := crd.enums[tc.path]
			if !ok {
				t.Fatalf("the CRDs declare no enum at %s", tc.path)
			}
			quoted := make([]string, len(values))
			for i, v := range values {
				quoted[i] = fmt.Sprintf("%q", v)
			}
			assertRejected(t, tc.doc, tc.want+": supported values: "+strings.Join(quoted, ", "))
		})
	}
	assertCovers(t, "enum", slices.Collect(maps.Keys(crd.enums)), covered)
}

func TestEveryCELRuleRejectsABadObjectNamingTheField(t *testing.T) {
	crd := crdSchemaRules(t)
	var covered, declared []string
	for path, msgs := range crd.rules {
		if strings.HasPrefix(path, "ToolCallApproval ") {
			continue // gateways create approvals; policy files never hold one
		}
		for _, m := range msgs {
			declared = append(declared, path+": "+m)
		}
	}
	for _, tc := range celCases {
		msgs := crd.rules[tc.path]
		if len(msgs) != 1 {
			t.Fatalf("%s: the CRDs declare %d rules at %s; give each its own case", tc.name, len(msgs), tc.path)
		}
		covered = append(covered, tc.path+": "+msgs[0])
		t.Run(tc.name, func(t *testing.T) {
			if msg := assertRejected(t, tc.doc, tc.want); !strings.Contains(msg, msgs[0]) {
				t.Errorf("error %q does not carry the rule's message %q", msg, msgs[0])
			}
		})
	}
	assertCovers(t, "CEL rule", declared, covered)
}

func TestUnknownFieldsAreRejectedAsWithStrictFieldValidation(t *testing.T) {
	for _, tc := range unknownFieldCases {
		t.Run(tc.name, func(t *testing.T) { assertRejected(t, tc.doc, tc.want) })
	}
}

func TestBoundsTypesAndListTypesAreChecked(t *testing.T) {
	for _, tc := range otherRejectCases {
		t.Run(tc.name, func(t *testing.T) { assertRejected(t, tc.doc, tc.want) })
	}
}

// TestEverySampleLoads loads every policy file under config/samples (not the
// kustomization nor the PolicyTest suites) and compiles it without errors.
func TestEverySampleLoads(t *testing.T) {
	files := sampleFiles(t)
	var all compile.Policies
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policyfile.Parse(data, f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if p.Len() == 0 {
			t.Errorf("%s holds no policy", f)
		}
		all.AppendAll(&p)
	}
	for _, k := range compile.Kinds {
		if len(all.Of(k.Kind)) == 0 {
			t.Errorf("the samples have no %s", k.Kind)
		}
	}
	_, outcomes := compile.Compile(compile.Gateway{Namespace: "default"}, all)
	for _, o := range outcomes {
		if o.Err != nil {
			t.Errorf("%s: %v", compile.HookName(o.Policy), o.Err)
		}
	}
}

// sampleFiles lists the policy files under config/samples.
func sampleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	root := filepath.Join(testenv.RepoRoot(), "config", "samples")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if filepath.Ext(name) != ".yaml" || name == "kustomization.yaml" || strings.HasSuffix(name, ".test.yaml") {
			return nil
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found only %v under %s", files, root)
	}
	return files
}

// loadedField parses doc, which holds one object, and returns the JSON of
// the field at path ("Kind spec.a.b") of the object as loaded.
func loadedField(t *testing.T, doc, path string) json.RawMessage {
	t.Helper()
	obj := onlyObject(t, doc)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	var v any = u
	for k := range strings.SplitSeq(strings.Fields(path)[1], ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not an object in %v", path, k, u)
		}
		v = m[k]
	}
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// assertRejected parses doc, wants it refused naming the file and containing
// want, and returns the error's message.
func assertRejected(t *testing.T, doc, want string) string {
	t.Helper()
	_, err := policyfile.Parse([]byte(doc), "bad.yaml")
	if err == nil {
		t.Fatalf("Parse accepted the object, want %q", want)
	}
	msg := err.Error()
	if !errors.Is(err, policyfile.ErrInvalid) {
		t.Errorf("error %v does not wrap ErrInvalid", err)
	}
	if !strings.HasPrefix(msg, "bad.yaml: document 1: ") || !strings.Contains(msg, want) {
		t.Errorf("error %q\nwant it to name the file and document and contain %q", msg, want)
	}
	return msg
}

// assertCovers fails unless covered holds every declared item.
func assertCovers(t *testing.T, what string, declared, covered []string) {
	t.Helper()
	for _, d := range declared {
		if !slices.Contains(covered, d) {
			t.Errorf("the CRDs declare a %s at %q that no case covers", what, d)
		}
	}
}

func last(path string) string {
	return path[strings.LastIndex(path, ".")+1:]
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
