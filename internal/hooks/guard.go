package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
)

// RuleRuntimeGuardPanic is the rule of a denial whose runtime check panicked.
const RuleRuntimeGuardPanic = "RuntimeGuardPanic"

// RuntimeGuard is implemented by hooks that can re-check, while a tool runs,
// what it is about to do: the program it is about to start and the files it
// is about to open. The before phase decides on the call's arguments; these
// checks decide on what the tool actually does with them (the final argv of
// every command after expansion, every file a shell redirection opens), with
// the same rules. Both must be safe for concurrent use.
type RuntimeGuard interface {
	// CheckExec decides whether argv may be run with working directory dir;
	// env holds the NAME=value variables the tool adds to its fixed base
	// environment for this command (set by the script), in order.
	CheckExec(ctx context.Context, call *Call, dir string, env, argv []string) Verdict
	// CheckOpen decides whether the file at path (absolute) may be opened,
	// for writing when write is set.
	CheckOpen(ctx context.Context, call *Call, path string, write bool) Verdict
}

// SystemPathGuard is implemented by runtime guards that can tell which of
// the system files outside the workspace that every program needs (the
// dynamic loader's files, libraries, /usr, toolchains) their rules forbid,
// apart from the fence of their rules that only admit some places (a
// workspace-only rule, a contract's path scope): those keep tools out, but
// the programs the tools start need the system to run at all. A runtime
// guard that does not implement it is asked CheckOpen instead.
type SystemPathGuard interface {
	// CheckSystemPath decides whether programs may read (and execute) the
	// system path (absolute).
	CheckSystemPath(ctx context.Context, call *Call, path string) Verdict
}

// RuntimeDenial is the error a tool returns when its Guard refused an action.
// The executor turns it into a denied result carrying Decision.
type RuntimeDenial struct {
	Decision Decision
	denial   string // DenialText + hook name
}

func (d *RuntimeDenial) Error() string {
	return fmt.Sprintf("denied at run time by hook %s (rule %s): %s", d.Decision.Hook, d.Decision.Rule, d.Decision.Reason)
}

// Guard is the runtime check of one tool call: every hook of the executor's
// list that implements RuntimeGuard, with its entry's enforcement action. The
// executor attaches one to the context of every tool it runs (possibly with
// no checkers); tools that start programs or open files by name must ask it
// and refuse to act without one (see GuardFromContext).
type Guard struct {
	call     *Call
	checkers []*entry
	log      *slog.Logger
	gen      uint64 // the executor's; see PolicyKey

	mu       sync.Mutex
	warnings []Decision
}

// NewGuard returns a guard for call that consults the hooks of entries that
// implement RuntimeGuard. It is for tools run outside an Executor (tests,
// benchmarks); the executor builds its guards itself.
func NewGuard(call *Call, entries ...Entry) (*Guard, error) {
	e, err := NewExecutor(entries, nil)
	if err != nil {
		return nil, err
	}
	return e.newGuard(call), nil
}

// newGuard returns the guard for one call.
func (e *Executor) newGuard(call *Call) *Guard {
	return &Guard{call: call, checkers: e.guards, log: e.log, gen: e.gen}
}

// guardEntries returns the entries whose hook implements RuntimeGuard.
func guardEntries(entries []entry) []*entry {
	var out []*entry
	for i := range entries {
		if _, ok := entries[i].hook.(RuntimeGuard); ok {
			out = append(out, &entries[i])
		}
	}
	return out
}

// Exec asks every checker whether argv may run in dir with env added. It returns nil or a
// *RuntimeDenial; a Warn entry's denial is recorded as a warning instead.
func (g *Guard) Exec(ctx context.Context, dir string, env, argv []string) error {
	return g.check(ctx, func(rg RuntimeGuard) Verdict { return rg.CheckExec(ctx, g.call, dir, env, argv) })
}

// Open asks every checker whether path may be opened (for writing when
// write is set). It returns nil or a *RuntimeDenial.
func (g *Guard) Open(ctx context.Context, path string, write bool) error {
	return g.check(ctx, func(rg RuntimeGuard) Verdict { return rg.CheckOpen(ctx, g.call, path, write) })
}

// Refuses reports whether a checker whose denials are enforced (not a Warn
// entry's) refuses opening path for reading. Unlike Open it records no
// warning: it is for leaving out of a listing (glob expansion) the names
// a tool must not reveal, and for compiling the path rules into the
// sandbox; what is then done with a name left in is checked by Open and
// Exec as usual.
func (g *Guard) Refuses(ctx context.Context, path string) bool {
	return g.refuses(ctx, func(rg RuntimeGuard) Verdict { return rg.CheckOpen(ctx, g.call, path, false) })
}

// RefusesWrite is Refuses for opening path for writing (creating,
// changing, removing or renaming it).
func (g *Guard) RefusesWrite(ctx context.Context, path string) bool {
	return g.refuses(ctx, func(rg RuntimeGuard) Verdict { return rg.CheckOpen(ctx, g.call, path, true) })
}

// RefusesSystem is Refuses for a system path that programs need (see
// SystemPathGuard): checkers that implement SystemPathGuard are asked
// CheckSystemPath, the others CheckOpen.
func (g *Guard) RefusesSystem(ctx context.Context, path string) bool {
	return g.refuses(ctx, func(rg RuntimeGuard) Verdict {
		if sg, ok := rg.(SystemPathGuard); ok {
			return sg.CheckSystemPath(ctx, g.call, path)
		}
		return rg.CheckOpen(ctx, g.call, path, false)
	})
}

