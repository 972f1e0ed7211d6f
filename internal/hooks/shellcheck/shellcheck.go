// Package shellcheck statically analyses a shell command line before an agent
// runs it: it parses the text as bash with mvdan.cc/sh/v3/syntax and reports
// every simple command that would run (including those inside lists,
// pipelines, subshells, blocks, command and process substitutions, control
// structures, function bodies, heredocs, wrapper commands such as env, nohup
// or timeout, and the string of sh -c / bash -c), every literal argument word
// that may name a file, every redirection target, and every construct whose
// effect cannot be known without running it.
//
// Dialect: bash (syntax.LangBash). Agents send bash, and the bash grammar is
// a superset of POSIX sh for everything that matters here, so parsing a POSIX
// script as bash finds every command a POSIX shell would run, while parsing
// a bash script as POSIX would fail or, worse, misread bash-only constructs
// such as process substitution.
package shellcheck

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Limits that keep analysis bounded; exceeding one is an error.
const (
	// MaxInput is the longest command text analysed.
	MaxInput = 64 << 10
	// MaxDepth bounds nested sh -c strings.
	MaxDepth = 4
	// MaxCommands bounds the simple commands one command line may contain.
	MaxCommands = 1024
	// MaxBraceWords bounds the words one brace expansion may produce; a larger
	// expansion is reported as unverifiable.
	MaxBraceWords = 256
)

// parsers holds bash parsers for reuse: a syntax.Parser may be reused once
// a Parse has returned (it resets itself and allocates the next tree's nodes
// afresh), and a new one costs about 2.6 KB.
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// ParseBash parses src as one bash script (syntax.LangBash) with a pooled
// parser. The tree it returns is the caller's.
func ParseBash(src string) (*syntax.File, error) {
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	parsers.Put(p) // not reached when Parse panics: that parser is dropped
	return f, err
}

// ErrParse wraps every parse failure.
var ErrParse = errors.New("shell command does not parse")

// Command is one simple command that would run.
type Command struct {
	// Name is the command name as written (after quote removal).
	Name string
	// Args are the arguments after quote removal and brace expansion; a word
	// that is not a static literal appears as its source text.
	Args []string
	// Text is the canonical text matched against allow-lists: name and
	// arguments separated by single spaces, a word single-quoted only when it
	// contains blanks or shell metacharacters (e.g. `git log --oneline x.go`).
	Text string
	// Dynamic is true when the name or an argument is not a static literal.
	Dynamic bool
	// Wrapped is true when a wrapper (env, sudo, sh -c, ...) runs this command.
	Wrapped bool
}

// Redirect is a redirection to or from a file.
type Redirect struct {
	// Op is the operator, e.g. ">", ">>", "<", "&>".
	Op string
	// Target is the file name after quote removal.
	Target string
	// Glob is true when Target contains unquoted glob characters.
	Glob bool
}

// Word is a literal argument word that may name a file.
type Word struct {
	// Value is the word after quote removal (a leading ~ is kept for the
	// caller to expand).
	Value string
	// Glob is set to the word as a filepath.Match pattern when it contains
	// unquoted glob characters (bash expands it against the file system).
	Glob string
	// Command is the name of the command the word is an argument of.
	Command string
}

// Analysis is what a command line would do, as far as it can be known statically.
type Analysis struct {
	// Commands are all simple commands, in source order (wrappers first,
	// then the commands they run).
	Commands []Command
	// Words are the literal argument words, plus values derived from them that
	// a program may open (the value of name=value and --opt=value, the tail of
	// a glued short option such as -o/etc/x, the file of @file and file://).
	Words []Word
	// Redirects are the redirections to or from files.
	Redirects []Redirect
	// Dirs are the literal targets of cd and pushd, in source order.
	Dirs []string
	// Unverifiable explains each construct whose effect cannot be checked
	// statically (eval, a variable command name, ...), one sentence each.
	Unverifiable []string
}

