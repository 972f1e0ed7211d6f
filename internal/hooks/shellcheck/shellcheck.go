// Package shellcheck statically analyses a shell command line before an agent
// runs it: it parses the text as bash with mvdan.cc/sh/v3/syntax and reports
// every simple command that would run (including those inside lists,
// pipelines, subshells, blocks, command and process substitutions, control
// structures, function bodies, heredocs, wrapper commands such as env, nohup
// or timeout, and the string of sh -c / bash -c), every literal argument word
// that may name a file, every redirection target, and every construct whose
// effect cannot be known without running it.
//
// Dialects: a command line is read as bash (syntax.LangBash) and as POSIX sh
// (syntax.LangPOSIX, as dash reads it), or as the subset of those the caller
// declares, and the Analysis is the union of every reading. The two read the
// same text differently: under dash `[[` is a plain command, so the `||` and
// `>` inside it are real operators and redirections; `$'..'` is a `$` and a
// single-quoted string; braces are not expanded. A reading that does not
// parse fails the whole analysis, since the shell that reads it that way runs
// the statements before the error.
package shellcheck

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
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

// posixParsers is parsers' POSIX sh counterpart.
var posixParsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangPOSIX)) }}

// ParseBash parses src as one bash script (syntax.LangBash) with a pooled
// parser. The tree it returns is the caller's.
func ParseBash(src string) (*syntax.File, error) {
	return Parse(src, Bash)
}

// Parse parses src as one script of dialect d (Bash or POSIX; Bash when d
// names both) with a pooled parser. The tree it returns is the caller's.
func Parse(src string, d Dialect) (*syntax.File, error) {
	pool := &parsers
	if d&Bash == 0 && d&POSIX != 0 {
		pool = &posixParsers
	}
	p := pool.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	pool.Put(p) // not reached when Parse panics: that parser is dropped
	return f, err
}

// Dialect is a set of shell languages a command line is read in.
type Dialect uint8

// Dialects.
const (
	// Bash is GNU bash's language (syntax.LangBash).
	Bash Dialect = 1 << iota
	// POSIX is the POSIX sh language as dash reads it (syntax.LangPOSIX).
	POSIX
	// AllDialects is every dialect: the default.
	AllDialects = Bash | POSIX
)

// ParseDialect returns the dialect named "bash" or "posix" (case-insensitive).
func ParseDialect(name string) (Dialect, error) {
	switch strings.ToLower(name) {
	case "bash":
		return Bash, nil
	case "posix", "sh", "dash":
		return POSIX, nil
	}
	return 0, fmt.Errorf("unknown shell dialect %q (want bash or posix)", name)
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
	// Risky are the catalogued options and subcommands this command uses
	// that run programs or write files (go test -exec, git -c, find
	// -delete, sed's e command, ...); see catalog.go.
	Risky []string
}

// Redirect is a redirection to or from a file.
type Redirect struct {
	// Op is the operator, e.g. ">", ">>", "<", "&>".
	Op string
	// Target is the file name after quote removal.
	Target string
	// Glob is true when Target contains unquoted glob characters.
	Glob bool
	// Pattern is Target as a mvdan.cc/sh pattern when Glob is true.
	Pattern string
	// ExtGlob is true when Pattern uses bash's extended operators.
	ExtGlob bool
}

