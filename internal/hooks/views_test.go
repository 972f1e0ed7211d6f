package hooks_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// textHook reads the arguments text a plugin is sent (Call.ArgsText) with
// the shared parser, as an out-of-process plugin would.
func textHook(seen *map[string]any) hooks.Hook {
	return hooks.HookFuncs{HookName: "text", BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
		m, err := hooks.ParseArgs(c.ArgsText())
		if err != nil {
			return hooks.Verdict{}, err
		}
		*seen = m
		return hooks.Allow, nil
	}}
}

// FuzzHookAndToolSeeTheSameArguments runs arbitrary argument text through
// the executor with a native hook, a hook that parses the text a plugin
// is sent and a tool, and checks that either the call is denied before any of
// them runs, or all three see the same value; and that the canonical text
// the tool would send on (to an upstream MCP server, say) reads back to
// that value and is stable.
func FuzzHookAndToolSeeTheSameArguments(f *testing.F) {
	for _, s := range argsSeeds {
		f.Add(s)
	}
	f.Add(`{"path":"a<b>&c\u2028","n":1.50e+3,"l":[{"k":null}],"s":"\ud83d\ude00\"\\\/"}`)
	f.Fuzz(func(t *testing.T, text string) {
		var native, plain, tool map[string]any
		ran := 0
		e := mustExecutor(t, []hooks.Entry{
			{Hook: hooks.HookFuncs{HookName: "native", BeforeFunc: func(_ context.Context, c *hooks.Call) (hooks.Verdict, error) {
				native, ran = c.Args, ran+1
				return hooks.Allow, nil
			}}},
			{Hook: textHook(&plain)},
		}, []hooks.Tool{hooks.ToolFunc{ToolName: "t", Func: func(_ context.Context, args map[string]any) (string, error) {
			tool, ran = args, ran+1
			return "ok", nil
		}}}, hooks.WithLogger(discardLogger()))
		call := hooks.NewCall("t", text)
		res := e.Execute(context.Background(), call)
		if call.ArgsErr != nil {
			if res.Status != hooks.StatusDenied || ran != 0 {
				t.Fatalf("%q: invalid arguments (%v) gave %s with %d runs", text, call.ArgsErr, res.Status, ran)
			}
			return
		}
		if res.Status != hooks.StatusSucceeded {
			t.Fatalf("%q: %s %+v", text, res.Status, res.Denial)
		}
		if !reflect.DeepEqual(native, tool) || !reflect.DeepEqual(plain, tool) {
			t.Fatalf("%q: the native hook saw %#v, the plain hook %#v, the tool %#v", text, native, plain, tool)
		}
		canon, err := strictjson.Marshal(tool)
		if err != nil {
			t.Fatalf("%q: encoding %#v: %v", text, tool, err)
		}
		back, err := hooks.ParseArgs(string(canon))
		if err != nil || !reflect.DeepEqual(back, tool) {
			t.Fatalf("%q: the canonical text %s reads back as %#v (%v), not %#v", text, canon, back, err, tool)
		}
		if again, _ := strictjson.Marshal(back); !bytes.Equal(again, canon) {
			t.Fatalf("%q: the canonical text is not stable: %s, then %s", text, canon, again)
		}
	})
}