// Analyze parses cmd as bash and reports what it would run. It fails on
// parse errors, on input over MaxInput, on sh -c nesting deeper than MaxDepth
// and on more than MaxCommands commands.
func Analyze(cmd string) (res *Analysis, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w: analysis failed: %v", ErrParse, r)
		}
	}()
	a := &analyzer{res: &Analysis{}}
	if err := a.script(cmd, 0); err != nil {
		return nil, err
	}
	return a.res, nil
}

type analyzer struct {
	res   *Analysis
	depth int
	err   error
}

func (a *analyzer) script(src string, depth int) error {
	if len(src) > MaxInput {
		return fmt.Errorf("%w: command is longer than %d bytes", ErrParse, MaxInput)
	}
	if strings.IndexByte(src, 0) >= 0 {
		return fmt.Errorf("%w: command contains a NUL byte", ErrParse)
	}
	f, err := ParseBash(src)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrParse, err)
	}
	saved := a.depth
	a.depth = depth
	syntax.Walk(f, a.visit)
	a.depth = saved
	return a.err
}

func (a *analyzer) unverifiable(format string, args ...any) {
	a.res.Unverifiable = append(a.res.Unverifiable, fmt.Sprintf(format, args...))
}

func (a *analyzer) visit(n syntax.Node) bool {
	if a.err != nil {
		return false
	}
	switch n := n.(type) {
	case *syntax.CallExpr:
		a.call(n)
	case *syntax.Redirect:
		a.redirect(n)
	case *syntax.ParamExp:
		a.unverifiable("the parameter expansion %s has a value that is only known at run time", src(n))
	case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop:
		a.unverifiable("arithmetic evaluation %q can run commands through array subscripts", src(n))
	case *syntax.DeclClause:
		a.unverifiable("the declaration %q changes variables and attributes at run time", src(n))
	case *syntax.CoprocClause:
		// The coprocess body is walked like any other statement.
	case *syntax.TestClause:
		a.testClause(n)
	case *syntax.ForClause:
		if _, ok := n.Loop.(*syntax.WordIter); ok {
			a.unverifiable("the for loop %q assigns a variable used at run time", firstLine(src(n)))
		}
	case *syntax.FuncDecl:
		// Bodies are walked; a function can shadow a command name, but its
		// body is checked as if it ran.
	case *syntax.Stmt:
		if n.Coprocess || n.Disown {
			a.unverifiable("the statement %q uses a non-bash job operator", firstLine(src(n)))
		}
	}
	return true
}

func (a *analyzer) testClause(t *syntax.TestClause) {
	syntax.Walk(t.X, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				a.unverifiable("the test %q evaluates its operands as arithmetic", src(t))
				return false
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				a.unverifiable("the test %q evaluates a variable name", src(t))
				return false
			}
		}
		return true
	})
}

// redirect records a redirection's file target.
func (a *analyzer) redirect(r *syntax.Redirect) {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return // the word is a delimiter or data, not a file; bodies are walked
	}
	v, kind := literal(r.Word)
	op := r.Op.String()
	switch kind {
	case kindDynamic, kindProcSubst:
		a.unverifiable("the redirection %q has a target only known at run time", src(r))
		return
	}
	if r.Op == syntax.DplIn || r.Op == syntax.DplOut {
		if isFD(v.value) {
			return
		}
	}
	a.res.Redirects = append(a.res.Redirects, Redirect{Op: op, Target: v.value, Glob: kind == kindGlob})
}