// Word is a literal argument word that may name a file.
type Word struct {
	// Value is the word after quote removal (a leading ~ is kept for the
	// caller to expand).
	Value string
	// Glob is set to the word as a mvdan.cc/sh pattern (quoted characters
	// escaped with a backslash) when it contains unquoted glob characters
	// that the shell expands against the file system; see Expand.
	Glob string
	// ExtGlob is true when Glob uses bash's extended operators (@(..) etc.).
	ExtGlob bool
	// Command is the name of the command the word is an argument of.
	Command string
	// Recursive is true when the command reads or writes everything
	// beneath the path (grep -r, find, tar c, cp -r, git pathspec globs).
	Recursive bool
	// Git marks what git reads from the repository's work tree, index or
	// history: .git directories beneath it are not content.
	Git bool
	// MaybeRevision marks a word git may read as a revision (HEAD, main):
	// when it names no file, it stands for the whole repository.
	MaybeRevision bool
	// NoFollow marks a Recursive word whose command reads the symlinks
	// beneath it as links (their names and targets), never what they
	// point to (ls -R without -L, git).
	NoFollow bool
	// IndexOnly marks a Git word of a git diff that compares the work
	// tree with the index (no revision, no --cached, no --no-index): it
	// prints only files the index holds.
	IndexOnly bool
	// WholeRepo marks a Git word that stands for the whole repository the
	// command runs in (no pathspec), not only the working directory.
	WholeRepo bool
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
	// Substitutions are the command and process substitutions, whose
	// commands are among Commands and whose output is only known at run time.
	Substitutions []string
	// Unverifiable explains each construct whose effect cannot be checked
	// statically (eval, a variable command name, ...), one sentence each.
	Unverifiable []string
	// DotGlob is true when the command line may make bash's patterns match
	// names that start with a dot without a dot of their own: it runs
	// shopt (dotglob), names GLOBIGNORE or BASHOPTS (setting GLOBIGNORE
	// enables dotglob), or has an unverifiable construct. Otherwise a
	// pattern component such as ?env or [.]env matches no such name in
	// any shell (see GlobOptions.HideDots).
	DotGlob bool
}

// Analyze parses cmd as bash and reports what it would run. It fails on
// parse errors, on input over MaxInput, on sh -c nesting deeper than MaxDepth
// and on more than MaxCommands commands.
func Analyze(cmd string) (*Analysis, error) {
	return AnalyzeDialects(cmd, Bash)
}

// AnalyzeDialects reads cmd in every dialect of d (AllDialects when d is 0)
// and reports the union of what each reading would run. It fails when any
// reading fails (see Analyze).
func AnalyzeDialects(cmd string, d Dialect) (res *Analysis, err error) {
	defer func() {
		// A panic is a bug (FuzzAnalyze looks for them); it still denies.
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w: analysis failed: %v", ErrParse, r)
		}
	}()
	return analyze(cmd, d)
}

// analyze is AnalyzeDialects without the recover.
func analyze(cmd string, d Dialect) (*Analysis, error) {
	if d == 0 {
		d = AllDialects
	}
	a := &analyzer{res: &Analysis{}}
	if err := a.script(cmd, 0, d); err != nil {
		return nil, err
	}
	r := a.res
	r.DotGlob = len(r.Unverifiable) > 0 || slices.ContainsFunc(r.Commands, func(c Command) bool {
		return path.Base(c.Name) == "shopt" || strings.Contains(c.Text, "GLOBIGNORE") || strings.Contains(c.Text, "BASHOPTS")
	})
	r.Commands = dedup(r.Commands, func(x, y Command) bool { return x.Text == y.Text && x.Wrapped == y.Wrapped })
	r.Words = dedup(r.Words, func(x, y Word) bool { return x == y })
	r.Redirects = dedup(r.Redirects, func(x, y Redirect) bool { return x == y })
	r.Dirs = dedup(r.Dirs, func(x, y string) bool { return x == y })
	r.Unverifiable = dedup(r.Unverifiable, func(x, y string) bool { return x == y })
	return r, nil
}

// dedup drops the elements of s equal to an earlier one, keeping order; the
// readings of one command line in several dialects mostly coincide.
func dedup[T any](s []T, eq func(x, y T) bool) []T {
	if len(s) < 2 || len(s) > 512 {
		return s
	}
	out := s[:1]
	for _, x := range s[1:] {
		if !slices.ContainsFunc(out, func(y T) bool { return eq(x, y) }) {
			out = append(out, x)
		}
	}
	return out
}

type analyzer struct {
	res   *Analysis
	depth int
	err   error
	text  string // the script being walked, for source excerpts
	posix bool   // the current reading is POSIX sh
}

