package strictjson

import (
	"errors"
	"strings"
	"testing"
)

// checkObject reads data as one object under opt, skipping the values.
func checkObject(data []byte, opt Options) error {
	return Decode(data, func(d *Decoder) error {
		return d.Object(&opt, func(string) error { return d.Skip() })
	})
}

func TestObjectKeys(t *testing.T) {
	opt := Options{Keys: []string{"tool", "arguments"}}
	for _, ok := range []string{`{"tool":"t"}`, ` {"tool":"t","arguments":{"a":"\ud83d\ude00"}} `, `{"tool":"\u00e9\\u"}`, `{}`} {
		if err := checkObject([]byte(ok), opt); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`{"TOOL":"t"}`, `{"tool":"t","tool":"u"}`, `{"x":1}`, "{\"tool\":\"t\xff\"}",
		`{"tool":"\ud800"}`, `{"tool":"\udc00"}`, `{"tool":"\ud800\u0041"}`, `{"tool":"t"} {}`, `[]`, `{"tool":`,
		`{"arguments":{"a":1,"a":2}}`, `{"arguments":{"a":"\udc00"}}`} {
		if err := checkObject([]byte(bad), opt); !errors.Is(err, ErrStrict) {
			t.Errorf("%s: error %v, want ErrStrict", bad, err)
		}
	}
	if err := checkObject([]byte(`{"x":1,"Tool":2}`), Options{Keys: []string{"tool"}, AllowUnknown: true}); err == nil {
		t.Error("a case variant of a known key passed with AllowUnknown")
	}
	if err := checkObject([]byte(`{"x":1}`), Options{Keys: []string{"tool"}, AllowUnknown: true}); err != nil {
		t.Errorf("an unknown key was rejected with AllowUnknown: %v", err)
	}
}

// TestParseRejectsRepeatedKeysAtEveryDepth checks Parse, which reads every
// object into a map, finds repeated keys itself, after unescaping.
func TestParseRejectsRepeatedKeysAtEveryDepth(t *testing.T) {
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"x":{"b":1,"b":1}}`, `{"x":[{"c":null,"c":null}]}`,
		`{"x":[[{"d":{},"e":0,"d":[]}]]}`} {
		if _, err := Parse(bad); !errors.Is(err, ErrStrict) || !strings.Contains(err.Error(), "more than once") {
			t.Errorf("Parse(%s) = %v, want a repeated-key rejection", bad, err)
		}
	}
	if m, err := Parse(`{"a":{"b":1},"b":{"a":1},"c":[{"a":1},{"a":2}]}`); err != nil || len(m) != 3 {
		t.Errorf("the same key in different objects: %v %v", m, err)
	}
}
