package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

type inner struct {
	Name string          `json:"name"`
	Raw  json.RawMessage `json:"raw,omitempty"`
}

type Embedded struct {
	Kind string `json:"kind"`
}

type outer struct {
	Embedded
	Revision string           `json:"revision"`
	Hooks    []inner          `json:"hooks"`
	ByName   map[string]inner `json:"byName"`
	Ptr      *inner           `json:"ptr"`
	Any      any              `json:"any"`
	Skipped  string           `json:"-"`
}

func TestUnmarshalReadsKeysExactly(t *testing.T) {
	var ok outer
	if err := Unmarshal([]byte(`{"kind":"k","revision":"r","hooks":[{"name":"a","raw":{"x":1,"X":2}}],`+
		`"byName":{"b":{"name":"b"}},"ptr":{"name":"p"},"any":{"A":1,"a":2}}`), &ok); err != nil {
		t.Fatal(err)
	}
	if ok.Kind != "k" || ok.Hooks[0].Name != "a" || ok.ByName["b"].Name != "b" || ok.Ptr.Name != "p" {
		t.Errorf("decoded %+v", ok)
	}
	for name, text := range map[string]string{
		"a key in another case after it":           `{"hooks":[],"HOOKS":[{"name":"x"}]}`,
		"a key twice":                              `{"hooks":[],"hooks":[{"name":"x"}]}`,
		"a key in another case in an element":      `{"hooks":[{"name":"a","Name":"b"}]}`,
		"a key in another case in a map's value":   `{"byName":{"b":{"NAME":"b"}}}`,
		"a key in another case behind a pointer":   `{"ptr":{"Name":"p"}}`,
		"an embedded struct's key in another case": `{"Kind":"k"}`,
		"an unknown key":                           `{"extra":1}`,
		"a field left out by its tag":              `{"Skipped":"x"}`,
		"a key twice inside raw JSON":              `{"hooks":[{"name":"a","raw":{"x":1,"x":2}}]}`,
		"data after the value":                     `{} {}`,
	} {
		var v outer
		if err := Unmarshal([]byte(text), &v); !errors.Is(err, ErrStrict) {
			t.Errorf("%s: %s gave %v, want a strict rejection", name, text, err)
		}
	}
	// Open: unknown keys pass, other spellings of known ones do not.
	var v outer
	if err := UnmarshalOpen([]byte(`{"revision":"r","extra":1}`), &v); err != nil || v.Revision != "r" {
		t.Errorf("open: %v %+v", err, v)
	}
	if err := UnmarshalOpen([]byte(`{"revision":"r","REVISION":"s"}`), &v); !errors.Is(err, ErrStrict) {
		t.Errorf("open admitted another spelling: %v", err)
	}
	// A value of the wrong type is encoding/json's error.
	var te *json.UnmarshalTypeError
	if err := Unmarshal([]byte(`{"revision":1}`), &v); !errors.As(err, &te) {
		t.Errorf("wrong type gave %v", err)
	}
}