// script analyses src in each dialect of d.
func (a *analyzer) script(src string, depth int, d Dialect) error {
	if len(src) > MaxInput {
		return fmt.Errorf("%w: command is longer than %d bytes", ErrParse, MaxInput)
	}
	if strings.IndexByte(src, 0) >= 0 {
		return fmt.Errorf("%w: command contains a NUL byte", ErrParse)
	}
	if d == AllDialects && sameReadings(src) {
		d = Bash // the POSIX reading would be the same
	}
	for _, one := range [...]Dialect{Bash, POSIX} {
		if d&one == 0 {
			continue
		}
		f, err := Parse(src, one)
		if err != nil {
			return fmt.Errorf("%w (read as %s): %w", ErrParse, one, err)
		}
		savedDepth, savedText, savedPosix := a.depth, a.text, a.posix
		a.depth, a.text, a.posix = depth, src, one == POSIX
		syntax.Walk(f, a.visit)
		a.depth, a.text, a.posix = savedDepth, savedText, savedPosix
		if a.err != nil {
			return a.err
		}
	}
	return nil
}

// sameReadings reports whether src has none of the text bash and POSIX sh
// read differently (so one reading stands for both): no brackets, braces
// or parentheses, none of $' $" |& ;& &> <<< += and no word that is a
// keyword or declaration builtin only bash parses specially. FuzzAnalyze
// checks that both readings agree whenever it holds.
func sameReadings(src string) bool {
	if strings.ContainsAny(src, "[]{}()") {
		return false
	}
	for _, s := range [...]string{"$'", "$\"", "|&", ";&", "&>", "<<<", "+="} {
		if strings.Contains(src, s) {
			return false
		}
	}
	// Any rune that cannot be part of a name separates words here, so a
	// keyword next to a byte the parser skips (a carriage return, say) is
	// still seen.
	for w := range strings.FieldsFuncSeq(src, func(r rune) bool {
		return r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) {
		switch w {
		case "let", "function", "declare", "local", "export", "readonly", "typeset", "nameref", "time", "coproc", "select":
			return false
		}
	}
	return true
}

// String returns "bash", "posix" or both joined with "+".
func (d Dialect) String() string {
	switch d {
	case Bash:
		return "bash"
	case POSIX:
		return "posix"
	case AllDialects:
		return "bash+posix"
	}
	return fmt.Sprintf("Dialect(%d)", uint8(d))
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
		a.heredoc(n)
		a.redirect(n)
	case *syntax.CmdSubst, *syntax.ProcSubst:
		a.res.Substitutions = append(a.res.Substitutions, a.src(n))
	case *syntax.ParamExp:
		a.unverifiable("the parameter expansion %s has a value that is only known at run time", a.src(n))
	case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop:
		a.unverifiable("arithmetic evaluation %q can run commands through array subscripts", a.src(n))
	case *syntax.DeclClause:
		a.unverifiable("the declaration %q changes variables and attributes at run time", a.src(n))
	case *syntax.CoprocClause:
		// The coprocess body is walked like any other statement.
	case *syntax.TestClause:
		a.testClause(n)
	case *syntax.ForClause:
		if _, ok := n.Loop.(*syntax.WordIter); ok {
			a.unverifiable("the for loop %q assigns a variable used at run time", firstLine(a.src(n)))
		}
	case *syntax.FuncDecl:
		// Bodies are walked; a function can shadow a command name, but its
		// body is checked as if it ran. A declaration whose name bash and
		// dash would not take ("()0>0") is a line they reject as a whole.
		if n.Name == nil || !syntax.ValidName(n.Name.Value) {
			a.unverifiable("the function declaration %q has no valid name", firstLine(a.src(n)))
		}
	case *syntax.Stmt:
		if n.Coprocess || n.Disown {
			a.unverifiable("the statement %q uses a non-bash job operator", firstLine(a.src(n)))
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
				a.unverifiable("the test %q evaluates its operands as arithmetic", a.src(t))
				return false
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				a.unverifiable("the test %q evaluates a variable name", a.src(t))
				return false
			}
		}
		return true
	})
}

// redirect records a redirection's file targets: under bash, each word of
// the target's brace expansion (bash opens the one word that remains after
// null words are dropped, or reports an ambiguous redirect).
func (a *analyzer) redirect(r *syntax.Redirect) {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return // the word is a delimiter or data, not a file; bodies are walked
	}
	op := r.Op.String()
	for _, v := range a.expandWord(r.Word, nil) {
		switch v.kind {
		case kindDynamic, kindProcSubst:
			a.unverifiable("the redirection %q has a target only known at run time", a.src(r))
			return
		}
		if (r.Op == syntax.DplIn || r.Op == syntax.DplOut) && isFD(v.value) {
			continue
		}
		a.res.Redirects = append(a.res.Redirects, Redirect{Op: op, Target: v.value,
			Glob: v.kind == kindGlob, Pattern: v.pattern, ExtGlob: v.ext})
	}
}

