package resultscan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
	"github.com/toolhooks/toolhooks/internal/strictjson"
)

// RuleNotJSON names the finding of a result that path removals could not
// apply to because it is not a JSON document, or one nested deeper than
// MaxPathDepth.
const RuleNotJSON = "resultNotJSON"

// MaxPathDepth bounds the nesting of the JSON documents path rules apply to:
// selecting with descendant segments costs the square of the depth, which
// a deeper result could use to hold a scan far past its timeout.
const MaxPathDepth = 128

// PathRule is a removal by JSONPath (RFC 9535): in a result that is a JSON
// document, each value the path selects is replaced by RemovedMarker(Name).
type PathRule struct {
	// Name names the rule in markers, findings and metrics.
	Name string
	// Path is the JSONPath query, such as $.user.ssn or $..password.
	Path string
	// Action overrides Config.Action for this rule when set.
	Action Action
}

type scanPath struct {
	name   string
	path   *jsonpath.Path
	action Action
}

func compilePaths(ps []PathRule, action Action, seen map[string]bool) ([]scanPath, error) {
	out := make([]scanPath, 0, len(ps))
	for i, p := range ps {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("removePaths %d: a name is required", i)
		case seen[p.Name]:
			return nil, fmt.Errorf("removePaths %q: the name is used twice (rules' names, built-in ones included, are unique)", p.Name)
		}
		seen[p.Name] = true
		path, err := jsonpath.Parse(p.Path)
		if err != nil {
			return nil, fmt.Errorf("removePaths %q: %w", p.Name, err)
		}
		if len(path.Query().Segments()) == 0 {
			return nil, fmt.Errorf("removePaths %q: path %q selects the whole result; use a Withhold pattern for that", p.Name, p.Path)
		}
		a := action
		if p.Action != "" {
			if a = p.Action; a.strength() == 0 {
				return nil, fmt.Errorf("removePaths %q: action %q: want Redact, Withhold or Warn", p.Name, p.Action)
			}
		}
		out = append(out, scanPath{name: p.Name, path: path, action: a})
	}
	return out, nil
}

// removePaths applies the path rules to text. A result that is not a JSON
// document (or is nested deeper than MaxPathDepth) cannot be shown to lack what the paths select, so it is withheld
// (or, when every path rule only warns, recorded as RuleNotJSON). Empty
// text has nothing to remove. The text returned is re-encoded only when a
// value was removed.
func (s *Scanner) removePaths(ctx context.Context, text string) (string, []Finding, error) {
	if len(s.paths) == 0 || strings.TrimSpace(text) == "" {
		return text, nil, nil
	}
	var doc any
	if strictjson.Check([]byte(text)) != nil || nesting(text) > MaxPathDepth {
		return text, []Finding{{Rule: RuleNotJSON, Action: s.pathsAction, Count: 1, Bytes: len(text)}}, nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return "", nil, fmt.Errorf("%w: decoding the result: %w", ErrScan, err)
	}
	var findings []Finding
	var cuts []*spec.LocatedNode
	for _, p := range s.paths {
		if ctx.Err() != nil {
			return "", nil, scanEnded(ctx)
		}
		nodes := p.path.SelectLocated(doc)
		if len(nodes) == 0 {
			continue
		}
		f := Finding{Rule: p.name, Action: p.action, Count: len(nodes)}
		for _, n := range nodes {
			b, _ := json.Marshal(n.Node)
			f.Bytes += len(b)
			if p.action == Redact {
				cuts = append(cuts, &spec.LocatedNode{Node: p.name, Path: n.Path})
			}
		}
		findings = append(findings, f)
	}
	if len(cuts) == 0 {
		return text, findings, nil
	}
	// Deepest and last first, so a value's parent is replaced after it.
	slices.SortStableFunc(cuts, func(a, b *spec.LocatedNode) int { return b.Path.Compare(a.Path) })
	for _, c := range cuts {
		doc = replaceAt(doc, c.Path, RemovedMarker(c.Node.(string)))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if strings.Contains(strings.TrimSpace(text), "\n") {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(doc); err != nil {
		return "", nil, fmt.Errorf("%w: re-encoding the result: %w", ErrScan, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), findings, nil
}

// replaceAt returns doc with the value at path replaced by v.
func replaceAt(doc any, path spec.NormalizedPath, v any) any {
	if len(path) == 0 {
		return v
	}
	switch sel := path[0].(type) {
	case spec.Name:
		if m, ok := doc.(map[string]any); ok {
			if old, ok := m[string(sel)]; ok {
				m[string(sel)] = replaceAt(old, path[1:], v)
			}
		}
	case spec.Index:
		if a, ok := doc.([]any); ok && int(sel) >= 0 && int(sel) < len(a) {
			a[sel] = replaceAt(a[sel], path[1:], v)
		}
	}
	return doc
}

// nesting returns the deepest nesting of arrays and objects in text, a valid
// JSON document.
func nesting(text string) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