func isFD(s string) bool {
	s = strings.TrimSuffix(s, "-")
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// word is one expanded argument.
type word struct {
	value   string // after quote removal
	pattern string // filepath.Match pattern when glob
	kind    wordKind
	src     string
}

type wordKind int

const (
	kindLiteral wordKind = iota
	kindGlob
	kindProcSubst
	kindDynamic
)

// call handles one simple command.
func (a *analyzer) call(c *syntax.CallExpr) {
	if len(c.Args) == 0 {
		for _, as := range c.Assigns {
			a.unverifiable("the assignment %q sets a variable used at run time", src(as))
		}
		return
	}
	for _, as := range c.Assigns {
		a.unverifiable("the environment assignment %q changes how %q runs", src(as), src(c.Args[0]))
	}
	var argv []word
	for _, w := range c.Args {
		argv = a.expandWord(w, argv)
	}
	if len(argv) == 0 {
		return
	}
	a.command(argv, false, a.depth)
}

// expandWord appends the brace expansion of w to argv.
func (a *analyzer) expandWord(w *syntax.Word, argv []word) []word {
	if hasBrace(w) {
		// SplitBraces rewrites the word it is given; work on a copy so the
		// tree being walked keeps only node types Walk knows.
		cp := *w
		w = &cp
	}
	if !hasBrace(w) || !syntax.SplitBraces(w) {
		v, k := literal(w)
		v.kind = k
		return append(argv, v)
	}
	n := 0
	for ew, err := range expand.BracesSeq(nil, w) {
		n++
		if err != nil || n > MaxBraceWords {
			a.unverifiable("the brace expansion %q produces more than %d words", src(w), MaxBraceWords)
			v := word{value: src(w), src: src(w), kind: kindDynamic}
			return append(argv, v)
		}
		v, k := literal(ew)
		v.kind = k
		v.src = src(w)
		argv = append(argv, v)
	}
	return argv
}

func hasBrace(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, '{') >= 0 {
			return true
		}
	}
	return false
}

// literal evaluates a word statically.
func literal(w *syntax.Word) (word, wordKind) {
	var val, pat strings.Builder
	kind := kindLiteral
	if len(w.Parts) == 1 {
		if _, ok := w.Parts[0].(*syntax.ProcSubst); ok {
			s := src(w)
			return word{value: s, src: s}, kindProcSubst
		}
	}
	quoteGlob := func(b byte) {
		if b == '*' || b == '?' || b == '[' || b == '\\' {
			pat.WriteByte('\\')
		}
		pat.WriteByte(b)
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				c := v[i]
				switch {
				case c == '\\' && i+1 < len(v):
					i++
					if v[i] == '\n' {
						continue
					}
					val.WriteByte(v[i])
					quoteGlob(v[i])
				case c == '*' || c == '?' || c == '[':
					if kind == kindLiteral {
						kind = kindGlob
					}
					val.WriteByte(c)
					pat.WriteByte(c)
				default:
					val.WriteByte(c)
					pat.WriteByte(c)
				}
			}
		case *syntax.SglQuoted:
			if p.Dollar && strings.IndexByte(p.Value, '\\') >= 0 {
				s := src(w)
				return word{value: s, src: s}, kindDynamic
			}
			for i := 0; i < len(p.Value); i++ {
				val.WriteByte(p.Value[i])
				quoteGlob(p.Value[i])
			}
		case *syntax.DblQuoted:
			if p.Dollar {
				s := src(w)
				return word{value: s, src: s}, kindDynamic
			}
			if !writeDblQuoted(p.Parts, &val, quoteGlob) {
				s := src(w)
				return word{value: s, src: s}, kindDynamic
			}
		default: // ParamExp, CmdSubst, ArithmExp, ProcSubst inside a word, ExtGlob
			s := src(w)
			return word{value: s, src: s}, kindDynamic
		}
	}
	out := word{value: val.String()}
	out.src = out.value
	if kind == kindGlob {
		out.pattern = strings.ReplaceAll(pat.String(), "[!", "[^")
		out.src = src(w)
	}
	return out, kind
}

// writeDblQuoted writes the value of the parts of a double-quoted string to
// val, and each byte to quoteGlob. It reports false, having written part of
// the value, when a part is not a literal.
func writeDblQuoted(parts []syntax.WordPart, val *strings.Builder, quoteGlob func(byte)) bool {
	for _, q := range parts {
		l, ok := q.(*syntax.Lit)
		if !ok {
			return false
		}
		v := l.Value
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0 {
				i++
				if v[i] == '\n' {
					continue
				}
				c = v[i]
			}
			val.WriteByte(c)
			quoteGlob(c)
		}
	}
	return true
}