// heredoc makes the body of a here-document whose delimiter is quoted only
// in part (<<E"O"F, <<E\OF) a literal, as every shell reads it: the parser
// reads such a body as live code (it looks at the delimiter's last part
// only). The body is dropped from the walk when the parser ended it where
// the shell does, at the first line equal to the delimiter; otherwise (a
// substitution or a backslash-newline carried the parser past that line)
// the parser reads the text after it otherwise than the shell, and the
// analysis fails as for a parse error.
func (a *analyzer) heredoc(r *syntax.Redirect) {
	if (r.Op != syntax.Hdoc && r.Op != syntax.DashHdoc) || r.Hdoc == nil {
		return
	}
	if len(r.Hdoc.Parts) == 1 {
		if _, ok := r.Hdoc.Parts[0].(*syntax.Lit); ok {
			return // a literal body already
		}
	}
	stop, quoted, ok := hdocDelimiter(r.Word)
	if !quoted {
		return
	}
	start, end := int(r.Hdoc.Pos().Offset()), int(r.Hdoc.End().Offset())
	if !ok || !r.Hdoc.Pos().IsValid() || start <= 0 || end > len(a.text) || start > end || a.text[start-1] != '\n' ||
		hdocEnd(a.text, start, stop, r.Op == syntax.DashHdoc) != end {
		if a.err == nil {
			a.err = fmt.Errorf("%w: the here-document %q has a partly quoted delimiter, and its body cannot be delimited as the shell delimits it",
				ErrParse, firstLine(a.src(r)))
		}
		return
	}
	r.Hdoc = nil // literal text: nothing in it runs
}

// hdocDelimiter returns a here-document delimiter word after quote removal,
// whether any part of it is quoted, and false when it has parts whose
// removal is not plain (expansions, escapes inside double quotes, escaped
// newlines).
func hdocDelimiter(w *syntax.Word) (stop string, quoted, ok bool) {
	var b strings.Builder
	ok = true
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				if v[i] == '\\' {
					quoted = true
					if i+1 >= len(v) || v[i+1] == '\n' {
						ok = false
						continue
					}
					i++
				}
				b.WriteByte(v[i])
			}
		case *syntax.SglQuoted:
			quoted = true
			if p.Dollar {
				ok = false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			quoted = true
			if p.Dollar {
				ok = false
			}
			for _, q := range p.Parts {
				l, isLit := q.(*syntax.Lit)
				if !isLit || strings.IndexByte(l.Value, '\\') >= 0 {
					ok = false
					continue
				}
				b.WriteString(l.Value)
			}
		default:
			ok = false
		}
	}
	return b.String(), quoted, ok
}

