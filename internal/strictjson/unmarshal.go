package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// Unmarshal decodes data, one JSON value, into v (a non-nil pointer) as
// encoding/json does, after reading it under the package's rules, and
// under Options in every object that decodes into a struct: its keys are
// the struct's JSON names spelled exactly (encoding/json would match "HOOKS"
// to hooks, and let a later one replace an earlier), and no other key is
// admitted. Values of types that decode themselves (json.Unmarshaler,
// encoding.TextUnmarshaler, json.RawMessage) and of interface types are
// read under the package's rules only. Its rejections are *Error; an error
// of encoding/json (a value of the wrong type) is returned as it is.
func Unmarshal(data []byte, v any) error { return unmarshal(data, v, false) }

// UnmarshalOpen is Unmarshal, except that a struct's object may have keys
// the struct does not name (a newer peer's), unless they equal one of its
// names ignoring case.
func UnmarshalOpen(data []byte, v any) error { return unmarshal(data, v, true) }

func unmarshal(data []byte, v any, open bool) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return &json.InvalidUnmarshalError{Type: t}
	}
	if err := Decode(data, func(d *Decoder) error { return d.check(t, open) }); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if !open {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(v)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// check reads the next value, which decodes into a value of type t.
func (d *Decoder) check(t reflect.Type, open bool) error {
	for t.Kind() == reflect.Pointer {
		if t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) {
			return d.Skip()
		}
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return d.Skip()
	}
	switch k := d.Kind(); {
	case t.Kind() == reflect.Struct && k == '{':
		s := fieldsOf(t, open)
		return d.Object(&s.opts, func(key string) error {
			if ft, ok := s.types[key]; ok {
				return d.check(ft, open)
			}
			return d.Skip()
		})
	case t.Kind() == reflect.Map && k == '{':
		return d.Object(nil, func(string) error { return d.check(t.Elem(), open) })
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && k == '[':
		return d.Array(func() error { return d.check(t.Elem(), open) })
	default: // a scalar, an interface, or a mismatch encoding/json reports
		return d.Skip()
	}
}

// structFields are a struct type's JSON names and the types they decode into.
type structFields struct {
	opts  Options
	types map[string]reflect.Type
}

type fieldsKey struct {
	t    reflect.Type
	open bool
}

var fieldsCache sync.Map // fieldsKey -> *structFields

// fieldsOf returns t's JSON names as encoding/json finds them: exported
// fields under their tag names (or Go names), "-" left out, and the fields
// of untagged embedded structs promoted.
func fieldsOf(t reflect.Type, open bool) *structFields {
	key := fieldsKey{t, open}
	if s, ok := fieldsCache.Load(key); ok {
		return s.(*structFields)
	}
	s := &structFields{opts: Options{AllowUnknown: open}, types: map[string]reflect.Type{}}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct && depth < 8 {
					walk(et, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := s.types[name]; !dup {
				s.types[name] = ft
				s.opts.Keys = append(s.opts.Keys, name)
			}
		}
	}
	walk(t, 0)
	fieldsCache.Store(key, s)
	return s
}