// src prints a node back as shell source.
func src(n syntax.Node) string {
	var b strings.Builder
	if err := syntax.NewPrinter(syntax.Minify(true)).Print(&b, n); err != nil {
		return fmt.Sprintf("%T", n)
	}
	return strings.TrimSpace(b.String())
}

func firstLine(s string) string {
	if first, _, ok := strings.Cut(s, "\n"); ok {
		return first + " ..."
	}
	return s
}

// render builds a Command's canonical text.
func render(argv []word) string {
	var b strings.Builder
	for i, w := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w.kind == kindDynamic || w.kind == kindProcSubst {
			b.WriteString(w.src)
			continue
		}
		b.WriteString(quote(w.value))
	}
	return b.String()
}

// quote single-quotes s when it is empty or contains blanks, quotes or
// shell operators; other characters (=, ~, *, {, /) are left as they are so
// that allow-list patterns can be written naturally.
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\r'\"`$;&|<>()\\#") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// command records argv as a command and unwraps wrappers and shells.
func (a *analyzer) command(argv []word, wrapped bool, depth int) {
	if len(a.res.Commands) >= MaxCommands {
		if a.err == nil {
			a.err = fmt.Errorf("%w: more than %d commands", ErrParse, MaxCommands)
		}
		return
	}
	name := argv[0]
	cmd := Command{Name: name.value, Text: render(argv), Wrapped: wrapped}
	for _, w := range argv {
		if w.kind == kindDynamic {
			cmd.Dynamic = true
		}
	}
	for _, w := range argv[1:] {
		cmd.Args = append(cmd.Args, w.value)
	}
	a.res.Commands = append(a.res.Commands, cmd)
	if name.kind != kindLiteral {
		a.unverifiable("the command name %q is not a literal word", name.src)
		a.words(name.value, argv[1:])
		return
	}
	a.words(name.value, argv[1:])
	base := path.Base(name.value)
	args := argv[1:]
	switch base {
	case "eval":
		a.unverifiable("%q runs a string as shell code", cmd.Text)
	case "source", ".":
		a.unverifiable("%q runs the commands of a file that cannot be checked", cmd.Text)
	case "trap", "alias", "enable", "fc", "bind", "complete", "compgen", "hash",
		"mapfile", "readarray", "declare", "typeset", "local", "export", "readonly",
		"let", "shopt", "coproc", "caller", "select":
		a.unverifiable("the builtin %q changes the shell's behaviour at run time", base)
	case "set":
		a.setBuiltin(cmd.Text, args)
	case "test", "[", builtinPrintf, "read", "unset", "wait", "getopts":
		a.subscriptBuiltin(cmd.Text, base, args)
	case "cd", "pushd":
		a.cd(cmd.Text, args)
	case "popd":
	case "exec":
		a.exec(cmd.Text, args, depth)
	case "command", "builtin":
		a.commandBuiltin(args, depth)
	case "env":
		a.env(cmd.Text, args, depth)
	case "nohup", "setsid", "time":
		rest := skipOpts(args, map[string]bool{"-f": true, "-o": true, "--format": true, "--output": true})
		a.inner(rest, depth)
	case "timeout":
		rest := skipOpts(args, map[string]bool{"-s": true, "-k": true, "--signal": true, "--kill-after": true})
		if len(rest) > 0 {
			rest = rest[1:] // DURATION
		}
		a.inner(rest, depth)
	case "nice":
		rest := skipOpts(args, map[string]bool{"-n": true, "--adjustment": true})
		a.inner(rest, depth)
	case "stdbuf":
		rest := skipOpts(args, map[string]bool{"-i": true, "-o": true, "-e": true, "--input": true, "--output": true, "--error": true})
		a.inner(rest, depth)
	case "sudo", "doas":
		a.sudo(cmd.Text, args, depth)
	case "xargs":
		a.unverifiable("%q passes arguments read from its input, which cannot be checked", cmd.Text)
		rest := skipOpts(args, map[string]bool{"-a": true, "-d": true, "-E": true, "-I": true, "-L": true,
			"-n": true, "-P": true, "-s": true, "--arg-file": true, "--delimiter": true, "--eof": true,
			"--replace": true, "--max-lines": true, "--max-args": true, "--max-procs": true,
			"--max-chars": true, "--process-slot-var": true})
		if len(rest) == 0 {
			rest = []word{{value: "echo", kind: kindLiteral, src: "echo"}}
		}
		a.inner(rest, depth)
	case "find":
		a.find(cmd.Text, args, depth)
	case "git":
		a.git(cmd.Text, args)
	case "sh", "bash", "dash", "ash", "ksh", "mksh", "rbash":
		a.shell(cmd.Text, args, depth)
	case "zsh", "fish", "csh", "tcsh", "ksh93", "busybox", "pwsh", "nu", "elvish", "xonsh":
		a.unverifiable("%q runs a shell whose language is not analysed", cmd.Text)
	}
}