// hdocEnd returns the offset in text of the end of the first line, from
// start on, that equals stop (after leading tabs with dash), or -1.
func hdocEnd(text string, start int, stop string, dash bool) int {
	for i := start; i <= len(text); {
		j := strings.IndexByte(text[i:], '\n')
		line := text[i:]
		if j >= 0 {
			line = text[i : i+j]
		}
		if dash {
			line = strings.TrimLeft(line, "\t")
		}
		if line == stop {
			if j < 0 {
				return len(text)
			}
			return i + j
		}
		if j < 0 {
			return -1
		}
		i += j + 1
	}
	return -1
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
	pattern string // mvdan.cc/sh pattern when glob
	kind    wordKind
	src     string
	ext     bool // pattern uses extended operators
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
			a.unverifiable("the assignment %q sets a variable used at run time", a.src(as))
		}
		return
	}
	for _, as := range c.Assigns {
		if !a.benignAssign(as) {
			a.unverifiable("the environment assignment %q changes how %q runs", a.src(as), a.src(c.Args[0]))
		}
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

// benignEnv are environment variables a command may be given with a plain
// value (letters, digits and _.,:@+-, never a path) without changing which
// programs run or which files are opened: build targets and switches,
// locales and colour settings.
var benignEnv = map[string]bool{
	"CGO_ENABLED": true, "GOOS": true, "GOARCH": true, "GOARM": true, "GOARM64": true, "GOAMD64": true, "GO386": true,
	"GOMIPS": true, "GOMIPS64": true, "GOPPC64": true, "GORISCV64": true, "GOWASM": true, "GOEXPERIMENT": true,
	"GO111MODULE": true, "GOMAXPROCS": true, "GOGC": true, "GOMEMLIMIT": true,
	"LANG": true, "LC_ALL": true, "LC_CTYPE": true, "LC_MESSAGES": true, "LANGUAGE": true,
	"NO_COLOR": true, "FORCE_COLOR": true, "CLICOLOR": true, "CI": true, "COLUMNS": true, "TERM": true,
	"PYTHONUNBUFFERED": true, "PYTHONDONTWRITEBYTECODE": true, "RUST_BACKTRACE": true, "NODE_ENV": true,
}

// benignAssign reports whether as, a prefix of a command, sets one of
// benignEnv to a literal plain value.
func (a *analyzer) benignAssign(as *syntax.Assign) bool {
	if as.Append || as.Naked || as.Index != nil || as.Array != nil || as.Name == nil || !benignEnv[as.Name.Value] {
		return false
	}
	if as.Value == nil {
		return true
	}
	v, k := a.literal(as.Value, a.src(as.Value))
	if k != kindLiteral {
		return false
	}
	for i := 0; i < len(v.value); i++ {
		if c := v.value[i]; !isAlnum(c) && strings.IndexByte("_.,:@+-", c) < 0 {
			return false
		}
	}
	return true
}

// expandWord appends the brace expansion of w (under bash; POSIX sh has no
// brace expansion) to argv. Words that brace expansion leaves empty are
// dropped, as bash drops them.
func (a *analyzer) expandWord(w *syntax.Word, argv []word) []word {
	text := a.src(w)
	if a.posix || !hasBrace(w) {
		v, k := a.literal(w, text)
		v.kind = k
		return append(argv, v)
	}
	// SplitBraces rewrites the word it is given; work on a copy so the
	// tree being walked keeps only node types Walk knows.
	cp := *w
	if !syntax.SplitBraces(&cp) {
		v, k := a.literal(w, text)
		v.kind = k
		return append(argv, v)
	}
	n := 0
	for ew, err := range expand.BracesSeq(nil, &cp) {
		n++
		if err != nil || n > MaxBraceWords {
			a.unverifiable("the brace expansion %q produces more than %d words", text, MaxBraceWords)
			return append(argv, word{value: text, src: text, kind: kindDynamic})
		}
		if emptyWord(ew) {
			continue
		}
		v, k := a.literal(ew, text)
		v.kind = k
		v.src = text
		argv = append(argv, v)
	}
	return argv
}

// emptyWord reports whether w is nothing but empty unquoted literals.
func emptyWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); !ok || l.Value != "" {
			return false
		}
	}
	return true
}

func hasBrace(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, '{') >= 0 {
			return true
		}
	}
	return false
}

// literal evaluates a word statically in the current dialect; text is the
// word's source, used for dynamic words.
func (a *analyzer) literal(w *syntax.Word, text string) (word, wordKind) {
	var val, pat strings.Builder
	kind := kindLiteral
	ext := false
	dynamic := func() (word, wordKind) { return word{value: text, src: text}, kindDynamic }
	if len(w.Parts) == 1 {
		if _, ok := w.Parts[0].(*syntax.ProcSubst); ok {
			return word{value: text, src: text}, kindProcSubst
		}
	}
	quoted := func(s string) {
		val.WriteString(s)
		pat.WriteString(quoteMeta(s))
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
					quoted(v[i : i+1])
				case c == '*' || c == '?' || c == '[':
					if kind == kindLiteral {
						kind = kindGlob
					}
					val.WriteByte(c)
					pat.WriteByte(c)
				default:
					// Unquoted: bracket-expression syntax (!, ^, -, ])
					// keeps its meaning.
					val.WriteByte(c)
					pat.WriteByte(c)
				}
			}
		case *syntax.SglQuoted:
			switch {
			case p.Dollar && a.posix:
				// dash: a literal $ and a single-quoted string.
				quoted("$" + p.Value)
			case p.Dollar && strings.IndexByte(p.Value, '\\') >= 0:
				return dynamic()
			default:
				quoted(p.Value)
			}
		case *syntax.DblQuoted:
			if p.Dollar {
				return dynamic()
			}
			if !writeDblQuoted(p.Parts, quoted) {
				return dynamic()
			}
		case *syntax.ExtGlob:
			if a.posix {
				return dynamic()
			}
			s := p.Op.String() + p.Pattern.Value + ")"
			kind, ext = kindGlob, true
			val.WriteString(s)
			pat.WriteString(s)
		default: // ParamExp, CmdSubst, ArithmExp, ProcSubst inside a word
			return dynamic()
		}
	}
	out := word{value: val.String()}
	out.src = out.value
	if kind == kindGlob {
		out.pattern = pat.String()
		out.src = text
		out.ext = ext
		if !pattern.HasMeta(out.pattern, 0) && !ext {
			kind = kindLiteral // an unmatched [ is a literal
			out.pattern = ""
		}
	}
	return out, kind
}

