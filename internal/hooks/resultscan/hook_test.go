package resultscan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhooks/toolhooks/internal/hooks"
)

// readTool is a real tool: it reads the file named by its "path" argument,
// and fails with a ToolError quoting the file when "fail" is set.
var readTool = hooks.ToolFunc{ToolName: "read_file", Func: func(_ context.Context, args map[string]any) (string, error) {
	b, err := os.ReadFile(args["path"].(string))
	if err != nil {
		return "", err
	}
	if args["fail"] == true {
		return "", &hooks.ToolError{Text: "Error: bad line in " + string(b)}
	}
	return string(b), nil
}}

// recorder is an after hook that keeps what the after phase saw.
type recorder struct{ seen []hooks.Result }

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (r *recorder) After(_ context.Context, _ *hooks.Call, res *hooks.Result) {
	r.seen = append(r.seen, *res)
}

// secretFile writes a file holding a secret among ordinary lines.
func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.env")
	if err := os.WriteFile(p, []byte("HOST=db.internal\nGITHUB_TOKEN="+githubPAT+"\nPORT=5432\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readCall(path string, fail bool) *hooks.Call {
	c := hooks.NewCall("read_file", "{}")
	c.Args = map[string]any{"path": path, "fail": fail}
	return c
}

func mustHook(t *testing.T, cfg HookConfig) *Hook {
	t.Helper()
	h, err := NewHook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func run(t *testing.T, entries []hooks.Entry, call *hooks.Call) (hooks.Result, *recorder) {
	t.Helper()
	rec := &recorder{}
	e, err := hooks.NewExecutor(append(entries, hooks.Entry{Hook: rec}), []hooks.Tool{readTool})
	if err != nil {
		t.Fatal(err)
	}
	res := e.Execute(context.Background(), call)
	if len(rec.seen) != 1 {
		t.Fatalf("after phase ran %d times", len(rec.seen))
	}
	return res, rec
}

func secretsHook(t *testing.T, action Action) hooks.Entry {
	return hooks.Entry{Hook: mustHook(t, HookConfig{Name: "no-secrets", Tools: []string{"READ_*"},
		Scan: Config{Detectors: []string{SetSecrets}, Action: action}}), Policy: hooks.PolicyRef{Kind: "ResultPolicy", Name: "no-secrets"}}
}

func TestExecutorRedactsWhatTheToolRead(t *testing.T) {
	res, rec := run(t, []hooks.Entry{secretsHook(t, Redact)}, readCall(secretFile(t), false))
	if res.Status != hooks.StatusSucceeded || strings.Contains(res.Output, githubPAT) {
		t.Fatalf("%s: %q", res.Status, res.Output)
	}
	want := "HOST=db.internal\nGITHUB_TOKEN=" + RedactedMarker("github-token") + "\nPORT=5432\n"
	if res.Output != want {
		t.Errorf("got %q, want %q", res.Output, want)
	}
	got := rec.seen[0]
	if strings.Contains(got.Output, githubPAT) || len(got.Filtering) != 1 {
		t.Fatalf("after phase saw %q, %+v", got.Output, got.Filtering)
	}
	f := got.Filtering[0]
	if f.Hook != "no-secrets" || f.Policy.Name != "no-secrets" || f.Warn ||
		len(f.Findings) != 1 || f.Findings[0] != (hooks.ResultFinding{Rule: "github-token", Action: "Redact", Count: 1, Bytes: len(githubPAT)}) {
		t.Errorf("%+v", f)
	}
}

func TestExecutorRedactsAToolErrorText(t *testing.T) {
	res, _ := run(t, []hooks.Entry{secretsHook(t, Redact)}, readCall(secretFile(t), true))
	if res.Status != hooks.StatusFailed || !res.Failed || strings.Contains(res.Output, githubPAT) ||
		!strings.HasPrefix(res.Output, "Error: bad line in ") {
		t.Fatalf("%s: %q", res.Status, res.Output)
	}
}

func TestExecutorWithholdsTheWholeResult(t *testing.T) {
	res, rec := run(t, []hooks.Entry{secretsHook(t, Withhold)}, readCall(secretFile(t), false))
	if res.Status != hooks.StatusWithheld || res.Output != hooks.WithheldText+"no-secrets" {
		t.Fatalf("%s: %q", res.Status, res.Output)
	}
	if res.Withheld == nil || res.Withheld.Rule != RuleWithheld || res.Withheld.Hook != "no-secrets" ||
		!strings.Contains(res.Withheld.Reason, "github-token") || strings.Contains(res.Withheld.Reason, githubPAT) {
		t.Errorf("%+v", res.Withheld)
	}
	if rec.seen[0].Status != hooks.StatusWithheld || strings.Contains(rec.seen[0].Output, "HOST=") {
		t.Errorf("after phase saw %s %q", rec.seen[0].Status, rec.seen[0].Output)
	}
}

func TestWarnModeOnlyRecords(t *testing.T) {
	for _, action := range []Action{Redact, Withhold} {
		t.Run(string(action), func(t *testing.T) {
			en := secretsHook(t, action)
			en.Action = hooks.ActionWarn
			path := secretFile(t)
			res, rec := run(t, []hooks.Entry{en}, readCall(path, false))
			b, _ := os.ReadFile(path)
			if res.Status != hooks.StatusSucceeded || res.Output != string(b) {
				t.Fatalf("%s: %q", res.Status, res.Output)
			}
			f := rec.seen[0].Filtering
			if len(f) != 1 || !f[0].Warn || f[0].Findings[0].Rule != "github-token" {
				t.Errorf("%+v", f)
			}
			if withheldWarned := len(res.Warnings) == 1; withheldWarned != (action == Withhold) {
				t.Errorf("warnings %+v", res.Warnings)
			}
		})
	}
}

func TestUnselectedToolsAndCallersAreNotScanned(t *testing.T) {
	path := secretFile(t)
	b, _ := os.ReadFile(path)
	for name, cfg := range map[string]HookConfig{
		"other tool":   {Name: "h", Tools: []string{"fetch"}, Scan: Config{Detectors: []string{SetSecrets}}},
		"other sender": {Name: "h", Tools: []string{"*"}, Subjects: hooks.Subjects{Senders: []string{"ci-*"}}, Scan: Config{Detectors: []string{SetSecrets}}},
	} {
		t.Run(name, func(t *testing.T) {
			call := readCall(path, false)
			call.SenderID = "alice"
			res, rec := run(t, []hooks.Entry{{Hook: mustHook(t, cfg)}}, call)
			if res.Output != string(b) || len(rec.seen[0].Filtering) != 0 {
				t.Fatalf("%q %+v", res.Output, rec.seen[0].Filtering)
			}
		})
	}
}

// denyAll denies every call before its tool runs.
type denyAll struct{}

func (denyAll) Name() string { return "deny-all" }
func (denyAll) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Deny("no", "nothing runs"), nil
}
func (denyAll) After(context.Context, *hooks.Call, *hooks.Result) {}

func TestADeniedCallIsNotFiltered(t *testing.T) {
	res, rec := run(t, []hooks.Entry{{Hook: denyAll{}}, secretsHook(t, Withhold)}, readCall(secretFile(t), false))
	if res.Status != hooks.StatusDenied || res.Denial.Hook != "deny-all" || len(rec.seen[0].Filtering) != 0 {
		t.Fatalf("%s %+v %+v", res.Status, res.Denial, rec.seen[0].Filtering)
	}
}

// brokenFilter is a result filter that fails in the way it is told to.
type brokenFilter struct{ panics bool }

func (brokenFilter) Name() string { return "broken" }
func (brokenFilter) Before(context.Context, *hooks.Call) (hooks.Verdict, error) {
	return hooks.Allow, nil
}
func (brokenFilter) After(context.Context, *hooks.Call, *hooks.Result) {}
func (b brokenFilter) FilterResult(context.Context, *hooks.Call, string) (hooks.Filtered, error) {
	if b.panics {
		panic("filter bug")
	}
	return hooks.Filtered{}, errors.New("scanner down")
}

// A filter that cannot say what the result holds withholds it, even when
// its entry fails open or only warns: nothing reaches the caller unscanned.
func TestAFailingFilterWithholds(t *testing.T) {
	for _, panics := range []bool{false, true} {
		for _, en := range []hooks.Entry{
			{Hook: brokenFilter{panics}},
			{Hook: brokenFilter{panics}, FailOpen: true},
			{Hook: brokenFilter{panics}, Action: hooks.ActionWarn},
		} {
			res, _ := run(t, []hooks.Entry{en}, readCall(secretFile(t), false))
			if res.Status != hooks.StatusWithheld || res.Output != hooks.WithheldText+"broken" ||
				res.Withheld == nil || res.Withheld.Rule != hooks.RuleResultScanFailed {
				t.Errorf("panics=%v failOpen=%v action=%q: %s %q %+v", panics, en.FailOpen, en.Action, res.Status, res.Output, res.Withheld)
			}
		}
	}
}

func TestAScanPastItsTimeoutWithholds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.txt")
	// Many candidate lines for a custom pattern, so the scan takes longer
	// than its nanosecond budget.
	if err := os.WriteFile(p, []byte(strings.Repeat("token aaaaaaaaaaaaaaaa\n", 200_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	h := mustHook(t, HookConfig{Name: "slow", Tools: []string{"*"}, Timeout: time.Nanosecond,
		Scan: Config{Patterns: []Pattern{{Name: "tok", Regex: `token [a-z]{16}`}}}})
	res, _ := run(t, []hooks.Entry{{Hook: h}}, readCall(p, false))
	if res.Status != hooks.StatusWithheld || res.Withheld.Rule != hooks.RuleResultScanFailed || strings.Contains(res.Output, "token") {
		t.Fatalf("%s %q %+v", res.Status, res.Output, res.Withheld)
	}
}

func TestFiltersRunInOrderOnWhatTheLastLeft(t *testing.T) {
	first := hooks.Entry{Hook: mustHook(t, HookConfig{Name: "secrets", Tools: []string{"*"}, Scan: Config{Detectors: []string{SetSecrets}}})}
	second := hooks.Entry{Hook: mustHook(t, HookConfig{Name: "hosts", Tools: []string{"*"},
		Scan: Config{RemoveLines: []Pattern{{Name: "host", Regex: `^HOST=`}}}})}
	res, rec := run(t, []hooks.Entry{first, second}, readCall(secretFile(t), false))
	want := RemovedMarker("host") + "\nGITHUB_TOKEN=" + RedactedMarker("github-token") + "\nPORT=5432\n"
	if res.Output != want {
		t.Fatalf("got %q, want %q", res.Output, want)
	}
	if f := rec.seen[0].Filtering; len(f) != 2 || f[0].Hook != "secrets" || f[1].Hook != "hosts" {
		t.Errorf("%+v", f)
	}
}

func TestNewHookErrors(t *testing.T) {
	for name, cfg := range map[string]HookConfig{
		"no name":      {Tools: []string{"*"}},
		"no tools":     {Name: "h"},
		"empty glob":   {Name: "h", Tools: []string{""}},
		"bad glob":     {Name: "h", Tools: []string{"read_[file"}},
		"bad timeout":  {Name: "h", Tools: []string{"*"}, Timeout: -time.Second},
		"bad subjects": {Name: "h", Tools: []string{"*"}, Subjects: hooks.Subjects{Senders: []string{"[x"}}},
		"bad scan":     {Name: "h", Tools: []string{"*"}, Scan: Config{Detectors: []string{"no-such-rule"}}},
	} {
		if _, err := NewHook(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
