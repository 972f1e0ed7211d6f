package shellcheck

import (
	"regexp"
	"slices"
	"strings"
)

// The catalogue of programs that run other programs or write files in ways
// their arguments do not show as paths: for each program, the options and
// subcommands that do so. A command using one reports it in Command.Risky;
// an allow-list entry admits the command only when it names each such
// option or subcommand explicitly (see the autonomy hook). The catalogue
// also marks recursive readers (Word.Recursive) and git's <rev>:<path>
// arguments (Word values of the path).

// progRule is one program's entry.
type progRule struct {
	// opts are options that run programs or write files; a value glued
	// with '=' counts too (--to-command=x). Single-letter options also
	// count bundled (-xzf has -x).
	opts []string
	// subs are subcommands (the first non-option argument) that do.
	subs []string
	// unknownSub marks every subcommand not in known as risky (git
	// aliases can run shell commands).
	known []string
	// recursive says when the command reads or writes the trees beneath
	// its operands: always, or when one of these options is given.
	recursiveAlways bool
	recursiveOpts   []string
	// script inspects a program text argument (sed, awk).
	script func(args []string) []string
	// noBundle: single-dash options are long names, never bundled letters.
	noBundle bool
}

var gitKnown = []string{"status", "log", "diff", "show", "add", "commit", "branch", "checkout", "switch",
	"restore", "reset", "rev-parse", "ls-files", "grep", "blame", "fetch", "pull", "push", "merge",
	"stash", "tag", "remote", "init", "clone", "cherry-pick", "revert", "describe", "shortlog",
	"reflog", "worktree", "apply", "am", "format-patch", "clean", "mv", "rm", "notes", "archive",
	"gc", "fsck", "cat-file", "ls-tree", "show-ref", "for-each-ref", "symbolic-ref", "diff-tree",
	"diff-files", "diff-index", "rev-list", "name-rev", "help", "version", "whatchanged", "range-diff",
	"merge-base", "count-objects", "var", "check-ignore", "check-attr", "sparse-checkout"}

