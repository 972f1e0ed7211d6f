package shellcheck

import (
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

// optStyle is how a program reads its options.
type optStyle int

const (
	// styleGNU is getopt_long: single letters bundle (-xzf), long options
	// take '=' values and may be abbreviated to any prefix (--recur).
	styleGNU optStyle = iota
	// styleGo is Go's flag package: -name and --name alike, never bundled,
	// and "--" does not hide flags from the go command's own parser.
	styleGo
	// styleWords is single-dash words that never bundle (find).
	styleWords
)

// progRule is one program's entry.
type progRule struct {
	// opts are options that run programs or write files; a value glued
	// with '=' counts too (--to-command=x). Single-letter options also
	// count bundled (-xzf has -x), long ones abbreviated (--to-com).
	opts []string
	// subs are subcommands (the first non-option argument) that do.
	subs []string
	// known, when set, are the subcommands known not to: any other first
	// non-option argument is risky too (git aliases, kubectl and docker
	// plugins, package scripts).
	known []string
	// valueOpts are options whose value is the next argument, so that the
	// value is not taken for the subcommand (go -C dir, kubectl -n ns).
	valueOpts []string
	// subAnywhere: the program's parser may take an option's value for
	// the subcommand, so every non-option argument is looked up in subs.
	subAnywhere bool
	// recursive says when the command reads or writes the trees beneath
	// its operands: always, or when one of these options is given.
	recursiveAlways bool
	recursiveOpts   []string
	// script inspects the arguments for what options cannot show (sed and
	// awk programs, go's linker flags).
	script func(args []string) []string
	style  optStyle
}

var gitKnown = []string{"status", "log", "diff", "show", "add", "commit", "branch", "checkout", "switch",
	"restore", "reset", "rev-parse", "ls-files", "grep", "blame", "fetch", "pull", "push", "merge",
	"stash", "tag", "remote", "init", "clone", "cherry-pick", "revert", "describe", "shortlog",
	"reflog", "worktree", "apply", "am", "format-patch", "clean", "mv", "rm", "notes", "archive",
	"gc", "fsck", "cat-file", "ls-tree", "show-ref", "for-each-ref", "symbolic-ref", "diff-tree",
	"diff-files", "diff-index", "rev-list", "name-rev", "help", "version", "whatchanged", "range-diff",
	"merge-base", "count-objects", "var", "check-ignore", "check-attr", "sparse-checkout", "annotate",
	"bundle", "fast-export"}

var catalog = map[string]progRule{
	"go": {opts: []string{"-exec", "-toolexec", "-vettool", "-overlay", "-modfile", "-w"},
		subs: []string{"run", "generate", "tool", "env", "install", "get"},
		known: []string{"build", "test", "vet", "fmt", "list", "mod", "version", "doc", "clean", "bug", "fix",
			"work", "help", "telemetry"},
		valueOpts: []string{"-C", "-run", "-bench", "-count", "-timeout", "-p", "-tags", "-o", "-ldflags",
			"-gcflags", "-asmflags", "-gccgoflags", "-mod", "-pkgdir", "-coverprofile", "-cpuprofile", "-memprofile",
			"-blockprofile", "-mutexprofile", "-trace", "-outputdir", "-parallel", "-cpu", "-benchtime", "-shuffle",
			"-fuzz", "-fuzztime", "-fuzzminimizetime", "-skip", "-list", "-covermode", "-coverpkg", "-exec",
			"-toolexec", "-vettool", "-modfile", "-overlay", "-pgo", "-buildmode", "-compiler", "-installsuffix",
			"-memprofilerate", "-blockprofilerate", "-mutexprofilefraction", "-f"},
		script: goFlags, style: styleGo},
	"git": {opts: []string{"-c", "--config-env", "-C", "--exec-path", "--upload-pack", "--receive-pack",
		"-u", "--exec", "-x", "--git-dir", "--work-tree", "--ext-diff", "--textconv", "--output", "-o",
		"-O", "--open-files-in-pager"},
		subs: []string{"submodule", "difftool", "mergetool", "filter-branch", "filter-repo", "bisect",
			"rebase", "config", "hook", "daemon", "instaweb", "send-email", "credential", "archimport",
			"cvsimport", "svn", "p4", "web--browse", "upload-pack", "receive-pack", "remote-ext"},
		known:     gitKnown,
		valueOpts: []string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--attr-source"}},
	"find": {opts: []string{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
		"-fprintf", "-fls"}, recursiveAlways: true, style: styleWords},
	"xargs": {subs: nil, opts: []string{"-I", "-i", "--replace"}},
	"env":   {opts: []string{"-S", "--split-string", "-C", "--chdir"}},
	"sed":   {opts: []string{"-i", "--in-place", "-f", "--file", "-s", "--separate"}, script: sedScript},
	"awk": {opts: []string{"-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec"},
		script: awkScript},
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
			"config", "set", "hook", "pkg", "version"},
		known: []string{"ls", "list", "ll", "la", "view", "info", "show", "v", "outdated", "search", "s", "find",
			"help", "whoami", "ping", "doctor", "root", "prefix", "fund", "explain", "why", "query", "docs", "home",
			"bugs", "repo", "audit"},
		subAnywhere: true},
	"npx": {opts: []string{"-c", "--call", "-p", "--package"}, subs: []string{"*"}},
	"pnpm": {subs: []string{"run", "exec", "dlx", "start", "test", "install", "i", "add", "create"},
		known:       []string{"list", "ls", "ll", "why", "outdated", "licenses", "help", "audit", "view", "info"},
		subAnywhere: true},
	"yarn": {subs: []string{"run", "exec", "dlx", "start", "test", "install", "add", "create", "node"},
		known:       []string{"list", "why", "outdated", "licenses", "help", "audit", "info", "config"},
		subAnywhere: true},
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
		"replace", "patch", "edit", "delete", "scale", "set", "label", "annotate", "rollout", "auth", "config", "kustomize"},
		known: []string{"get", "describe", "logs", "explain", "api-resources", "api-versions", "version", "cluster-info", "top",
			"diff", "wait", "events", "options", "help", "completion"},
		valueOpts: []string{"-n", "--namespace", "--context", "--cluster", "--user", "-s", "--server", "--kubeconfig", "--token",
			"--as", "--as-group", "--as-uid", "--request-timeout", "-v", "--v", "--cache-dir", "--certificate-authority",
			"--client-certificate", "--client-key", "--tls-server-name", "--password", "--username", "--profile", "--profile-output",
			"--log-file", "--vmodule", "-l", "--selector", "-o", "--output", "-c", "--container", "-f", "--filename"}},
	"docker": {subs: []string{"run", "exec", "build", "buildx", "create", "compose", "start", "cp", "commit", "load", "import", "plugin",
		"context", "container", "image", "volume", "system", "builder", "save", "push", "login"},
		known: []string{"ps", "images", "logs", "inspect", "version", "info", "pull", "top", "stats", "history", "events", "port",
			"diff", "search", "help"},
		valueOpts: []string{"-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--tlscacert", "--tlscert", "--tlskey"}},
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

