// Package policyfile reads AutonomyPolicy, ContractPolicy, PluginHook and
// ResultPolicy objects from YAML (or JSON) files, for the gateway's standalone mode, the
// demo and offline tools. Each object goes through the CRDs' own schemas as
// the API server applies them on create with strict field validation
// (package crdschema): unknown fields are errors, the CRDs' defaults are set
// and every OpenAPI and CEL rule is checked, so a policy read from a file
// compiles exactly as the same object applied to a cluster would.
package policyfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/crdschema"
)

// DefaultNamespace is the namespace of an object whose metadata names none,
// as kubectl would apply it.
const DefaultNamespace = "default"

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
		if p.Len() == 0 {
			return compile.Policies{}, fmt.Errorf("%s: %w: %w", path, ErrInvalid, ErrNoObjects)
		}
		for _, k := range keys(p) {
			if prev, dup := seen[k]; dup {
				return compile.Policies{}, fmt.Errorf("%s: %s is also defined in %s: %w", path, k, prev, ErrInvalid)
			}
			seen[k] = path
		}
		all.AppendAll(&p)
	}
	return all, nil
}

// Parse reads the policy objects of one file: YAML documents separated by
// "---" lines (JSON is YAML too), each an AutonomyPolicy, ContractPolicy,
// PluginHook, ResultPolicy or a List of them (kind List or <Kind>List), with apiVersion
// policy.toolhooks.dev/v1alpha1. Empty documents are skipped. Decoding is
// strict and each object is defaulted and validated as the API server would
// (see the package comment); errors name source, the document's position
// (1-based), the object and the field. An object without a namespace is in
// DefaultNamespace, as kubectl would create it.
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
	isList := head.Kind == "List" || strings.HasSuffix(head.Kind, "List")
	if isList && lists {
		return decodeList(js, head, where, p, seen)
	}
	kind, known := compile.KindOf(head.Kind)
	if !known {
		return fmt.Errorf("%s: %w: unknown kind %q (want %s or a List of them)",
			where, ErrInvalid, head.Kind, strings.Join(compile.KindNames(), ", "))
	}
	s, err := crdschema.For(head.Kind)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", where, head.Kind, err)
	}
	if gv := s.GroupVersionKind().GroupVersion().String(); head.APIVersion != gv {
		return fmt.Errorf("%s: %w: %s has apiVersion %q (want %s)", where, ErrInvalid, head.Kind, head.APIVersion, gv)
	}
	var obj map[string]any
	if err := strict(js, &obj); err != nil {
		return fmt.Errorf("%s: %s: %w: %w", where, head.Kind, ErrInvalid, err)
	}
	namespace, name, err := setNamespace(obj, s.Namespaced())
	if err != nil {
		return fmt.Errorf("%s: %s: %w: %w", where, head.Kind, ErrInvalid, err)
	}
	if name == "" {
		return fmt.Errorf("%s: %s: %w: metadata.name is required", where, head.Kind, ErrInvalid)
	}
	key := head.Kind + " " + namespace + "/" + name
	if err := s.Admit(context.Background(), obj); err != nil {
		return fmt.Errorf("%s: %s: %w: %w", where, key, ErrInvalid, err)
	}
	if prev, dup := seen[key]; dup {
		return fmt.Errorf("%s: %s is also defined at %s: %w", where, key, prev, ErrInvalid)
	}
	admitted, err := json.Marshal(obj)
	if err == nil {
		o := kind.New()
		if err = strict(admitted, o); err == nil {
			p.Add(o)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w: %w", where, key, ErrInvalid, err)
	}
	seen[key] = where
	return nil
}

// decodeList decodes the items of a List object into p.
func decodeList(js []byte, head typeMeta, where string, p *compile.Policies, seen map[string]string) error {
	if gv := policyv1alpha1.GroupVersion.String(); head.Kind != "List" && head.APIVersion != gv {
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

// setNamespace puts a namespaced object that names no namespace in
// DefaultNamespace and returns its namespace and name (empty when missing or
// not strings, for the schema to report).
func setNamespace(obj map[string]any, namespaced bool) (namespace, name string, err error) {
	raw, found := obj["metadata"]
	if !found || raw == nil {
		raw = map[string]any{}
		obj["metadata"] = raw
	}
	meta, ok := raw.(map[string]any)
	if !ok {
		return "", "", fmt.Errorf("metadata: want an object, got %T", raw)
	}
	if ns, _ := meta["namespace"].(string); namespaced && (meta["namespace"] == nil || ns == "") {
		meta["namespace"] = DefaultNamespace
	}
	namespace, _ = meta["namespace"].(string)
	name, _ = meta["name"].(string)
	return namespace, name, nil
}

// strict decodes js into v as the API server does: case-sensitive field
// names, integers kept as int64, no unknown and no duplicate fields.
func strict(js []byte, v any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// keys names the objects of p as "Kind namespace/name".
func keys(p compile.Policies) []string {
	out := make([]string, 0, p.Len())
	for _, k := range compile.Kinds {
		for _, o := range p.Of(k.Kind) {
			out = append(out, string(k.Kind)+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	return out
}
