// Package policyfile reads AutonomyPolicy, ContractPolicy and PluginHook
// objects from YAML (or JSON) files, for the gateway's standalone mode, the
// demo and offline tools. It decodes as strictly as the API server does and
// applies the CRDs' defaults, so a policy read from a file compiles exactly
// as the same object applied to a cluster would.
package policyfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
)

// DefaultNamespace is the namespace of an object whose metadata names none,
// as kubectl would apply it.
const DefaultNamespace = "default"

// DefaultPluginTimeout is a PluginHook's timeout when its spec sets none (the CRD default).
const DefaultPluginTimeout = 5 * time.Second

// Extensions are the file name extensions LoadDir reads.
var Extensions = []string{".yaml", ".yml", ".json"}

// ErrInvalid is wrapped by every error about the content of a policy file.
var ErrInvalid = errors.New("invalid policy file")

// ErrNoObjects is wrapped by LoadDir's error for a policy file that holds no
// object at all (empty, or only blanks, comments and "---"): such a file is
// never read as "no policies", since it is what a save caught half-way, a
// full disk or a stray truncation leaves behind. Remove a file to remove its
// policies.
var ErrNoObjects = errors.New("policy file holds no policy object")

// LoadDir reads every file in dir (not its subdirectories) whose name ends in
// one of Extensions and does not start with "." (editors' swap and backup
// files), in name order, and returns all the policies they hold. An object
// defined twice (same kind, namespace and name), in one file or across files,
// is an error, as creating it twice in a cluster would be. A file that holds
// no object is an error wrapping ErrNoObjects (and ErrInvalid).
func LoadDir(dir string) (compile.Policies, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return compile.Policies{}, fmt.Errorf("reading policy directory: %w", err)
	}
	var all compile.Policies
	seen := map[string]string{}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !slices.Contains(Extensions, strings.ToLower(filepath.Ext(name))) {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return compile.Policies{}, fmt.Errorf("reading policy file: %w", err)
		}
		p, err := Parse(data, path)
		if err != nil {
			return compile.Policies{}, err
		}
		if len(p.Autonomy)+len(p.Contracts)+len(p.Plugins) == 0 {
			return compile.Policies{}, fmt.Errorf("%s: %w: %w", path, ErrInvalid, ErrNoObjects)
		}
		for _, k := range keys(p) {
			if prev, dup := seen[k]; dup {
				return compile.Policies{}, fmt.Errorf("%s: %s is also defined in %s: %w", path, k, prev, ErrInvalid)
			}
			seen[k] = path
		}
		all.Autonomy = append(all.Autonomy, p.Autonomy...)
		all.Contracts = append(all.Contracts, p.Contracts...)
		all.Plugins = append(all.Plugins, p.Plugins...)
	}
	return all, nil
}

// Parse reads the policy objects of one file: YAML documents separated by
// "---" lines (JSON is YAML too), each an AutonomyPolicy, ContractPolicy,
// PluginHook or a List of them (kind List or <Kind>List), with apiVersion
// policy.toolhooks.dev/v1alpha1. Empty documents are skipped. Decoding is
// strict, as the API server's: unknown or duplicate fields, unknown kinds and
// invalid enum values are errors naming source and the document's position
// (1-based). Each object gets the defaults the API server would give it:
// namespace "default", mode Full, enforcementAction Deny, and for plugins
// timeout 5s and failurePolicy Fail.
func Parse(data []byte, source string) (compile.Policies, error) {
	var p compile.Policies
	seen := map[string]string{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return compile.Policies{}, fmt.Errorf("%s: document %d: %w: %w", source, doc, ErrInvalid, err)
		}
		where := fmt.Sprintf("%s: document %d", source, doc)
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return compile.Policies{}, fmt.Errorf("%s: %w: %w", where, ErrInvalid, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		if err := decodeObject(js, where, &p, seen, true); err != nil {
			return compile.Policies{}, err
		}
	}
}

// typeMeta is the head of every object.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// list is a List object's shape.
type list struct {
	typeMeta
	Metadata map[string]any    `json:"metadata,omitempty"`
	Items    []json.RawMessage `json:"items"`
}