// secretOptions are, for each program, the options whose value is a
// password, a token or credentials (user:password) although their names do
// not say so: a single-letter one also counts glued (-psecret) and bundled
// (-upsecret), and the value of one written alone is the next argument.
// Options whose names say secret (--password, --token) need no entry.
var secretOptions = map[string][]string{
	"mysql": {"-p"}, "mariadb": {"-p"}, "mysqldump": {"-p"}, "mysqladmin": {"-p"}, "mysqlimport": {"-p"},
	"mysqlshow": {"-p"}, "mysqlcheck": {"-p"}, "mysqlsh": {"-p"}, "mariadb-dump": {"-p"}, "mariadb-admin": {"-p"},
	"mongo": {"-p"}, "mongosh": {"-p"}, "mongodump": {"-p"}, "mongorestore": {"-p"}, "mongoexport": {"-p"}, "mongoimport": {"-p"},
	"redis-cli": {"-a", "--user"}, "sshpass": {"-p"}, "sqlcmd": {"-P"}, "bcp": {"-P"}, "isql": {"-P"},
	"ldapsearch": {"-w"}, "ldapadd": {"-w"}, "ldapmodify": {"-w"}, "ldapdelete": {"-w"}, "ldappasswd": {"-w", "-s"},
	"curl": {"-u", "--user", "-U", "--proxy-user", "-E", "--cert", "--oauth2-bearer"},
	"wget": {"--user", "--http-user", "--ftp-user"}, "zip": {"-P"}, "unzip": {"-P"}, "7z": {"-p"}, "7za": {"-p"},
	"openssl": {"-pass", "-passin", "-passout", "-k", "-K"}, "smbclient": {"-U", "--user"},
	"skopeo": {"--creds", "--src-creds", "--dest-creds"},
}

// SecretOptions returns the options of the program base (a command name
// without its directory) whose value is a secret although their names do not
// say so (mysql -p, curl -u, redis-cli -a), or nil.
func SecretOptions(base string) []string {
	return secretOptions[base]
}