// builtinPrintf is the printf builtin, whose -v option assigns a variable.
const builtinPrintf = "printf"

// subscriptBuiltin checks the builtins base (test, [, printf, read, unset,
// wait, getopts) that may evaluate an array subscript or a variable name.
func (a *analyzer) subscriptBuiltin(text, base string, args []word) {
	for _, w := range args {
		if strings.IndexByte(w.value, '[') >= 0 || (base != builtinPrintf && w.value == "-v") {
			a.unverifiable("%q may evaluate an array subscript or variable name as code", text)
			break
		}
	}
	if base == builtinPrintf && len(args) > 0 && strings.HasPrefix(args[0].value, "-v") {
		a.unverifiable("%q assigns a variable", text)
	}
}

// git reports git options that set configuration.
func (a *analyzer) git(text string, args []word) {
	for _, w := range args {
		if w.value == "-c" || strings.HasPrefix(w.value, "--config-env") || strings.HasPrefix(w.value, "--exec-path") {
			a.unverifiable("%q sets git configuration, which can run arbitrary commands", text)
			break
		}
	}
}

// words records the literal arguments of a command as path candidates.
func (a *analyzer) words(cmd string, args []word) {
	for _, w := range args {
		switch w.kind {
		case kindDynamic:
			a.unverifiable("the argument %q of %q is only known at run time", w.src, cmd)
			continue
		case kindProcSubst:
			continue
		}
		a.res.Words = append(a.res.Words, Word{Value: w.value, Glob: w.pattern, Command: cmd})
		for _, d := range derived(w.value) {
			a.res.Words = append(a.res.Words, Word{Value: d, Command: cmd})
		}
	}
}

