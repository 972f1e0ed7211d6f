// Package standalone runs a gateway without a cluster: it loads
// AutonomyPolicy, ContractPolicy, PluginHook and ResultPolicy YAML files from a directory,
// compiles them through the same path as the controller, applies the result
// to a gateway.Server as a push would, and reloads them when they change.
package standalone

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolhooks/toolhooks/internal/compile"
	"github.com/toolhooks/toolhooks/internal/gateway"
	"github.com/toolhooks/toolhooks/internal/policyfile"
)

// DefaultReloadInterval is how often standalone mode checks the policy files.
const DefaultReloadInterval = 250 * time.Millisecond

// DefaultDebounce is how long the policy files must stay unchanged before
// standalone mode loads them.
const DefaultDebounce = time.Second

// ErrPolicyFiles wraps every reason a standalone load is refused.
var ErrPolicyFiles = errors.New("policy files not applied")

// Options configure standalone mode.
type Options struct {
	// Dir holds the AutonomyPolicy, ContractPolicy, PluginHook and ResultPolicy files (see policyfile.LoadDir).
	Dir string
	// Namespace is the gateway's namespace: only policies in it apply (default "default").
	Namespace string
	// Labels are the gateway's labels, matched by the policies' gatewaySelectors.
	Labels map[string]string
	// Interval is how often the files are checked for changes (default DefaultReloadInterval).
	Interval time.Duration
	// Debounce is how long the files must stay unchanged before they are
	// loaded (default DefaultDebounce), so that a save in progress is never
	// loaded half-written.
	Debounce time.Duration
	// Logger logs loads and refusals; nil means slog.Default().
	Logger *slog.Logger
}

// Run loads the policies in o.Dir through the same compile path as the
// controller and applies them to s as a push would, then reloads them
// whenever the files' contents change, until ctx ends.
//
// Only a complete snapshot is loaded: the files (names and contents) must
// have stayed the same for o.Debounce, so a save caught half-way (a file
// truncated, then written) is never loaded and the configuration in force
// stays while it is being written. Once the files have settled:
//
//   - A file that does not parse or a policy that does not compile fails the
//     whole load, which is logged and changes nothing: the last good
//     configuration stays in force, and before the first good one the
//     gateway keeps denying every call. A typo cannot silently remove a
//     restriction.
//   - A directory that cannot be read, or a policy file that holds no policy
//     object (emptied, or only comments) puts the gateway in the no-policy
//     state: every call is denied (RuleNoPolicy) and the gateway is not
//     ready, naming the cause, until the file is filled or removed. An empty
//     file is never read as "no policies" (remove a file to remove its
//     policies), so emptying one of several files cannot drop its
//     restrictions while the others stay in force.
//   - Files in which no policy selects this gateway (none at all, only
//     dot-files, only other namespaces or selectors) give the no-policy
//     state too (see gateway.Server.Apply).
func Run(ctx context.Context, s *gateway.Server, o Options) error {
	if o.Dir == "" {
		return errors.New("standalone: a policy directory is required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultReloadInterval
	}
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	var (
		applied, seen [sha256.Size]byte
		loaded        bool      // applied holds the last snapshot acted on
		seenSince     time.Time // when the files last changed
	)
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		sum, readErr := fingerprint(o.Dir)
		now := time.Now()
		if sum != seen || seenSince.IsZero() {
			seen, seenSince = sum, now
		}
		if (!loaded || sum != applied) && now.Sub(seenSince) >= o.Debounce {
			applied, loaded = sum, true
			loadSettled(ctx, s, o, readErr)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// loadSettled acts on settled policy files (see Run).
func loadSettled(ctx context.Context, s *gateway.Server, o Options, readErr error) {
	err := readErr
	if err == nil {
		_, err = Load(ctx, s, o)
	}
	if err == nil {
		return
	}
	s.CountRejection(gateway.RejectPolicyFiles)
	if readErr != nil || errors.Is(err, policyfile.ErrNoObjects) {
		reason := fmt.Sprintf("the policy files in %s cannot be used, so every call is denied: %v", o.Dir, err)
		if derr := s.DenyEverything(ctx, reason); derr != nil {
			logger(o).ErrorContext(ctx, "Cannot put the no-policy state in force", "error", derr)
		}
		return
	}
	logger(o).ErrorContext(ctx, "Policy files not applied; the configuration in force stays", "dir", o.Dir,
		"revision", s.Status().Revision, "error", err)
}

// Load loads, compiles and applies the policies in o.Dir to s once (see Run
// for what Run does with its errors).
func Load(ctx context.Context, s *gateway.Server, o Options) (gateway.ApplyResult, error) {
	ns := o.Namespace
	if ns == "" {
		ns = policyfile.DefaultNamespace
	}
	policies, err := policyfile.LoadDir(o.Dir)
	if err != nil {
		return gateway.ApplyResult{}, fmt.Errorf("%w: %w", ErrPolicyFiles, err)
	}
	cfg, outcomes := compile.Compile(compile.Gateway{Namespace: ns, Labels: o.Labels}, policies)
	var errs []error
	for _, out := range outcomes {
		name := compile.HookName(out.Policy)
		switch {
		case out.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, out.Err))
		case !out.Selected:
			logger(o).InfoContext(ctx, "Policy does not select this gateway", "policy", name)
		}
	}
	if n := countOtherNamespaces(policies, ns); n > 0 {
		logger(o).InfoContext(ctx, "Policies in other namespaces ignored", "namespace", ns, "count", n)
	}
	if len(errs) > 0 {
		return gateway.ApplyResult{}, fmt.Errorf("%w: %w", ErrPolicyFiles, errors.Join(errs...))
	}
	cfg.IssuedAt = time.Now().UnixNano()
	res, err := s.Apply(ctx, cfg, "standalone")
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrPolicyFiles, err)
	}
	return res, nil
}

func logger(o Options) *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

func countOtherNamespaces(p compile.Policies, ns string) int {
	n := 0
	for _, o := range p.All() {
		if o.GetNamespace() != ns {
			n++
		}
	}
	return n
}

// fingerprint hashes the names and contents of the files LoadDir reads. A
// failure is part of the hash, so that it settles like any other state.
func fingerprint(dir string) ([sha256.Size]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sha256.Sum256([]byte(err.Error())), fmt.Errorf("reading policy directory: %w", err)
	}
	h := sha256.New()
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !slices.Contains(policyfile.Extensions, strings.ToLower(filepath.Ext(name))) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return sha256.Sum256([]byte(err.Error())), fmt.Errorf("reading policy file: %w", err)
		}
		_, _ = fmt.Fprintf(h, "%d:%s\x00%d:", len(name), name, len(b))
		_, _ = h.Write(b)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}