// SecretOptionPrograms returns the programs SecretOptions knows.
func SecretOptionPrograms() []string {
	out := make([]string, 0, len(secretOptions))
	for p := range secretOptions {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
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

// hasOpt reports whether the argument v is the option o as the program
// reads it: exactly, with a glued value (--opt=x, and -ox for a
// single-letter option), bundled among single-letter options (-xzf has
// -x), abbreviated (--recur for --recursive), or for a Go program with two
// dashes (--exec for -exec).
func hasOpt(v, o string, style optStyle) bool {
	if v == o || strings.HasPrefix(v, o+"=") {
		return true
	}
	if o == "+" {
		return strings.HasPrefix(v, "+")
	}
	switch style {
	case styleGo:
		if strings.HasPrefix(v, "--") && !strings.HasPrefix(o, "--") {
			return hasOpt(v[1:], o, style)
		}
	case styleGNU:
		if len(o) == 2 && o[0] == '-' && o[1] != '-' && len(v) > 2 && v[0] == '-' && v[1] != '-' {
			return strings.IndexByte(v[1:], o[1]) >= 0
		}
		if strings.HasPrefix(o, "--") && strings.HasPrefix(v, "--") {
			name, _, _ := strings.Cut(v, "=")
			return len(name) > 2 && strings.HasPrefix(o, name)
		}
	case styleWords:
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
	var positional []string
	for i := 0; i < len(args); i++ {
		v := args[i]
		if v == "--" {
			if r.style == styleGo {
				continue // go test passes what follows on, and reads -exec there too
			}
			break
		}
		if strings.HasPrefix(v, "-") || (strings.HasPrefix(v, "+") && base == "vim") {
			for _, o := range r.opts {
				if hasOpt(v, o, r.style) {
					add(o)
				}
			}
			for _, o := range r.recursiveOpts {
				if hasOpt(v, o, r.style) {
					recursive = true
				}
			}
			if r.takesValue(v) && i+1 < len(args) {
				i++
			}
			continue
		}
		positional = append(positional, v)
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
		positional = nil
	}
	for i, sub := range positional {
		if i > 0 && !r.subAnywhere {
			break
		}
		if slices.Contains(r.subs, sub) || slices.Contains(r.subs, "*") {
			add(sub)
		} else if i == 0 && r.known != nil && !slices.Contains(r.known, sub) {
			add(sub) // an alias, a plugin, a script or an unknown subcommand
		}
	}
	if r.script != nil {
		for _, s := range r.script(args) {
			add(s)
		}
	}
	return out, recursive
}

// takesValue reports whether the option v is one of r.valueOpts written
// alone, so that its value is the next argument.
func (r progRule) takesValue(v string) bool {
	if r.style == styleGo && strings.HasPrefix(v, "--") {
		v = v[1:]
	}
	return slices.Contains(r.valueOpts, v)
}

// goFlags finds linker flags that name a program to run (-ldflags
// '-extld=sh', -ldflags=-extldflags=...), in any argument.
func goFlags(args []string) []string {
	for _, v := range args {
		if strings.Contains(v, "extld") {
			return []string{"-ldflags=-extld"}
		}
	}
	return nil
}

// scriptTexts returns the program texts of sed or awk: the values of the
// script options (-e, --expression, abbreviated, glued or bundled, as in
// -ne'p'), or else the first non-option argument. valueShort and
// valueLong are the other options that take a value.
func scriptTexts(args []string, scriptShort byte, scriptLong []string, valueShort string, valueLong []string) []string {
	var out []string
	first := ""
	isLong := func(name string, longs []string) bool {
		for _, l := range longs {
			if len(name) > 2 && strings.HasPrefix(l, name) {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(args); i++ {
		v := args[i]
		switch {
		case v == "--":
			if first == "" && i+1 < len(args) {
				first = args[i+1]
			}
			i = len(args)
		case strings.HasPrefix(v, "--"):
			name, val, glued := strings.Cut(v, "=")
			switch {
			case isLong(name, scriptLong):
				if glued {
					out = append(out, val)
				} else if i+1 < len(args) {
					out = append(out, args[i+1])
					i++
				}
			case !glued && isLong(name, valueLong) && i+1 < len(args):
				i++
			}
		case strings.HasPrefix(v, "-") && len(v) > 1:
			// Bundled letters: the first that takes a value takes the rest
			// of the word, or the next argument.
			for j := 1; j < len(v); j++ {
				c := v[j]
				if c != scriptShort && strings.IndexByte(valueShort, c) < 0 {
					continue
				}
				val := v[j+1:]
				if val == "" && i+1 < len(args) {
					i++
					val = args[i]
				}
				if c == scriptShort {
					out = append(out, val)
				}
				break
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

// gitPaths returns what git's arguments name inside the repository beyond
// plain path words: the <path> of <rev>:<path>, :<path> and :<n>:<path>
// (objects from history or the index, which bypass the file system), and
// pathspecs with glob characters (which name files anywhere beneath the
// directory before the first glob character, returned as recursive
// operands). When the subcommand prints the content of files from history
// or the index (git diff, git show, git log -p, git grep, git archive...),
// content lists what it reads: the pathspecs after "--", or else the
// plain words, which may be paths or revisions (revs is set), or "." for
// the whole repository.
func gitPaths(args []string) (paths, recursive, content []string, revs bool) {
	dashdash := false
	sub := ""
	var plain, after []string
	skip := false
	for _, v := range args {
		if skip {
			skip = false
			continue
		}
		if v == "--" && !dashdash {
			dashdash = true
			continue
		}
		if !dashdash && strings.HasPrefix(v, "-") {
			if sub == "" && slices.Contains(catalog["git"].valueOpts, v) {
				skip = true
			}
			continue
		}
		if sub == "" && !dashdash {
			sub = v
			continue
		}
		if p, dir, ok := gitObjectWord(v, dashdash); ok {
			if p != "" {
				paths = append(paths, p)
			}
			if dir != "" {
				recursive = append(recursive, dir)
			}
			continue
		}
		if dashdash {
			after = append(after, v)
		} else {
			plain = append(plain, v)
		}
	}
	if !gitPrintsContent(sub, args) {
		return paths, recursive, nil, false
	}
	switch {
	case dashdash && len(after) > 0:
		content = after
	case dashdash || len(plain) == 0:
		if len(paths) == 0 || sub == "grep" || sub == "archive" {
			content = []string{"."}
		}
	default:
		content, revs = plain, true
	}
	return paths, recursive, content, revs
}

// gitObjectWord reads one non-option git argument: the <path> of
// <rev>:<path>, :<path> or :<n>:<path> (before "--"), or the directory
// beneath which a pathspec with magic or glob characters names files. ok
// is false for a plain word.
func gitObjectWord(v string, dashdash bool) (path, dir string, ok bool) {
	if i := strings.IndexByte(v, ':'); i >= 0 && !dashdash {
		p := v[i+1:]
		if i == 0 && len(p) > 1 && p[0] >= '0' && p[0] <= '3' && p[1] == ':' {
			p = p[2:] // :<stage>:<path>
		}
		return strings.TrimLeft(p, "/"), "", true
	}
	if !strings.HasPrefix(v, ":") && !strings.ContainsAny(v, "*?[") {
		return "", "", false
	}
	// Pathspec magic or a glob: anything beneath the literal prefix.
	lit := v
	if j := strings.IndexAny(lit, "*?["); j >= 0 {
		lit = lit[:j]
	}
	if strings.HasPrefix(lit, ":") {
		lit = ""
	}
	dir = "."
	if k := strings.LastIndexByte(lit, '/'); k > 0 {
		dir = lit[:k]
	}
	return "", dir, true
}

// gitContentAlways are the git subcommands that print or pack file content
// from the work tree, the index or history.
var gitContentAlways = []string{"diff", "show", "grep", "archive", "cat-file", "format-patch", "bundle",
	"fast-export", "range-diff", "blame", "annotate", "diff-tree", "diff-index", "diff-files"}

// gitContentWithPatch are the ones that do with a patch or pickaxe option.
var gitContentWithPatch = []string{"log", "whatchanged", "reflog", "stash"}

func gitPrintsContent(sub string, args []string) bool {
	if slices.Contains(gitContentAlways, sub) {
		return true
	}
	if !slices.Contains(gitContentWithPatch, sub) {
		return false
	}
	for _, v := range args {
		if v == "--" {
			break
		}
		switch {
		case strings.HasPrefix(v, "--"):
			name, _, _ := strings.Cut(v, "=")
			for _, o := range []string{"--patch", "--patch-with-stat", "--patch-with-raw", "--unified", "--cc",
				"--combined-all-paths", "--word-diff", "--color-words", "--binary", "--full-diff", "--function-context",
				"--pickaxe-regex", "--pickaxe-all", "--find-object", "--diff-merges", "--remerge-diff", "--dd", "--line-porcelain",
				"--textconv", "--ext-diff"} {
				if len(name) > 2 && strings.HasPrefix(o, name) {
					return true
				}
			}
		case strings.HasPrefix(v, "-") && len(v) > 1:
			if strings.ContainsAny(v[1:], "puUcmWSGL") {
				return true
			}
		}
	}
	return false
}
