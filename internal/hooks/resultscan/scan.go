// Package resultscan finds secrets, personal data and other unwanted text in
// what a tool returned, and redacts or withholds it before the caller (the
// model) sees it. It has built-in detectors (RuleSets, RuleNames), custom
// RE2 patterns, and removal of lines, each with an action: Redact replaces
// the match with a marker naming the rule (never the value), Withhold
// replaces the whole result, Warn only records.
//
// A scan fails closed: a result over the size bound is withheld, not
// skipped, and a scan that is cancelled or times out returns an error for
// the caller to withhold the result on.
package resultscan

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Action is what happens to a match.
type Action string

// Actions, strongest last.
const (
	// Warn records the match and leaves the result as it is.
	Warn Action = "Warn"
	// Redact replaces the match with RedactedMarker(rule).
	Redact Action = "Redact"
	// Withhold replaces the whole result.
	Withhold Action = "Withhold"
)

func (a Action) strength() int {
	switch a {
	case Withhold:
		return 3
	case Redact:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// RedactedMarker is the text that replaces a redacted match of rule.
func RedactedMarker(rule string) string { return "[REDACTED:" + rule + "]" }

// RemovedMarker is the text that replaces a line removed by rule.
func RemovedMarker(rule string) string { return "[REMOVED:" + rule + "]" }

// DefaultMaxBytes bounds the results a Scanner scans when Config.MaxBytes is zero.
const DefaultMaxBytes = 64 << 20

// RuleTooLarge names the finding of a result withheld for its size.
const RuleTooLarge = "resultTooLarge"

// chunkSize bounds the text a custom pattern runs on at once: patterns run
// on pieces of the text that end at line ends, so that a scan can be
// cancelled between them.
const chunkSize = 64 << 10

// Pattern is a custom rule: an RE2 regular expression.
type Pattern struct {
	// Name names the rule in markers, findings and metrics.
	Name string
	// Regex is the RE2 expression; with Config.Patterns it matches within
	// pieces of up to 64 KiB of text that end at line ends, with
	// Config.RemoveLines a line containing a match is removed (^ and $
	// match at line ends).
	Regex string
	// Action overrides Config.Action for this rule when set.
	Action Action
}

// Config is what a Scanner looks for and what it does with what it finds.
type Config struct {
	// Detectors names built-in rule sets (RuleSets) or single rules (RuleNames).
	Detectors []string
	// Patterns are custom rules.
	Patterns []Pattern
	// RemoveLines are rules whose matching lines are removed (Redact),
	// withhold the result (Withhold) or are recorded (Warn).
	RemoveLines []Pattern
	// RemovePaths are JSONPath rules whose selected values are removed
	// (Redact), withhold the result (Withhold) or are recorded (Warn). They
	// apply before the other rules, to results that are JSON documents; a
	// result that is not one is withheld (recorded only, when every path
	// rule warns).
	RemovePaths []PathRule
	// Action is the action of the detectors, and of the patterns and
	// removals that name none. Empty means Redact.
	Action Action
	// MaxBytes bounds the size of a result; a larger one is withheld
	// (rule RuleTooLarge). Zero means DefaultMaxBytes.
	MaxBytes int
}

// Finding is what one rule found in a result: never the values.
type Finding struct {
	Rule   string `json:"rule"`
	Action Action `json:"action"`
	// Count is the number of matches.
	Count int `json:"count"`
	// Bytes is the number of bytes matched (for Redact, redacted).
	Bytes int `json:"bytes"`
}

// Outcome is the result of a scan.
type Outcome struct {
	// Text is the result as the caller may see it: the input with its
	// redactions and removals; empty when Withheld.
	Text string
	// Withheld is true when a Withhold rule matched (or the result was too
	// large): the caller must not see any of the result.
	Withheld bool
	// Findings are the rules that matched, in rule order.
	Findings []Finding
}

// Changed reports whether the caller sees something other than the input.
func (o *Outcome) Changed() bool {
	if o.Withheld {
		return true
	}
	for _, f := range o.Findings {
		if f.Action != Warn {
			return true
		}
	}
	return false
}

// Scanner scans results. It is immutable and safe for concurrent use.
type Scanner struct {
	detectors []scanDetector
	patterns  []scanPattern
	removals  []scanPattern
	paths     []scanPath
	// pathsAction is what happens to a result that is not JSON.
	pathsAction Action
	maxBytes    int
	rules       []string // every rule's name, in the order findings are reported
}

type scanDetector struct {
	*detector
	action Action
}

type scanPattern struct {
	name   string
	re     *regexp.Regexp
	action Action
}

// New checks cfg and builds its Scanner: an unknown detector, an invalid
// or empty regular expression, a rule without a name, a name used twice
// or an unknown action is an error.
func New(cfg Config) (*Scanner, error) {
	action := cfg.Action
	if action == "" {
		action = Redact
	}
	if action.strength() == 0 {
		return nil, fmt.Errorf("action %q: want Redact, Withhold or Warn", cfg.Action)
	}
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("maxBytes %d: want zero (the default, %d) or more", cfg.MaxBytes, DefaultMaxBytes)
	}
	s := &Scanner{maxBytes: cfg.MaxBytes}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxBytes
	}
	seen := map[string]bool{}
	for _, name := range cfg.Detectors {
		ds := lookup(name)
		if ds == nil {
			return nil, fmt.Errorf("detector %q: want a rule set (%s) or a rule (%s)", name,
				strings.Join(RuleSets(), ", "), strings.Join(RuleNames(), ", "))
		}
		for _, d := range ds {
			if !seen[d.name] {
				seen[d.name] = true
				s.detectors = append(s.detectors, scanDetector{d, action})
				s.rules = append(s.rules, d.name)
			}
		}
	}
	var err error
	if s.patterns, err = compilePatterns("pattern", cfg.Patterns, action, seen, ""); err != nil {
		return nil, err
	}
	if s.removals, err = compilePatterns("removeLines", cfg.RemoveLines, action, seen, "(?m)"); err != nil {
		return nil, err
	}
	if s.paths, err = compilePaths(cfg.RemovePaths, action, seen); err != nil {
		return nil, err
	}
	for _, p := range append(slices.Clone(s.patterns), s.removals...) {
		s.rules = append(s.rules, p.name)
	}
	for _, p := range s.paths {
		s.rules = append(s.rules, p.name)
		if p.action != Warn { // a value that cannot be removed is withheld
			s.pathsAction = Withhold
		} else if s.pathsAction == "" {
			s.pathsAction = Warn
		}
	}
	if len(s.paths) > 0 {
		s.rules = append(s.rules, RuleNotJSON)
	}
	return s, nil
}

