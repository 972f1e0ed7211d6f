// Package cli is the logic of the kubectl-toolhooks plugin: it loads policy
// files, compiles them exactly as the controller and the gateway's
// standalone mode do, evaluates tool calls through the gateway's executor,
// and runs PolicyTest suites. It performs no I/O beyond reading the files it
// is given, so the commands stay thin and testable.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/policyfile"
)

// ErrBadInput matches (errors.Is) every error caused by what the user gave
// the CLI (files, flags, arguments, suites), as opposed to a policy decision.
var ErrBadInput = errors.New("bad input")

// inputError is an error that matches ErrBadInput without adding its text.
type inputError struct{ err error }

func (e *inputError) Error() string        { return e.err.Error() }
func (e *inputError) Unwrap() error        { return e.err }
func (e *inputError) Is(target error) bool { return target == ErrBadInput }

// BadInput formats an error that matches ErrBadInput.
func BadInput(format string, a ...any) error {
	return &inputError{err: fmt.Errorf(format, a...)}
}

// kustomizeFiles are kustomize's own file names, skipped in directories so
// that a kustomize base such as config/samples can be checked as is.
var kustomizeFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Loaded is a set of policies and the file each one came from.
type Loaded struct {
	Policies compile.Policies
	// Sources maps "Kind namespace/name" to the file that defined the object.
	Sources map[string]string
}

// Key names one policy object in Loaded.Sources.
func Key(kind, namespace, name string) string { return kind + " " + namespace + "/" + name }

// Source returns the file that defined the object, or "" when unknown.
func (l *Loaded) Source(kind, namespace, name string) string {
	return l.Sources[Key(kind, namespace, name)]
}

// Count returns how many policy objects were loaded.
func (l *Loaded) Count() int {
	return l.Policies.Len()
}

// Namespaces returns the distinct namespaces of the loaded policies, sorted.
func (l *Loaded) Namespaces() []string {
	ns := make([]string, 0, l.Count())
	for _, o := range l.Policies.All() {
		ns = append(ns, o.GetNamespace())
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// LoadPolicies reads the policy objects of every path, in order. A file is
// parsed by policyfile.Parse; a directory contributes its files (not its
// subdirectories) as policyfile.LoadDir would read them, except kustomize's
// kustomization files and PolicyTest suites (*.test.yaml, *.test.yml), so a
// kustomize base or a directory holding suites beside their policies can be
// given as is. An object defined twice across all paths is an error.
func LoadPolicies(paths []string) (*Loaded, error) {
	if len(paths) == 0 {
		return nil, BadInput("no policy files given (use -f FILE_OR_DIR)")
	}
	l := &Loaded{Sources: map[string]string{}}
	for _, p := range paths {
		files, err := policyFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := l.loadFile(f); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// policyFiles lists the files path stands for.
func policyFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, BadInput("reading policies: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, BadInput("reading policy directory: %w", err)
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || slices.Contains(kustomizeFiles, name) || IsSuiteFile(name) ||
			!slices.Contains(policyfile.Extensions, strings.ToLower(filepath.Ext(name))) {
			continue
		}
		files = append(files, filepath.Join(path, name))
	}
	return files, nil
}

// loadFile parses one file into l.
func (l *Loaded) loadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return BadInput("reading policy file: %w", err)
	}
	p, err := policyfile.Parse(data, path)
	if err != nil {
		return BadInput("%w", err)
	}
	var keys []string
	for _, k := range compile.Kinds {
		for _, o := range p.Of(k.Kind) {
			keys = append(keys, Key(string(k.Kind), o.GetNamespace(), o.GetName()))
		}
	}
	for _, k := range keys {
		if prev, dup := l.Sources[k]; dup {
			return BadInput("%s: %s is also defined in %s", path, k, prev)
		}
		l.Sources[k] = path
	}
	l.Policies.AppendAll(&p)
	return nil
}

// IsSuiteFile reports whether a file name follows the PolicyTest suite
// naming convention (*.test.yaml or *.test.yml).
func IsSuiteFile(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".test.yaml") || strings.HasSuffix(n, ".test.yml")
}

// Lint returns the loaded policies' warnings (compile.Lint), each naming
// the policy and its file (for example, allow-list entries that let an agent
// run arbitrary programs).
func (l *Loaded) Lint() []string {
	var out []string
	for _, o := range l.Policies.All() {
		k, _ := compile.KindFor(o)
		for _, w := range k.Lint(o) {
			out = append(out, fmt.Sprintf("%s %s/%s (%s): %s", k.Kind, o.GetNamespace(), o.GetName(),
				l.Source(string(k.Kind), o.GetNamespace(), o.GetName()), w))
		}
	}
	return out
}

// LoadFromCluster reads the policies of namespace (every kind in
// compile.Kinds) through c, as the controller lists them for a gateway of
// that namespace. Each object's source is "cluster".
func LoadFromCluster(ctx context.Context, c client.Reader, namespace string) (*Loaded, error) {
	l := &Loaded{Sources: map[string]string{}}
	for _, k := range compile.Kinds {
		list := k.NewList()
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", k.Resource, namespace, err)
		}
		l.Policies.SetItems(k, list)
		for _, o := range k.ListObjects(list) {
			l.Sources[Key(string(k.Kind), o.GetNamespace(), o.GetName())] = "cluster"
		}
	}
	return l, nil
}
