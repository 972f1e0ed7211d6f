package plugins

import (
	"context"
	"runtime"
	"testing"
)

// stdioOf returns the stdio transport of the plugin behind a hook.
func stdioOf(t *testing.T, hk any) *stdioTransport {
	t.Helper()
	ph, ok := hk.(*pluginHook)
	if !ok {
		t.Fatalf("%T is not a plugin hook", hk)
	}
	st, ok := ph.p.tr.(*stdioTransport)
	if !ok {
		t.Fatalf("%T is not a stdio transport", ph.p.tr)
	}
	return st
}

func (m *Manager) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.plugins)
}

func TestPluginsAreReusedAcrossPushes(t *testing.T) {
	m := newManager(t, Options{})
	h := spec("reused", Spec{Stdio: nodePlugin(t, "allow.mjs", nil)})
	first := build(t, m, h)
	if _, err := first.Before(context.Background(), newCall("read_file", `{}`)); err != nil {
		t.Fatal(err)
	}
	proc := stdioOf(t, first).cur.Load()

	// A push that changes only the timeout, tools and failure policy keeps the process.
	h2 := h
	p2 := *h.Spec
	p2.TimeoutMillis, p2.FailOpen, p2.Tools = 100, true, []string{"shell"}
	h2.Spec = &p2
	second := build(t, m, h2)
	if got := stdioOf(t, second).cur.Load(); got != proc {
		t.Fatal("an unchanged transport started a new process")
	}

	// A changed transport is a new plugin; Retain with the new configuration stops the old one.
	h3 := h
	p3 := *h.Spec
	p3.Stdio = &StdioSpec{Command: p3.Stdio.Command, Args: p3.Stdio.Args, Env: map[string]string{"X": "1"}}
	h3.Spec = &p3
	third := build(t, m, h3)
	if stdioOf(t, third).cur.Load() == proc {
		t.Fatal("a changed transport reused the old process")
	}
	m.Retain([]Ref{h3})
	m.stops.Wait()
	select {
	case <-proc.done:
	default:
		t.Fatal("Retain did not stop the plugin the configuration no longer has")
	}
	_, err := first.Before(context.Background(), newCall("read_file", `{}`))
	wantKind(t, err, KindUnavailable)
	if _, err := third.Before(context.Background(), newCall("read_file", `{}`)); err != nil {
		t.Fatalf("the retained plugin: %v", err)
	}
	if n := m.count(); n != 1 {
		t.Fatalf("%d plugins run, want 1", n)
	}
	if s := m.States(); len(s) != 1 || s[h.Name] != StateClosed {
		t.Fatalf("States() = %v", s)
	}
}

func TestUnreferencedPluginsStop(t *testing.T) {
	m := newManager(t, Options{})
	h := spec("dropped", Spec{Stdio: nodePlugin(t, "allow.mjs", nil)})
	hk := build(t, m, h)
	proc := stdioOf(t, hk).cur.Load()
	hk = nil //nolint:ineffassign,wastedassign // drop the only reference
	_ = hk
	eventually(t, "the unreferenced plugin is stopped", func() bool {
		runtime.GC()
		return m.count() == 0
	})
	m.stops.Wait()
	<-proc.done
}

func TestClose(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	hk := build(t, m, spec("closed", Spec{Stdio: nodePlugin(t, "allow.mjs", nil)}))
	proc := stdioOf(t, hk).cur.Load()
	m.Close()
	<-proc.done
	if _, err := m.Build(spec("late", Spec{Stdio: nodePlugin(t, "allow.mjs", nil)})); err == nil {
		t.Fatal("Build after Close succeeded")
	}
	_, err = hk.Before(context.Background(), newCall("read_file", `{}`))
	wantKind(t, err, KindUnavailable)
}