// derived returns the values a program may open that are embedded in an
// argument word: name=value / --opt=value (and its ':'-separated parts), a
// glued short option's tail (-o/etc/x, -C../x), @file and file://path.
func derived(v string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != v && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if _, val, ok := strings.Cut(v, "="); ok {
		add(val)
		if strings.IndexByte(val, ':') >= 0 {
			for p := range strings.SplitSeq(val, ":") {
				add(p)
			}
		}
	}
	if len(v) > 2 && v[0] == '-' && v[1] != '-' {
		for i := 1; i < len(v); i++ {
			c := v[i]
			if !isAlnum(c) {
				if strings.ContainsAny(v[i:], "/.~") && c != '=' {
					add(v[i:])
				}
				break
			}
			if i+1 < len(v) && strings.ContainsAny(v[i+1:], "/.~") {
				add(v[i+1:])
			}
		}
	}
	if strings.HasPrefix(v, "@") {
		add(v[1:])
	}
	if _, after, ok := strings.Cut(v, "file://"); ok {
		add(after)
	}
	return out
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skipOpts drops leading options (those in withArg take a value, either
// glued with '=' or as the next word) and a "--", returning the rest.
func skipOpts(args []word, withArg map[string]bool) []word {
	for len(args) > 0 {
		v := args[0].value
		if v == "--" {
			return args[1:]
		}
		if len(v) < 2 || v[0] != '-' || args[0].kind != kindLiteral {
			return args
		}
		if strings.HasPrefix(v, "--") {
			if strings.Contains(v, "=") {
				args = args[1:]
				continue
			}
			if withArg[v] && len(args) > 1 {
				args = args[2:]
				continue
			}
			args = args[1:]
			continue
		}
		if withArg[v[:2]] && len(v) == 2 && len(args) > 1 {
			args = args[2:]
			continue
		}
		if v[1] >= '0' && v[1] <= '9' { // nice -5
			args = args[1:]
			continue
		}
		args = args[1:]
	}
	return args
}

// inner analyses the command a wrapper runs.
func (a *analyzer) inner(argv []word, depth int) {
	if len(argv) == 0 {
		return
	}
	a.command(argv, true, depth)
}

func (a *analyzer) setBuiltin(text string, args []word) {
	safeOpt := map[string]bool{"pipefail": true, "errexit": true, "nounset": true, "xtrace": true,
		"verbose": true, "noglob": true, "noclobber": true}
	for i := 0; i < len(args); i++ {
		v := args[i].value
		if (v == "-o" || v == "+o") && i+1 < len(args) && safeOpt[args[i+1].value] {
			i++
			continue
		}
		if len(v) >= 2 && (v[0] == '-' || v[0] == '+') && strings.Trim(v[1:], "euxvfCnBh") == "" {
			continue
		}
		a.unverifiable("%q sets shell options or positional parameters used at run time", text)
		return
	}
}

func (a *analyzer) cd(text string, args []word) {
	rest := skipOpts(args, nil)
	if len(rest) == 0 || rest[0].value == "-" {
		a.unverifiable("%q changes to a directory only known at run time", text)
		return
	}
	if rest[0].kind != kindLiteral {
		return // already reported by words
	}
	a.res.Dirs = append(a.res.Dirs, rest[0].value)
}

func (a *analyzer) exec(text string, args []word, depth int) {
	rest := skipOpts(args, map[string]bool{"-a": true})
	if len(rest) == 0 {
		a.unverifiable("%q manipulates the shell's file descriptors", text)
		return
	}
	a.inner(rest, depth)
}

func (a *analyzer) commandBuiltin(args []word, depth int) {
	for _, w := range args {
		if w.value == "-v" || w.value == "-V" {
			return // lookup only
		}
		if !strings.HasPrefix(w.value, "-") {
			break
		}
	}
	a.inner(skipOpts(args, nil), depth)
}

func (a *analyzer) env(text string, args []word, depth int) {
	for len(args) > 0 {
		v := args[0].value
		switch {
		case v == "--":
			args = args[1:]
			a.inner(args, depth)
			return
		case v == "-" || v == "-i" || v == "-0" || v == "-v" || v == "--ignore-environment" || v == "--null" || v == "--debug":
			args = args[1:]
		case v == "-u" || v == "--unset":
			if len(args) < 2 {
				return
			}
			args = args[2:]
		case strings.HasPrefix(v, "--unset="), strings.HasPrefix(v, "-u") && len(v) > 2:
			args = args[1:]
		case strings.HasPrefix(v, "-"):
			a.unverifiable("%q uses env option %q (split string, chdir or signals), which is not analysed", text, v)
			return
		case strings.IndexByte(v, '=') > 0:
			a.unverifiable("%q sets the environment variable %q, which can change how the command runs", text, v)
			args = args[1:]
		default:
			a.inner(args, depth)
			return
		}
	}
}

func (a *analyzer) sudo(text string, args []word, depth int) {
	withArg := map[string]bool{"-u": true, "-g": true, "-C": true, "-D": true, "-h": true, "-p": true,
		"-r": true, "-t": true, "-U": true, "-T": true, "--user": true, "--group": true,
		"--chdir": true, "--host": true, "--prompt": true, "--role": true, "--type": true,
		"--other-user": true, "--close-from": true, "--command-timeout": true}
	rest := skipOpts(args, withArg)
	for _, w := range args[:len(args)-len(rest)] {
		v := w.value
		if v == "-D" || strings.HasPrefix(v, "--chdir") ||
			(!strings.HasPrefix(v, "--") && strings.HasPrefix(v, "-") && strings.ContainsAny(v[1:], "isDe")) ||
			v == "--login" || v == "--shell" || v == "--edit" {
			a.unverifiable("%q changes directory, starts a shell or edits files as another user", text)
			return
		}
	}
	if len(rest) == 0 {
		a.unverifiable("%q runs no command (an interactive shell or a listing)", text)
		return
	}
	for len(rest) > 0 && strings.IndexByte(rest[0].value, '=') > 0 {
		a.unverifiable("%q sets the environment variable %q", text, rest[0].value)
		rest = rest[1:]
	}
	a.inner(rest, depth)
}

func (a *analyzer) find(text string, args []word, depth int) {
	for i := 0; i < len(args); i++ {
		switch args[i].value {
		case "-exec", "-execdir", "-ok", "-okdir":
			a.unverifiable("%q runs commands on the files it finds", text)
			j := i + 1
			for j < len(args) && args[j].value != ";" && args[j].value != "+" {
				j++
			}
			a.inner(args[i+1:j], depth)
			i = j
		}
	}
}

// shell analyses sh/bash invocations: the string of -c recursively, anything
// else (a script file, stdin) is unverifiable.
func (a *analyzer) shell(text string, args []word, depth int) {
	hasC := false
	i := 0
	for ; i < len(args); i++ {
		v := args[i].value
		if v == "--" || v == "-" {
			i++
			break
		}
		if len(v) < 2 || (v[0] != '-' && v[0] != '+') {
			break
		}
		if v[0] == '-' && v[1] == '-' {
			switch v {
			case "--norc", "--noprofile", "--posix", "--login", "--noediting", "--restricted":
				continue
			}
			a.unverifiable("%q uses shell option %q, which is not analysed", text, v)
			return
		}
		if v == "-o" || v == "+o" || v == "-O" || v == "+O" {
			a.unverifiable("%q sets shell options, which are not analysed", text)
			return
		}
		if strings.ContainsAny(v, "c") {
			hasC = true
		}
		if strings.ContainsAny(v, "si") {
			a.unverifiable("%q runs an interactive or stdin-reading shell", text)
			return
		}
	}
	if !hasC {
		if i < len(args) {
			a.unverifiable("%q runs the script file %q, whose contents cannot be checked", text, args[i].value)
		} else {
			a.unverifiable("%q runs commands read from its input, which cannot be checked", text)
		}
		return
	}
	if i >= len(args) {
		a.unverifiable("%q has -c without a command string", text)
		return
	}
	s := args[i]
	if s.kind != kindLiteral {
		a.unverifiable("the command string %q of %q is only known at run time", s.src, text)
		return
	}
	if depth+1 > MaxDepth {
		if a.err == nil {
			a.err = fmt.Errorf("%w: shell -c strings nested deeper than %d", ErrParse, MaxDepth)
		}
		return
	}
	// The string's words were recorded as arguments; they are code, not
	// files, so drop them again before analysing the code itself.
	a.dropWord(s.value)
	if err := a.script(s.value, depth+1); err != nil && a.err == nil {
		a.err = fmt.Errorf("in %q: %w", text, err)
	}
}

// dropWord removes the last recorded word with value v and the words derived
// from it.
func (a *analyzer) dropWord(v string) {
	ws := a.res.Words
	for i, w := range slices.Backward(ws) {
		if w.Value == v {
			n := 1 + len(derived(v))
			if i+n <= len(ws) {
				a.res.Words = append(ws[:i], ws[i+n:]...)
			}
			return
		}
	}
}