func (g *Guard) refuses(ctx context.Context, ask func(RuntimeGuard) Verdict) bool {
	if ctx.Err() != nil {
		return true
	}
	for _, en := range g.checkers {
		if en.action == ActionWarn {
			continue
		}
		v, ok := g.ask(ctx, en, ask)
		if ok && !v.Allowed {
			return true
		}
	}
	return false
}

// PolicyKey identifies the answers of Refuses, RefusesWrite and
// RefusesSystem: two guards with the same key give the same answers for the
// same file system. It names the executor (its checkers) and what of the
// call a checker may decide on besides the path: the tool, the session,
// channel and sender, and the verified caller.
func (g *Guard) PolicyKey() string {
	var b strings.Builder
	fmt.Fprintf(&b, "executor %d", g.gen)
	if len(g.checkers) == 0 || g.call == nil {
		return b.String()
	}
	c := g.call
	fmt.Fprintf(&b, "\x00%q\x00%q\x00%q\x00%q", c.Tool, c.SessionID, c.ChannelID, c.SenderID)
	if id := c.Caller; id != nil {
		fmt.Fprintf(&b, "\x00%q\x00%q\x00%q\x00%q", id.Username, id.UID, id.Kind, id.Groups)
		keys := slices.Sorted(maps.Keys(id.Extra))
		for _, k := range keys {
			fmt.Fprintf(&b, "\x00%q=%q", k, id.Extra[k])
		}
	}
	return b.String()
}

func (g *Guard) check(ctx context.Context, ask func(RuntimeGuard) Verdict) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("call abandoned: %w", context.Cause(ctx))
	}
	for _, en := range g.checkers {
		v, ok := g.ask(ctx, en, ask)
		if !ok {
			continue // a fail-open entry panicked
		}
		if v.Allowed {
			continue
		}
		d := en.decision(v.Rule, v.Reason)
		d.Allowed, d.Layer = false, LayerRuntime
		if en.action == ActionWarn {
			g.warn(d)
			continue
		}
		return &RuntimeDenial{Decision: d, denial: en.denial}
	}
	return nil
}

// ask runs one checker, turning a panic into a denial unless the entry is
// fail-open (ok is then false).
func (g *Guard) ask(ctx context.Context, en *entry, ask func(RuntimeGuard) Verdict) (v Verdict, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			g.log.ErrorContext(ctx, "Runtime check panicked", "hook", en.name, "correlationId", g.correlationID(),
				"failOpen", en.failOpen, "panic", r)
			v, ok = Deny(RuleRuntimeGuardPanic, fmt.Sprintf("Hook %s panicked checking the call at run time: %v", en.name, r)), !en.failOpen
		}
	}()
	return ask(en.hook.(RuntimeGuard)), true
}

func (g *Guard) correlationID() string {
	if g.call == nil {
		return ""
	}
	return g.call.CorrelationID
}

// warn records a Warn entry's would-be denial, once per hook and rule.
func (g *Guard) warn(d Decision) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !hasWarning(g.warnings, d) {
		g.warnings = append(g.warnings, d)
	}
}

// hasWarning reports whether ws holds a warning of d's hook and rule.
func hasWarning(ws []Decision, d Decision) bool {
	for _, w := range ws {
		if w.Hook == d.Hook && w.Rule == d.Rule {
			return true
		}
	}
	return false
}

// Warnings returns the would-be denials of Warn entries recorded so far.
func (g *Guard) Warnings() []Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Decision(nil), g.warnings...)
}

// GitProgramsPolicy is implemented by runtime guards that decide whether
// git, in the programs a tool starts, may run the programs its
// configuration names (external diff, textconv, fsmonitor, hooks, pager,
// credential helpers).
type GitProgramsPolicy interface {
	// AllowsGitPrograms reports whether the policy binds call and, when it
	// does, whether it allows them.
	AllowsGitPrograms(call *Call) (binds, allows bool)
}

// AllowsGitPrograms reports whether git may run the programs its
// configuration names in the programs the tool starts: only when a
// checker that binds the call allows it and none that binds it refuses
// (as for every protection, the bound policies' union wins). Without such
// a checker they stay off.
func (g *Guard) AllowsGitPrograms() bool {
	allowed := false
	for _, en := range g.checkers {
		p, ok := en.hook.(GitProgramsPolicy)
		if !ok {
			continue
		}
		binds, allows := p.AllowsGitPrograms(g.call)
		if !binds {
			continue
		}
		if !allows {
			return false
		}
		allowed = true
	}
	return allowed
}

type guardKey struct{}

// WithGuard returns a context carrying g for a tool to find with GuardFromContext.
func WithGuard(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// ErrNoGuard is returned by tools that act on the file system or start
// programs when their context carries no Guard: they refuse rather than run
// unchecked.
var ErrNoGuard = errors.New("no runtime guard in the tool's context; refusing to act unchecked")

// GuardFromContext returns the Guard the executor attached to a tool's
// context, or ErrNoGuard.
func GuardFromContext(ctx context.Context) (*Guard, error) {
	g, ok := ctx.Value(guardKey{}).(*Guard)
	if !ok || g == nil {
		return nil, ErrNoGuard
	}
	return g, nil
}