func compilePatterns(what string, ps []Pattern, action Action, seen map[string]bool, flags string) ([]scanPattern, error) {
	out := make([]scanPattern, 0, len(ps))
	for i, p := range ps {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("%s %d: a name is required", what, i)
		case seen[p.Name]:
			return nil, fmt.Errorf("%s %q: the name is used twice (rules' names, built-in ones included, are unique)", what, p.Name)
		case p.Regex == "":
			return nil, fmt.Errorf("%s %q: regex is empty", what, p.Name)
		}
		seen[p.Name] = true
		re, err := regexp.Compile(flags + p.Regex)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, p.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%s %q: regex %q matches empty text", what, p.Name, p.Regex)
		}
		a := action
		if p.Action != "" {
			if a = p.Action; a.strength() == 0 {
				return nil, fmt.Errorf("%s %q: action %q: want Redact, Withhold or Warn", what, p.Name, p.Action)
			}
		}
		out = append(out, scanPattern{name: p.Name, re: re, action: a})
	}
	return out, nil
}

// Rules returns the names of the rules the scanner applies.
func (s *Scanner) Rules() []string { return slices.Clone(s.rules) }

// span is one match: [start, end) of the text.
type span struct {
	start, end int
	rule       string
	action     Action
	removal    bool // a removed line: the marker is RemovedMarker
}

