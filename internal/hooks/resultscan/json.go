package resultscan

import (
	"context"
	"slices"
)

// ScanValue scans every string of a JSON value (as encoding/json decodes
// it: maps, slices, strings, numbers, booleans, nil), object keys
// included, and returns the value with its redactions applied (a new value;
// v is not changed), and the findings of all its strings together.
// Withheld outcomes carry no value.
func (s *Scanner) ScanValue(ctx context.Context, v any) (any, Outcome, error) {
	acc := map[string]*Finding{}
	out, withheld, err := s.scanValue(ctx, v, acc)
	if err != nil {
		return nil, Outcome{}, err
	}
	o := Outcome{Withheld: withheld}
	for _, r := range append(s.Rules(), RuleTooLarge) {
		if f := acc[r]; f != nil {
			o.Findings = append(o.Findings, *f)
		}
	}
	if withheld {
		return nil, o, nil
	}
	return out, o, nil
}

func (s *Scanner) scanValue(ctx context.Context, v any, acc map[string]*Finding) (any, bool, error) {
	switch v := v.(type) {
	case string:
		o, err := s.Scan(ctx, v)
		if err != nil {
			return nil, false, err
		}
		for _, f := range o.Findings {
			if a := acc[f.Rule]; a != nil {
				a.Count += f.Count
				a.Bytes += f.Bytes
			} else {
				acc[f.Rule] = &f
			}
		}
		return o.Text, o.Withheld, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		withheld := false
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // findings and collisions independent of map order
		for _, k := range keys {
			nk, w1, err := s.scanValue(ctx, k, acc)
			if err != nil {
				return nil, false, err
			}
			nv, w2, err := s.scanValue(ctx, v[k], acc)
			if err != nil {
				return nil, false, err
			}
			withheld = withheld || w1 || w2
			key, _ := nk.(string)
			for _, taken := out[key]; taken; _, taken = out[key] {
				key += "_" // two keys redacted alike stay two keys
			}
			out[key] = nv
		}
		return out, withheld, nil
	case []any:
		out := make([]any, len(v))
		withheld := false
		for i, e := range v {
			ne, w, err := s.scanValue(ctx, e, acc)
			if err != nil {
				return nil, false, err
			}
			out[i], withheld = ne, withheld || w
		}
		return out, withheld, nil
	default:
		return v, false, nil
	}
}