var catalog = map[string]progRule{
	"go": {opts: []string{"-exec", "-toolexec", "-vettool", "-overlay", "-modfile", "-w"},
		subs: []string{"run", "generate", "tool", "env", "install", "get"}, noBundle: true},
	"git": {opts: []string{"-c", "--config-env", "-C", "--exec-path", "--upload-pack", "--receive-pack",
		"-u", "--exec", "-x", "--git-dir", "--work-tree", "--ext-diff", "--textconv", "--output", "-o"},
		subs: []string{"submodule", "difftool", "mergetool", "filter-branch", "filter-repo", "bisect",
			"rebase", "config", "hook", "daemon", "instaweb", "send-email", "credential", "archimport",
			"cvsimport", "svn", "p4", "web--browse", "upload-pack", "receive-pack", "remote-ext"},
		known: gitKnown},
	"find": {opts: []string{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
		"-fprintf", "-fls"}, recursiveAlways: true, noBundle: true},
	"xargs": {subs: nil, opts: []string{"-I", "-i", "--replace"}},
	"env":   {opts: []string{"-S", "--split-string", "-C", "--chdir"}},
	"sed":   {opts: []string{"-i", "--in-place", "-f", "--file", "-s"}, script: sedScript},
	"awk":   {opts: []string{"-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec"}, script: awkScript},
	"tar": {opts: []string{"--to-command", "--checkpoint-action", "-I", "--use-compress-program",
		"--rsh-command", "-F", "--info-script", "--new-volume-script", "-x", "--extract", "--get",
		"--overwrite", "--unlink-first"}, recursiveOpts: []string{"-c", "--create", "-r", "--append", "-u", "--update"}},
	"rsync": {opts: []string{"-e", "--rsh", "--rsync-path", "--remove-source-files", "--delete"},
		recursiveOpts: []string{"-r", "--recursive", "-a", "--archive"}},
	"scp":  {opts: []string{"-S", "-o", "-F"}, recursiveOpts: []string{"-r"}},
	"ssh":  {opts: []string{"-o", "-F", "-L", "-R", "-D", "-w", "-J"}},
	"make": {opts: []string{"--eval", "-E", "-f", "--file", "--makefile", "-C", "--directory"}},
	"npm": {opts: []string{"--prefix", "-C", "--script-shell"},
		subs: []string{"run", "run-script", "rum", "urn", "exec", "x", "start", "test", "t", "tst", "restart",
			"stop", "explore", "install", "i", "add", "ci", "rebuild", "rb", "publish", "pack", "init",
			"create", "update", "up", "install-test", "it", "install-ci-test", "cit", "link", "ln", "edit",
			"config", "set", "hook", "pkg"}},
	"npx":  {opts: []string{"-c", "--call", "-p", "--package"}, subs: []string{"*"}},
	"pnpm": {subs: []string{"run", "exec", "dlx", "start", "test", "install", "i", "add", "create"}},
	"yarn": {subs: []string{"run", "exec", "dlx", "start", "test", "install", "add", "create", "node"}},
	"node": {opts: []string{"-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader", "--experimental-loader", "-i",
		"--interactive"}},
	"python": {opts: []string{"-c", "-m", "-i"}},
	"perl":   {opts: []string{"-e", "-E", "-i", "-M", "-m", "-x", "-n", "-p"}},
	"ruby":   {opts: []string{"-e", "-i", "-r", "-x", "-n", "-p", "-S"}},
	"php":    {opts: []string{"-r", "-B", "-R", "-E", "-F", "-a", "-S"}},
	"less":   {opts: []string{"-o", "-O", "--log-file", "--LOG-FILE", "--lesskey-file", "-k"}},
	"man":    {opts: []string{"-P", "--pager", "-H", "--html", "-l", "--local-file", "-R", "-T", "--troff-device", "-Z", "-t"}},
	"vim":    {opts: []string{"-c", "--cmd", "-S", "-u", "-U", "-s", "-W", "-w", "-q", "-i", "-E", "-e", "--servername", "+"}},
	"curl": {opts: []string{"-o", "--output", "-O", "--remote-name", "--remote-name-all", "-K", "--config", "-D", "--dump-header",
		"--trace", "--trace-ascii", "-c", "--cookie-jar", "--libcurl", "--output-dir", "--create-dirs", "--etag-save", "--hsts", "--alt-svc",
		"-q"}},
	"wget": {opts: []string{"-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P", "--directory-prefix", "-e",
		"--execute", "-i", "--input-file", "-x", "--config", "-r", "--recursive", "-m", "--mirror"}},
	"kubectl": {subs: []string{"exec", "cp", "debug", "attach", "run", "port-forward", "proxy", "plugin", "krew", "apply", "create",
		"replace", "patch", "edit", "delete", "scale", "set", "label", "annotate", "rollout", "auth", "config", "kustomize"}},
	"docker": {subs: []string{"run", "exec", "build", "buildx", "create", "compose", "start", "cp", "commit", "load", "import", "plugin",
		"context", "container", "image", "volume", "system", "builder", "save", "push", "login"}},
	"grep":  {recursiveOpts: []string{"-r", "-R", "--recursive", "--dereference-recursive", "-d", "--directories"}},
	"rg":    {opts: []string{"--pre", "--pre-glob", "-z", "--search-zip"}, recursiveAlways: true},
	"ag":    {recursiveAlways: true},
	"ls":    {recursiveOpts: []string{"-R", "--recursive"}},
	"cp":    {recursiveOpts: []string{"-r", "-R", "--recursive", "-a", "--archive"}},
	"du":    {recursiveAlways: true},
	"tree":  {recursiveAlways: true},
	"zip":   {opts: []string{"-T", "-TT", "--unzip-command"}, recursiveOpts: []string{"-r", "--recurse-paths"}},
	"chmod": {recursiveOpts: []string{"-R", "--recursive"}},
	"chown": {recursiveOpts: []string{"-R", "--recursive"}},
	"rm":    {recursiveOpts: []string{"-r", "-R", "--recursive"}},
}

// aliases of catalogued programs.
var catalogAlias = map[string]string{
	"python3": "python", "python2": "python", "pypy": "python", "pypy3": "python",
	"gawk": "awk", "mawk": "awk", "nawk": "awk", "busybox-awk": "awk", "gsed": "sed",
	"vi": "vim", "nvim": "vim", "ex": "vim", "view": "vim", "vimdiff": "vim", "gvim": "vim",
	"rgrep": "grep", "egrep": "grep", "fgrep": "grep", "gtar": "tar", "bsdtar": "tar",
	"podman": "docker", "nerdctl": "docker", "oc": "kubectl", "more": "less", "most": "less",
	"nodejs": "node", "deno": "node", "bun": "node", "irb": "ruby", "cpan": "perl", "gmake": "make",
	"bmake": "make", "yarnpkg": "yarn",
}

// catalogFor returns the rule for the program base, and whether there is one.
func catalogFor(base string) (progRule, bool) {
	if a, ok := catalogAlias[base]; ok {
		base = a
	}
	if strings.HasPrefix(base, "python3.") {
		base = "python"
	}
	r, ok := catalog[base]
	return r, ok
}

// hasOpt reports whether the argument v is the option o: exactly, with a
// glued value (--opt=x, and -ox for a single-letter option), or bundled
// among single-letter options (-xzf has -x).
func hasOpt(v, o string, noBundle bool) bool {
	if v == o || strings.HasPrefix(v, o+"=") {
		return true
	}
	if o == "+" {
		return strings.HasPrefix(v, "+")
	}
	if !noBundle && len(o) == 2 && o[0] == '-' && o[1] != '-' && len(v) > 2 && v[0] == '-' && v[1] != '-' {
		return strings.IndexByte(v[1:], o[1]) >= 0
	}
	return false
}