// Scan scans text. It returns an error (and no outcome) when ctx ends
// before the scan does: the caller withholds the result.
func (s *Scanner) Scan(ctx context.Context, text string) (Outcome, error) {
	if len(text) > s.maxBytes {
		return Outcome{Withheld: true, Findings: []Finding{{Rule: RuleTooLarge, Action: Withhold, Count: 1, Bytes: len(text)}}}, nil
	}
	text, pathFindings, err := s.removePaths(ctx, text)
	if err != nil {
		return Outcome{}, err
	}
	spans, err := s.find(ctx, text)
	if err != nil {
		return Outcome{}, err
	}
	o := s.outcome(text, spans)
	if len(pathFindings) == 0 {
		return o, nil
	}
	o.Findings = s.ordered(append(o.Findings, pathFindings...))
	if slices.ContainsFunc(pathFindings, func(f Finding) bool { return f.Action == Withhold }) {
		o.Withheld, o.Text = true, ""
	}
	return o, nil
}

// ordered returns findings in rule order.
func (s *Scanner) ordered(findings []Finding) []Finding {
	slices.SortStableFunc(findings, func(a, b Finding) int {
		return slices.Index(s.rules, a.Rule) - slices.Index(s.rules, b.Rule)
	})
	return findings
}

// find returns every match of every rule in text.
func (s *Scanner) find(ctx context.Context, text string) ([]span, error) {
	var spans []span
	if len(s.detectors) > 0 {
		lower := lowerASCII(text)
		for _, d := range s.detectors {
			if ctx.Err() != nil {
				return nil, scanEnded(ctx)
			}
			spans = d.find(text, lower, spans)
		}
	}
	if len(s.patterns) == 0 && len(s.removals) == 0 {
		return spans, nil
	}
	for off := 0; off < len(text); {
		if ctx.Err() != nil {
			return nil, scanEnded(ctx)
		}
		end := chunkEnd(text, off)
		chunk := text[off:end]
		for _, p := range s.patterns {
			for _, m := range p.re.FindAllStringIndex(chunk, -1) {
				spans = append(spans, span{start: off + m[0], end: off + m[1], rule: p.name, action: p.action})
			}
		}
		for _, p := range s.removals {
			for _, m := range p.re.FindAllStringIndex(chunk, -1) {
				ls, le := lineAround(text, off+m[0], off+m[1])
				spans = append(spans, span{start: ls, end: le, rule: p.name, action: p.action, removal: true})
			}
		}
		off = end
	}
	return spans, nil
}

func scanEnded(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrScan, context.Cause(ctx))
}

// ErrScan is wrapped by the errors of scans that did not finish.
var ErrScan = errors.New("the result scan did not finish")

// chunkEnd returns the end of the piece of text that starts at off: up to
// chunkSize bytes ending after a line end, or the whole line when it is longer.
func chunkEnd(text string, off int) int {
	if len(text)-off <= chunkSize {
		return len(text)
	}
	if i := strings.LastIndexByte(text[off:off+chunkSize], '\n'); i >= 0 {
		return off + i + 1
	}
	if i := strings.IndexByte(text[off+chunkSize:], '\n'); i >= 0 {
		return off + chunkSize + i + 1
	}
	return len(text)
}

// lineAround returns the bounds of the lines holding [start, end), without
// the final line end.
func lineAround(text string, start, end int) (int, int) {
	ls := strings.LastIndexByte(text[:start], '\n') + 1
	if end > start && text[end-1] == '\n' {
		end--
	}
	le := len(text)
	if i := strings.IndexByte(text[end:], '\n'); i >= 0 {
		le = end + i
	}
	return ls, le
}