// decodeObject decodes one object (or, when lists is true, a List) into p.
func decodeObject(js []byte, where string, p *compile.Policies, seen map[string]string, lists bool) error {
	var head typeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
		return fmt.Errorf("%s: %w: not an object: %w", where, ErrInvalid, err)
	}
	if head.Kind == "" {
		return fmt.Errorf("%s: %w: kind is missing", where, ErrInvalid)
	}
	gv := policyv1alpha1.GroupVersion.String()
	isList := head.Kind == "List" || strings.HasSuffix(head.Kind, "List")
	if isList && lists {
		if head.Kind != "List" && head.APIVersion != gv {
			return fmt.Errorf("%s: %w: apiVersion %q (want %s)", where, ErrInvalid, head.APIVersion, gv)
		}
		var l list
		if err := strict(js, &l); err != nil {
			return fmt.Errorf("%s: %w: %w", where, ErrInvalid, err)
		}
		for i, item := range l.Items {
			if err := decodeObject(item, fmt.Sprintf("%s, item %d", where, i+1), p, seen, false); err != nil {
				return err
			}
		}
		return nil
	}
	if head.APIVersion != gv {
		return fmt.Errorf("%s: %w: %s has apiVersion %q (want %s)", where, ErrInvalid, head.Kind, head.APIVersion, gv)
	}
	var (
		meta   *metav1.ObjectMeta
		err    error
		commit func()
	)
	switch head.Kind {
	case "AutonomyPolicy":
		o := &policyv1alpha1.AutonomyPolicy{}
		if err = strict(js, o); err == nil {
			err = defaultAutonomy(&o.Spec)
		}
		meta, commit = &o.ObjectMeta, func() { p.Autonomy = append(p.Autonomy, *o) }
	case "ContractPolicy":
		o := &policyv1alpha1.ContractPolicy{}
		if err = strict(js, o); err == nil {
			err = defaultContract(&o.Spec)
		}
		meta, commit = &o.ObjectMeta, func() { p.Contracts = append(p.Contracts, *o) }
	case "PluginHook":
		o := &policyv1alpha1.PluginHook{}
		if err = strict(js, o); err == nil {
			err = defaultPlugin(&o.Spec)
		}
		meta, commit = &o.ObjectMeta, func() { p.Plugins = append(p.Plugins, *o) }
	default:
		return fmt.Errorf("%s: %w: unknown kind %q (want AutonomyPolicy, ContractPolicy, PluginHook or a List of them)",
			where, ErrInvalid, head.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w: %w", where, head.Kind, ErrInvalid, err)
	}
	if meta.Name == "" {
		return fmt.Errorf("%s: %s: %w: metadata.name is required", where, head.Kind, ErrInvalid)
	}
	if meta.Namespace == "" {
		meta.Namespace = DefaultNamespace
	}
	k := head.Kind + " " + meta.Namespace + "/" + meta.Name
	if prev, dup := seen[k]; dup {
		return fmt.Errorf("%s: %s is also defined at %s: %w", where, k, prev, ErrInvalid)
	}
	seen[k] = where
	commit()
	return nil
}

// strict decodes js into v as the API server does: case-sensitive field
// names, no unknown and no duplicate fields.
func strict(js []byte, v any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

func defaultAutonomy(s *policyv1alpha1.AutonomyPolicySpec) error {
	switch s.Mode {
	case "":
		s.Mode = policyv1alpha1.AutonomyFull
	case policyv1alpha1.AutonomyFull, policyv1alpha1.AutonomySupervised, policyv1alpha1.AutonomyReadOnly:
	default:
		return fmt.Errorf("spec.mode %q (want Full, Supervised or ReadOnly)", s.Mode)
	}
	return defaultAction(&s.EnforcementAction)
}

func defaultContract(s *policyv1alpha1.ContractPolicySpec) error {
	return defaultAction(&s.EnforcementAction)
}

func defaultPlugin(s *policyv1alpha1.PluginHookSpec) error {
	if s.Timeout == nil {
		s.Timeout = &metav1.Duration{Duration: DefaultPluginTimeout}
	}
	switch s.FailurePolicy {
	case "":
		s.FailurePolicy = policyv1alpha1.FailurePolicyFail
	case policyv1alpha1.FailurePolicyIgnore, policyv1alpha1.FailurePolicyFail:
	default:
		return fmt.Errorf("spec.failurePolicy %q (want Ignore or Fail)", s.FailurePolicy)
	}
	if len(s.Events) == 0 {
		return errors.New("spec.events is required")
	}
	for _, e := range s.Events {
		switch e {
		case policyv1alpha1.EventToolBefore, policyv1alpha1.EventToolAfter, policyv1alpha1.EventToolAll:
		default:
			return fmt.Errorf("spec.events: %q (want tool:before, tool:after or tool:*)", e)
		}
	}
	if svc := s.Transport.HTTP; svc != nil && svc.Service != nil && svc.Service.Port == 0 {
		svc.Service.Port = 80
	}
	return defaultAction(&s.EnforcementAction)
}

func defaultAction(a *policyv1alpha1.EnforcementAction) error {
	switch *a {
	case "":
		*a = policyv1alpha1.EnforcementDeny
	case policyv1alpha1.EnforcementDeny, policyv1alpha1.EnforcementWarn:
	default:
		return fmt.Errorf("spec.enforcementAction %q (want Deny or Warn)", *a)
	}
	return nil
}

// keys names the objects of p as "Kind namespace/name".
func keys(p compile.Policies) []string {
	out := make([]string, 0, len(p.Autonomy)+len(p.Contracts)+len(p.Plugins))
	for _, o := range p.Autonomy {
		out = append(out, "AutonomyPolicy "+o.Namespace+"/"+o.Name)
	}
	for _, o := range p.Contracts {
		out = append(out, "ContractPolicy "+o.Namespace+"/"+o.Name)
	}
	for _, o := range p.Plugins {
		out = append(out, "PluginHook "+o.Namespace+"/"+o.Name)
	}
	return out
}