// risky returns the catalogued options and subcommands args use, and
// whether the command reads or writes recursively beneath its operands.
func (r progRule) risky(base string, args []string) (out []string, recursive bool) {
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	recursive = r.recursiveAlways
	sub := ""
	for i, v := range args {
		if v == "--" {
			break
		}
		if strings.HasPrefix(v, "-") || (strings.HasPrefix(v, "+") && base == "vim") {
			for _, o := range r.opts {
				if hasOpt(v, o, r.noBundle) {
					add(o)
				}
			}
			for _, o := range r.recursiveOpts {
				if hasOpt(v, o, r.noBundle) {
					recursive = true
				}
			}
			continue
		}
		if sub == "" && i >= 0 {
			sub = v
		}
	}
	if base == "tar" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		// Old-style bundled options: tar xzf a.tgz, tar cf x.tar dir.
		if strings.ContainsAny(args[0], "x") {
			add("-x")
		}
		if strings.ContainsAny(args[0], "cru") {
			recursive = true
		}
		if strings.ContainsAny(args[0], "IF") {
			add("-" + string(args[0][strings.IndexAny(args[0], "IF")]))
		}
		sub = ""
	}
	if sub != "" {
		for _, s := range r.subs {
			if s == sub || s == "*" {
				add(sub)
			}
		}
		if r.known != nil && !slices.Contains(r.known, sub) && !slices.Contains(r.subs, sub) {
			add(sub) // an alias or an unknown subcommand
		}
	}
	if r.script != nil {
		for _, s := range r.script(args) {
			add(s)
		}
	}
	return out, recursive
}

// scriptTexts returns the program texts of sed or awk: the values of -e /
// --expression, or else the first non-option argument.
func scriptTexts(args []string, withArg string) []string {
	var out []string
	first := ""
	for i := 0; i < len(args); i++ {
		v := args[i]
		switch {
		case v == "-e" || v == "--expression":
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
		case strings.HasPrefix(v, "--expression="):
			out = append(out, strings.TrimPrefix(v, "--expression="))
		case strings.HasPrefix(v, "-e") && len(v) > 2:
			out = append(out, v[2:])
		case strings.HasPrefix(v, "-") && len(v) > 1:
			if strings.Contains(withArg, v) && i+1 < len(args) {
				i++
			}
		case first == "":
			first = v
		}
	}
	if len(out) == 0 && first != "" {
		out = append(out, first)
	}
	return out
}

// sedExec finds sed's e command and e/w flags of s and the w/W commands.
var sedExec = regexp.MustCompile(`(^|[;{}\n]|[0-9$/!,]|^\s*)\s*[ewWrR]\b|/[gpIiMm0-9]*[ew]`)

func sedScript(args []string) []string {
	var out []string
	for _, s := range scriptTexts(args, "-l -f --file") {
		if sedExec.MatchString(s) {
			out = append(out, "e")
		}
	}
	return out
}

func awkScript(args []string) []string {
	var out []string
	for _, s := range scriptTexts(args, "-v -F -f --assign --field-separator --file") {
		if strings.Contains(s, "system") {
			out = append(out, "system")
		}
		if strings.Contains(s, "|") {
			out = append(out, "|")
		}
		if strings.Contains(s, ">") {
			out = append(out, ">")
		}
		if strings.Contains(s, "@load") || strings.Contains(s, "@include") {
			out = append(out, "@load")
		}
	}
	return out
}

// gitPaths returns what git's arguments name inside the repository beyond
// plain path words: the <path> of <rev>:<path> and :<path> (objects from
// history or the index, which bypass the file system), and pathspecs with
// glob characters (which name files anywhere beneath the directory before
// the first glob character, returned as recursive operands).
func gitPaths(args []string) (paths, recursive []string) {
	dashdash := false
	for _, v := range args {
		if v == "--" {
			dashdash = true
			continue
		}
		if !dashdash && strings.HasPrefix(v, "-") {
			continue
		}
		if i := strings.IndexByte(v, ':'); i >= 0 && !dashdash && !strings.Contains(v[:i], "/") && !strings.Contains(v, "://") {
			if p := strings.TrimPrefix(v[i+1:], "/"); p != "" {
				paths = append(paths, p)
			}
		}
		if strings.HasPrefix(v, ":") || strings.ContainsAny(v, "*?[") {
			// Pathspec magic or a glob: anything beneath the literal prefix.
			lit := v
			if j := strings.IndexAny(lit, "*?["); j >= 0 {
				lit = lit[:j]
			}
			if strings.HasPrefix(lit, ":") {
				lit = ""
			}
			dir := "."
			if k := strings.LastIndexByte(lit, '/'); k > 0 {
				dir = lit[:k]
			}
			recursive = append(recursive, dir)
		}
	}
	return paths, recursive
}