// find appends d's matches in text (lower is text with its ASCII letters
// lower-cased) to spans: its expression runs once on each line that holds
// one of its anchors.
func (d scanDetector) find(text, lower string, spans []span) []span {
	var lines []int // the starts of the lines holding an anchor
	for _, a := range d.anchors {
		for from := 0; from < len(text); {
			i := strings.Index(lower[from:], a)
			if i < 0 {
				break
			}
			ls, le := lineAround(text, from+i, from+i+len(a))
			lines = append(lines, ls)
			from = le + 1
		}
	}
	if len(lines) == 0 {
		return spans
	}
	slices.Sort(lines)
	done := 0 // text before done has been scanned for d
	for _, ls := range slices.Compact(lines) {
		if ls < done {
			continue
		}
		_, le := lineAround(text, ls, ls)
		if d.block {
			spans, done = d.findBlock(text, lower, ls, spans)
		} else {
			spans = d.findInLine(text, ls, le, spans)
			done = le
		}
	}
	return spans
}

func (d scanDetector) findInLine(text string, ls, le int, spans []span) []span {
	for _, m := range d.re.FindAllStringSubmatchIndex(text[ls:le], -1) {
		start, end := m[2*d.group], m[2*d.group+1]
		if start < 0 {
			continue
		}
		if d.valid != nil && !d.valid(text[ls+start:ls+end]) {
			continue
		}
		spans = append(spans, span{start: ls + start, end: ls + end, rule: d.name, action: d.action})
	}
	return spans
}

// findBlock finds PEM-style blocks starting on the line at ls: from the
// BEGIN line to the end of the END line, or to the end of the text when
// there is none (a truncated key is still a key). It returns where it
// stopped.
func (d scanDetector) findBlock(text, lower string, ls int, spans []span) ([]span, int) {
	_, le := lineAround(text, ls, ls)
	m := d.re.FindStringIndex(text[ls:le])
	if m == nil {
		return spans, le
	}
	start := ls + m[0]
	end := len(text)
	if i := strings.Index(lower[ls+m[1]:], "-----end"); i >= 0 {
		at := ls + m[1] + i + len("-----end")
		if j := strings.Index(text[at:], "-----"); j >= 0 {
			end = at + j + len("-----")
		}
	}
	return append(spans, span{start: start, end: end, rule: d.name, action: d.action}), end
}

// outcome applies spans to text.
func (s *Scanner) outcome(text string, spans []span) Outcome {
	if len(spans) == 0 {
		return Outcome{Text: text}
	}
	counts := map[string]*Finding{}
	withheld := false
	for _, sp := range spans {
		f := counts[sp.rule]
		if f == nil {
			f = &Finding{Rule: sp.rule, Action: sp.action}
			counts[sp.rule] = f
		}
		f.Count++
		f.Bytes += sp.end - sp.start
		withheld = withheld || sp.action == Withhold
	}
	out := Outcome{Withheld: withheld}
	for _, r := range s.rules {
		if f := counts[r]; f != nil {
			out.Findings = append(out.Findings, *f)
		}
	}
	if withheld {
		return out
	}
	// Redactions and removals, merged where they overlap.
	var cut []span
	for _, sp := range spans {
		if sp.action == Redact {
			cut = append(cut, sp)
		}
	}
	if len(cut) == 0 {
		out.Text = text
		return out
	}
	slices.SortStableFunc(cut, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for i := 0; i < len(cut); {
		cur := cut[i]
		for i++; i < len(cut) && cut[i].start < cur.end; i++ {
			cur.end = max(cur.end, cut[i].end)
			cur.removal = cur.removal || cut[i].removal
		}
		b.WriteString(text[last:cur.start])
		if cur.removal {
			b.WriteString(RemovedMarker(cur.rule))
		} else {
			b.WriteString(RedactedMarker(cur.rule))
		}
		last = cur.end
	}
	b.WriteString(text[last:])
	out.Text = b.String()
	return out
}