// quoteMeta escapes every character a mvdan.cc/sh pattern may treat
// specially, extended operators and braces included.
func quoteMeta(s string) string {
	if !strings.ContainsAny(s, `*?[]\(){}|!+@`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\(){}|!+@`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// writeDblQuoted writes the value of the parts of a double-quoted string to
// quoted. It reports false, having written part of the value, when a part
// is not a literal.
func writeDblQuoted(parts []syntax.WordPart, quoted func(string)) bool {
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
			quoted(string(c))
		}
	}
	return true
}

// src returns a node's source text: the bytes of the script being walked
// between its start and end (never the printer, which cannot print every
// tree the parser builds, such as a brace word with an empty alternative).
func (a *analyzer) src(n syntax.Node) string {
	if n == nil {
		return ""
	}
	start, end := n.Pos(), n.End()
	if !start.IsValid() || !end.IsValid() {
		return fmt.Sprintf("%T", n)
	}
	i, j := int(start.Offset()), int(end.Offset())
	if i < 0 || j > len(a.text) || i > j {
		return fmt.Sprintf("%T", n)
	}
	return strings.TrimSpace(a.text[i:j])
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
	a.catalogue(len(a.res.Commands)-1, base, args)
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
		a.shell(cmd.Text, base, args, depth)
	case "zsh", "fish", "csh", "tcsh", "ksh93", "busybox", "pwsh", "nu", "elvish", "xonsh":
		a.unverifiable("%q runs a shell whose language is not analysed", cmd.Text)
	}
}

// catalogue records the catalogued risky options of command i and the
// paths it reads beneath or from history.
func (a *analyzer) catalogue(i int, base string, args []word) {
	rule, ok := catalogFor(base)
	if !ok {
		return
	}
	vals := make([]string, 0, len(args))
	for _, w := range args {
		if w.kind == kindDynamic || w.kind == kindProcSubst {
			return // reported as unverifiable already
		}
		vals = append(vals, w.value)
	}
	risky, recursive := rule.risky(base, vals)
	a.res.Commands[i].Risky = risky
	name := a.res.Commands[i].Name
	var rec []string
	if recursive {
		for _, v := range vals {
			if !strings.HasPrefix(v, "-") {
				rec = append(rec, v)
			}
		}
		if len(rec) == 0 || (len(rec) == 1 && searchesCwd[base]) {
			rec = append(rec, ".") // the default operand
		}
		if base == "find" {
			rec = findPaths(vals)
		}
	}
	noFollow := base == "ls" && !slices.ContainsFunc(vals, func(v string) bool {
		return hasOpt(v, "-L", styleGNU) || hasOpt(v, "--dereference", styleGNU)
	})
	for _, v := range rec {
		a.res.Words = append(a.res.Words, Word{Value: v, Command: name, Recursive: true, NoFollow: noFollow})
	}
	if base == "go" {
		// The files of the flag lists go passes to its tools are opened
		// like the command's own operands.
		_, files, problems := goNested(vals)
		for _, f := range files {
			a.res.Words = append(a.res.Words, Word{Value: f, Command: name})
		}
		for _, p := range problems {
			a.unverifiable("%q: %s", a.res.Commands[i].Text, p)
		}
	}
	if base == "git" {
		// git stores and prints a symlink as its target's name: it never
		// reads through one.
		paths, globs, content, revs := gitPaths(vals)
		for _, p := range paths {
			// An object from history may be a tree: everything beneath it.
			a.res.Words = append(a.res.Words, Word{Value: p, Command: name, Recursive: true, Git: true, NoFollow: true})
		}
		for _, v := range globs {
			a.res.Words = append(a.res.Words, Word{Value: v, Command: name, Recursive: true, Git: true, NoFollow: true})
		}
		index := !revs && gitDiffsIndex(vals)
		whole := gitWhole(vals)
		for _, v := range content {
			a.res.Words = append(a.res.Words, Word{Value: v, Command: name, Recursive: true, Git: true,
				MaybeRevision: revs, NoFollow: true, IndexOnly: index, WholeRepo: whole})
		}
	}
}

// findPaths are the starting points find walks: the operands after its
// leading options (-H, -L, -P, -D x, -Ox) and before the expression (the
// first word that is "(" or "!" or starts with "-" and is longer: "-" is a
// file name to find, and ")" and "," are taken as names too, which only
// adds paths), or "." when there are none; an expression's arguments
// (-name x) are not paths.
func findPaths(vals []string) []string {
	i := 0
	for i < len(vals) {
		switch v := vals[i]; {
		case v == "-H" || v == "-L" || v == "-P" || strings.HasPrefix(v, "-O"):
			i++
		case v == "-D":
			i += 2
		default:
			goto operands
		}
	}
operands:
	var out []string
	for ; i < len(vals); i++ {
		v := vals[i]
		if (strings.HasPrefix(v, "-") && v != "-") || v == "(" || v == "!" {
			break
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		out = []string{"."}
	}
	return out
}

// searchesCwd are recursive searchers whose first operand is a pattern
// and which search "." without a path operand.
var searchesCwd = map[string]bool{"grep": true, "egrep": true, "fgrep": true, "rgrep": true, "rg": true, "ag": true}

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

// git reports git options that set configuration: before the subcommand,
// or after one whose -c is not a diff option (git clone -c).
func (a *analyzer) git(text string, args []word) {
	sub := ""
	for i := 0; i < len(args); i++ {
		v := args[i].value
		if !strings.HasPrefix(v, "-") {
			if sub == "" {
				sub = v
			}
			continue
		}
		if v == "-c" && sub != "" && gitHarmless(sub, v) {
			continue
		}
		if v == "-c" || strings.HasPrefix(v, "--config-env") || strings.HasPrefix(v, "--exec-path") {
			a.unverifiable("%q sets git configuration, which can run arbitrary commands", text)
			break
		}
		if sub == "" && slices.Contains(catalog["git"].valueOpts, v) {
			i++ // the option's value is not the subcommand
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
		a.res.Words = append(a.res.Words, Word{Value: w.value, Glob: w.pattern, ExtGlob: w.ext, Command: cmd})
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
		case v == "-0" || v == "-v" || v == "--null" || v == "--debug":
			args = args[1:]
		case v == "-" || v == "-i" || v == "--ignore-environment":
			a.unverifiable("%q clears the environment the tools set for programs (git's configuration among it)", text)
			args = args[1:]
		case v == "-u" || v == "--unset":
			a.unverifiable("%q removes a variable the tools may set for programs (git's configuration among them)", text)
			if len(args) < 2 {
				return
			}
			args = args[2:]
		case strings.HasPrefix(v, "--unset="), strings.HasPrefix(v, "-u") && len(v) > 2:
			a.unverifiable("%q removes a variable the tools may set for programs (git's configuration among them)", text)
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
func (a *analyzer) shell(text, name string, args []word, depth int) {
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
	if err := a.script(s.value, depth+1, shellDialect(name)); err != nil && a.err == nil {
		a.err = fmt.Errorf("in %q: %w", text, err)
	}
}

// shellDialect returns the dialects the shell called name reads a -c string
// in: bash's for bash, dash's for dash and ash, and both for sh and the
// Korn shells (sh is bash on some systems).
func shellDialect(name string) Dialect {
	switch name {
	case "bash", "rbash":
		return Bash
	case "dash", "ash":
		return POSIX
	}
	return AllDialects
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
