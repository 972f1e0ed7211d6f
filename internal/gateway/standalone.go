package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/policyfile"
)

// DefaultReloadInterval is how often standalone mode checks the policy files.
const DefaultReloadInterval = time.Second

// ErrPolicyFiles wraps every reason a standalone load is refused.
var ErrPolicyFiles = errors.New("policy files not applied")

// StandaloneOptions configure standalone mode.
type StandaloneOptions struct {
	// Dir holds the AutonomyPolicy, ContractPolicy and PluginHook files (see policyfile.LoadDir).
	Dir string
	// Namespace is the gateway's namespace: only policies in it apply (default "default").
	Namespace string
	// Labels are the gateway's labels, matched by the policies' gatewaySelectors.
	Labels map[string]string
	// Interval is how often the files are checked for changes (default DefaultReloadInterval).
	Interval time.Duration
}

// RunStandalone loads the policies in o.Dir through the same compile path
// as the controller and applies them as a push would, then reloads them
// whenever the files' contents change, until ctx ends. A load that fails (a
// file does not parse, a policy does not compile) is logged and changes
// nothing: the last good configuration stays in force, and before the first
// good one the gateway keeps denying every call. A policy that does not
// compile fails the whole load rather than being left out, so a typo cannot
// silently remove a restriction.
func (s *Server) RunStandalone(ctx context.Context, o StandaloneOptions) error {
	if o.Dir == "" {
		return errors.New("standalone: a policy directory is required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultReloadInterval
	}
	var last [sha256.Size]byte
	first := true
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		sum, err := fingerprint(o.Dir)
		if err != nil {
			if first || sum != last {
				s.metrics.rejections.WithLabelValues(RejectPolicyFiles).Inc()
				s.log.ErrorContext(ctx, "Cannot read the policy directory; the configuration in force stays", "dir", o.Dir, "error", err)
			}
		} else if first || sum != last {
			if _, err := s.LoadPolicies(ctx, o); err != nil {
				s.metrics.rejections.WithLabelValues(RejectPolicyFiles).Inc()
				s.log.ErrorContext(ctx, "Policy files not applied; the configuration in force stays", "dir", o.Dir,
					"revision", s.Status().Revision, "error", err)
			}
		}
		last, first = sum, false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// LoadPolicies loads, compiles and applies the policies in o.Dir once.
func (s *Server) LoadPolicies(ctx context.Context, o StandaloneOptions) (ApplyResult, error) {
	ns := o.Namespace
	if ns == "" {
		ns = policyfile.DefaultNamespace
	}
	policies, err := policyfile.LoadDir(o.Dir)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("%w: %w", ErrPolicyFiles, err)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: ns, Labels: o.Labels}, policies)
	var errs []error
	for _, out := range outcomes {
		name := compile.HookName(out.Policy)
		switch {
		case out.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, out.Err))
		case !out.Selected:
			s.log.InfoContext(ctx, "Policy does not select this gateway", "policy", name)
		}
	}
	if n := countOtherNamespaces(policies, ns); n > 0 {
		s.log.InfoContext(ctx, "Policies in other namespaces ignored", "namespace", ns, "count", n)
	}
	if len(errs) > 0 {
		return ApplyResult{}, fmt.Errorf("%w: %w", ErrPolicyFiles, errors.Join(errs...))
	}
	cfg.IssuedAt = time.Now().UnixNano()
	res, err := s.Apply(ctx, cfg, "standalone")
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrPolicyFiles, err)
	}
	return res, nil
}

func countOtherNamespaces(p compile.Policies, ns string) int {
	n := 0
	for _, o := range p.Autonomy {
		if o.Namespace != ns {
			n++
		}
	}
	for _, o := range p.Contracts {
		if o.Namespace != ns {
			n++
		}
	}
	for _, o := range p.Plugins {
		if o.Namespace != ns {
			n++
		}
	}
	return n
}

// fingerprint hashes the names and contents of the files LoadDir reads.
func fingerprint(dir string) ([sha256.Size]byte, error) {
	var zero [sha256.Size]byte
	ents, err := os.ReadDir(dir)
	if err != nil {
		return zero, fmt.Errorf("reading policy directory: %w", err)
	}
	h := sha256.New()
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !slices.Contains(policyfile.Extensions, strings.ToLower(filepath.Ext(name))) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return zero, fmt.Errorf("reading policy file: %w", err)
		}
		_, _ = fmt.Fprintf(h, "%d:%s\x00%d:", len(name), name, len(b))
		_, _ = h.Write(b)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}
