package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolhooks/toolhooks/internal/gatewayconfig"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/wire"
)

// Errors Apply returns, for errors.Is.
var (
	// ErrInvalidConfig: the configuration does not validate or build.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrStaleConfig: the configuration was issued before the one in force.
	ErrStaleConfig = errors.New("stale configuration")
)

// ApplyResult says what Apply did.
type ApplyResult struct {
	wire.ConfigStatus
	// Changed is false when the revision was already in force (a no-op).
	Changed bool `json:"changed"`
}

// Apply puts cfg in force, as a push does: it rejects cfg when it was issued
// before the configuration in force (cfg.IssuedAt is older), does nothing
// when its revision is already in force, and otherwise validates and builds a
// new executor from cfg's hooks and swaps it in atomically. On any error the
// configuration in force stays. An empty cfg.Revision is computed. source
// names the origin in logs ("push", "standalone").
//
// The hook list must begin with the AuditLog hook (the compiler always puts
// it there): a configuration without it is invalid, so no push can turn
// auditing off. A configuration holding no hook that decides on calls (no
// policy selects this gateway, or only result policies do) comes into force as the no-policy state: every call is
// denied with RuleNoPolicy and the gateway is not ready (its revision is
// still reported, so that its pusher does not push it again).
func (s *Server) Apply(ctx context.Context, cfg *gatewayconfig.Config, source string) (ApplyResult, error) {
	if cfg == nil {
		return ApplyResult{}, fmt.Errorf("%w: no configuration", ErrInvalidConfig)
	}
	if cfg.Revision == "" {
		cfg.Revision = gatewayconfig.ComputeRevision(cfg.Hooks)
	}
	if len(cfg.Hooks) == 0 || cfg.Hooks[0].Kind != gatewayconfig.KindAuditLog {
		return ApplyResult{}, fmt.Errorf("%w: the hook list must begin with the %s hook", ErrInvalidConfig, gatewayconfig.KindAuditLog)
	}
	for i, h := range cfg.Hooks {
		if i > 0 && h.Kind == gatewayconfig.KindAuditLog {
			return ApplyResult{}, fmt.Errorf("%w: hook %d (%q) is a second %s hook; the list holds exactly one, first",
				ErrInvalidConfig, i, h.Name, gatewayconfig.KindAuditLog)
		}
	}

	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.cur.Load()
	if cur.cfg != nil {
		if cfg.IssuedAt < cur.cfg.IssuedAt {
			return ApplyResult{ConfigStatus: s.Status()}, fmt.Errorf(
				"%w: issued at %d, before the configuration in force (revision %s, issued at %d)",
				ErrStaleConfig, cfg.IssuedAt, cur.cfg.Revision, cur.cfg.IssuedAt)
		}
		// The same revision is the same content, already validated; a
		// revision that does not hash the content is refused by Build.
		if cfg.Revision == cur.cfg.Revision && cfg.Revision == gatewayconfig.ComputeRevision(cfg.Hooks) {
			if cfg.IssuedAt > cur.cfg.IssuedAt {
				next := *cur.cfg
				next.IssuedAt = cfg.IssuedAt
				s.cur.Store(&active{exec: cur.exec, entries: cur.entries, cfg: &next, appliedAt: cur.appliedAt, noPolicy: cur.noPolicy})
				s.metrics.setConfig(&next, cur.entries)
			}
			return ApplyResult{ConfigStatus: s.Status()}, nil
		}
	}
	entries, err := gatewayconfig.Build(cfg, gatewayconfig.BuildOptions{
		Workspace:   s.opts.Workspace,
		Audit:       s.opts.Audit,
		DecisionLog: s.opts.DecisionLog,
		MaskReason:  s.opts.MaskReason,
		Runtime:     []any{s.state, s.opts.Plugins},
		Traits:      s.opts.ToolTraits,
	})
	if err != nil {
		return ApplyResult{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var exec *hooks.Executor
	noPolicy := ""
	if !cfg.DecidesCalls() {
		noPolicy = NoPolicySelectedReason
		exec, err = s.noPolicyExecutor(noPolicy)
		entries = nil
	} else {
		exec, err = hooks.NewExecutor(entries, s.tools, hooks.WithToolTimeout(s.opts.ToolTimeout), hooks.WithLogger(s.log),
			hooks.WithApprover(s.opts.Approver), s.tracerOption())
	}
	if err != nil {
		return ApplyResult{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	own := *cfg
	own.Hooks = append([]gatewayconfig.Hook(nil), cfg.Hooks...)
	s.metrics.setConfig(&own, entries)
	s.cur.Store(&active{exec: exec, entries: entries, cfg: &own, appliedAt: time.Now(), noPolicy: noPolicy})
	if noPolicy == "" {
		// A list with no policy denies everything; the budgets and windows of
		// the policies it lacks are kept for when they return.
		s.state.RetainLive(own.Live())
	}
	if s.opts.OnApplied != nil {
		s.opts.OnApplied(&own)
	}
	s.notifyWatchers()
	prev := ""
	if cur.cfg != nil {
		prev = cur.cfg.Revision
	}
	s.log.InfoContext(ctx, "Configuration applied", "source", source, "revision", own.Revision,
		"previousRevision", prev, "issuedAt", own.IssuedAt, "hooks", len(own.Hooks))
	if noPolicy != "" {
		s.log.ErrorContext(ctx, "Denying every call: no policy in force", "source", source, "revision", own.Revision, "reason", noPolicy)
	}
	return ApplyResult{ConfigStatus: s.Status(), Changed: true}, nil
}
