package shellcheck

import (
	"fmt"
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
	// harmless, when set, reports that the option opt given after the
	// subcommand sub is one of sub's own options that neither runs
	// programs nor writes files (git diff -C finds copies, git -C changes
	// directory).
	harmless func(sub, opt string) bool
	style    optStyle
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
		known: gitKnown, harmless: gitHarmless,
		valueOpts: []string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--attr-source"}},
	"find": {opts: []string{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
		"-fprintf", "-fls", "-files0-from"}, recursiveAlways: true, style: styleWords},
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
			if r.optionRisks(v, positional, add) {
				recursive = true
			}
			if r.takesValue(v) && i+1 < len(args) {
				i++
			}
			continue
		}
		positional = append(positional, v)
	}
	if base == "tar" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if tarBundled(args[0], add) {
			recursive = true
		}
		positional = nil
	}
	r.subRisks(positional, add)
	if r.script != nil {
		for _, s := range r.script(args) {
			add(s)
		}
	}
	return out, recursive
}

// optionRisks adds the catalogued options the option word v uses (after
// the operands positional) and reports whether it makes the command
// recursive.
func (r progRule) optionRisks(v string, positional []string, add func(string)) (recursive bool) {
	for _, o := range r.opts {
		if len(positional) > 0 && r.harmless != nil && r.harmless(positional[0], o) {
			continue
		}
		if hasOpt(v, o, r.style) {
			add(o)
		}
	}
	for _, o := range r.recursiveOpts {
		if hasOpt(v, o, r.style) {
			recursive = true
		}
	}
	return recursive
}

// tarBundled adds the risky options of tar's old-style bundled options
// (tar xzf a.tgz, tar cf x.tar dir) in arg and reports whether they make
// it recursive.
func tarBundled(arg string, add func(string)) (recursive bool) {
	if strings.ContainsAny(arg, "x") {
		add("-x")
	}
	if strings.ContainsAny(arg, "IF") {
		add("-" + string(arg[strings.IndexAny(arg, "IF")]))
	}
	return strings.ContainsAny(arg, "cru")
}

// subRisks adds the catalogued subcommands among the operands positional
// (the first only, unless subAnywhere) and an unknown first one.
func (r progRule) subRisks(positional []string, add func(string)) {
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
}

// gitDiffing are the git subcommands whose -c, -C and -u are diff options
// (combined diff, find copies, a patch).
var gitDiffing = []string{"diff", "diff-tree", "diff-index", "diff-files", "log", "show", "whatchanged", "range-diff", "reflog"}

// gitHarmless reports whether git's option opt after the subcommand sub
// is sub's own and harmless: -c, -C and -u are git's configuration,
// directory and upload-pack options only before the subcommand or for the
// subcommands not listed here (git clone -c sets configuration, -u names
// the program to run).
func gitHarmless(sub, opt string) bool {
	switch opt {
	case "-c":
		return slices.Contains(gitDiffing, sub) || sub == "commit"
	case "-C":
		return slices.Contains(gitDiffing, sub) || sub == "commit" || sub == "blame" || sub == "annotate"
	case "-u":
		return slices.Contains(gitDiffing, sub) || sub == "commit" || sub == "add" || sub == "status" || sub == "stash"
	}
	return false
}

// takesValue reports whether the option v is one of r.valueOpts written
// alone, so that its value is the next argument.
func (r progRule) takesValue(v string) bool {
	if r.style == styleGo && strings.HasPrefix(v, "--") {
		v = v[1:]
	}
	return slices.Contains(r.valueOpts, v)
}

// goFlags returns the programs go's nested tool flags name: the linker's
// -extld, -extldflags (flags of that program) and -extar (see goNested).
func goFlags(args []string) []string {
	risky, _, _ := goNested(args)
	return risky
}

// goToolOpts are the options of the go command whose value is a list of
// flags for a tool it runs: the compiler, the assembler, the linker and
// gccgo.
var goToolOpts = [...]string{"-gcflags", "-asmflags", "-ldflags", "-gccgoflags"}

// goToolFlag is how one flag of a tool's list is read.
type goToolFlag int

const (
	goFlagBool  goToolFlag = iota // no value (a glued =value is a bool)
	goFlagValue                   // a value that names no file
	goFlagFile                    // a file or directory the tool reads or writes
	goFlagProg                    // a program to run, or flags for one
)

// goToolFlags are the flags of the compiler (gcflags), the assembler
// (asmflags) and the linker (ldflags) by name, as each tool reads them;
// a flag not listed makes the command unverifiable.
var goToolFlags = map[string]map[string]goToolFlag{
	"-gcflags": {
		"N": goFlagBool, "l": goFlagBool, "m": goFlagBool, "S": goFlagBool, "B": goFlagBool, "C": goFlagBool,
		"E": goFlagBool, "K": goFlagBool, "h": goFlagBool, "e": goFlagBool, "w": goFlagBool, "live": goFlagBool,
		"race": goFlagBool, "msan": goFlagBool, "asan": goFlagBool, "wb": goFlagBool, "complete": goFlagBool,
		"std": goFlagBool, "dwarf": goFlagBool, "dwarflocationlists": goFlagBool, "dwarfbasentries": goFlagBool,
		"shared": goFlagBool, "dynlink": goFlagBool, "smallframes": goFlagBool, "nolocalimports": goFlagBool,
		"linkshared": goFlagBool, "compiling-runtime": goFlagBool, "pack": goFlagBool, "t": goFlagBool, "v": goFlagBool,
		"V": goFlagBool, "r": goFlagBool, "j": goFlagBool, "+": goFlagBool, "%": goFlagBool, "A": goFlagBool,
		"lang": goFlagValue, "c": goFlagValue, "p": goFlagValue, "trimpath": goFlagValue, "spectre": goFlagValue,
		"buildid": goFlagValue, "goversion": goFlagValue, "importmap": goFlagValue, "installsuffix": goFlagValue,
		"memprofilerate": goFlagValue, "D": goFlagValue, "wrapglobalmapdbg": goFlagValue,
		"o": goFlagFile, "linkobj": goFlagFile, "asmhdr": goFlagFile, "bench": goFlagFile, "cpuprofile": goFlagFile,
		"memprofile": goFlagFile, "blockprofile": goFlagFile, "mutexprofile": goFlagFile, "trace": goFlagFile,
		"traceprofile": goFlagFile, "importcfg": goFlagFile, "embedcfg": goFlagFile, "symabis": goFlagFile,
		"coveragecfg": goFlagFile, "pgoprofile": goFlagFile, "I": goFlagFile,
	},
	"-asmflags": {
		"S": goFlagBool, "shared": goFlagBool, "dynlink": goFlagBool, "linkshared": goFlagBool, "gensymabis": goFlagBool,
		"compiling-runtime": goFlagBool, "e": goFlagBool, "v": goFlagBool, "V": goFlagBool, "debug": goFlagBool,
		"p": goFlagValue, "trimpath": goFlagValue, "spectre": goFlagValue, "D": goFlagValue,
		"o": goFlagFile, "I": goFlagFile,
	},
	"-ldflags": {
		"s": goFlagBool, "w": goFlagBool, "linkshared": goFlagBool, "race": goFlagBool, "msan": goFlagBool,
		"asan": goFlagBool, "v": goFlagBool, "V": goFlagBool, "a": goFlagBool, "n": goFlagBool, "f": goFlagBool,
		"c": goFlagBool, "g": goFlagBool, "h": goFlagBool, "d": goFlagBool, "u": goFlagBool, "K": goFlagBool,
		"dumpdep": goFlagBool, "bindnow": goFlagBool, "checklinkname": goFlagBool, "aslr": goFlagBool,
		"compressdwarf": goFlagBool, "strictdups": goFlagValue, "debugtramp": goFlagValue, "randlayout": goFlagValue,
		"X": goFlagValue, "B": goFlagValue, "buildid": goFlagValue, "buildmode": goFlagValue, "H": goFlagValue,
		"installsuffix": goFlagValue, "k": goFlagValue, "linkmode": goFlagValue, "pluginpath": goFlagValue,
		"R": goFlagValue, "T": goFlagValue, "E": goFlagValue, "r": goFlagValue, "I": goFlagValue,
		"memprofilerate": goFlagValue, "funcalign": goFlagValue,
		"o": goFlagFile, "importcfg": goFlagFile, "L": goFlagFile, "cpuprofile": goFlagFile, "memprofile": goFlagFile,
		"tmpdir": goFlagFile, "benchmarkprofile": goFlagFile, "capturehostobjs": goFlagFile, "libgcc": goFlagFile,
		"fipso": goFlagFile,
		"extld": goFlagProg, "extldflags": goFlagProg, "extar": goFlagProg,
	},
}

// goNested reads the flag lists go passes to the tools it runs (-gcflags,
// -asmflags, -ldflags and -gccgoflags, written -opt=list or -opt list, the
// list optionally after a package pattern and '=', split as go splits it:
// blanks, with '..' or ".." around a field). It returns the programs the
// lists name (risky), the files they name (files; a relative file of the
// compiler is relative to the directory go runs in, -C's value when given)
// and why a list cannot be read (problems): a flag the table does not know,
// a quote left open, gccgo's flags (options of gcc, not read here), or a
// relative file of the assembler or linker, which run in each package's
// directory or the output's.
func goNested(args []string) (risky, files, problems []string) {
	dir := ""
	for i := 0; i < len(args); i++ {
		v := args[i]
		if strings.HasPrefix(v, "--") {
			v = v[1:]
		}
		if (v == "-C") && i+1 < len(args) && dir == "" {
			dir = args[i+1]
		} else if d, ok := strings.CutPrefix(v, "-C="); ok && dir == "" {
			dir = d
		}
		for _, opt := range goToolOpts {
			list, glued := strings.CutPrefix(v, opt+"=")
			switch {
			case glued:
			case v == opt && i+1 < len(args):
				i++
				list = args[i]
			default:
				continue
			}
			r, f, p := goToolList(opt, list, dir)
			risky, files, problems = append(risky, r...), append(files, f...), append(problems, p...)
		}
	}
	return risky, files, problems
}

// goToolList reads one tool flag list of opt (see goNested).
func goToolList(opt, list, dir string) (risky, files, problems []string) {
	list = strings.TrimSpace(list)
	if list != "" && list[0] != '-' {
		_, rest, ok := strings.Cut(list, "=")
		if !ok {
			return nil, nil, nil // go refuses the list
		}
		list = rest
	}
	if opt == "-gccgoflags" {
		if strings.TrimSpace(list) == "" {
			return nil, nil, nil
		}
		return nil, nil, []string{fmt.Sprintf("%s=%q passes options to gcc, which are not analysed", opt, list)}
	}
	fields, ok := splitQuoted(list)
	if !ok {
		return nil, nil, []string{fmt.Sprintf("%s=%q has a quote left open", opt, list)}
	}
	table := goToolFlags[opt]
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if !strings.HasPrefix(f, "-") || f == "-" || f == "--" {
			problems = append(problems, fmt.Sprintf("%s has %q, which is not a flag of the tool", opt, f))
			continue
		}
		name := strings.TrimPrefix(f[1:], "-")
		name, val, glued := strings.Cut(name, "=")
		kind, known := table[name]
		if !known {
			problems = append(problems, fmt.Sprintf("%s has the flag %q, which is not analysed", opt, f))
			continue
		}
		if kind != goFlagBool && !glued {
			if i+1 >= len(fields) {
				continue // the tool refuses the flag
			}
			i++
			val = fields[i]
		}
		switch kind {
		case goFlagProg:
			if name == "extar" {
				risky = append(risky, "-ldflags=-extar")
			} else {
				risky = append(risky, "-ldflags=-extld")
			}
		case goFlagFile:
			switch {
			case val == "":
			case strings.HasPrefix(val, "/"):
				files = append(files, val)
			case opt != "-gcflags":
				problems = append(problems, fmt.Sprintf("%s names the relative file %q, which the tool opens in a package's directory", opt, val))
			case dir != "":
				files = append(files, dir+"/"+val)
			case strings.HasPrefix(val, "~"):
				// The shell may have expanded it, the tool does not.
				files = append(files, val, "./"+val)
			default:
				files = append(files, val)
			}
		}
	}
	return risky, files, problems
}

// splitQuoted splits s into fields as the go command splits a flag list:
// at blanks, a field that starts with ' or " running to the same quote
// (no escapes). It reports false for a quote left open.
func splitQuoted(s string) ([]string, bool) {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t\n\r")
		if s == "" {
			return out, true
		}
		if q := s[0]; q == '\'' || q == '"' {
			j := strings.IndexByte(s[1:], q)
			if j < 0 {
				return nil, false
			}
			out = append(out, s[1:1+j])
			s = s[2+j:]
			continue
		}
		j := strings.IndexAny(s, " \t\n\r")
		if j < 0 {
			j = len(s)
		}
		out = append(out, s[:j])
		s = s[j:]
	}
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
			// No pathspec: git grep searches the working directory,
			// the others the whole repository (see gitWhole).
			content = []string{"."}
		}
	default:
		content, revs = plain, true
	}
	return paths, recursive, content, revs
}

// gitWhole reports whether the git arguments args name no pathspec, so
// that a content reader other than git grep reads the whole repository,
// wherever in it the command runs.
func gitWhole(args []string) bool {
	_, _, content, revs := gitPaths(args)
	if revs || len(content) != 1 || content[0] != "." {
		return false
	}
	sub, dashdash := "", false
	skip := false
	for _, v := range args {
		if skip {
			skip = false
			continue
		}
		if v == "--" {
			dashdash = true
			continue
		}
		if !dashdash && strings.HasPrefix(v, "-") {
			skip = sub == "" && slices.Contains(catalog["git"].valueOpts, v)
			continue
		}
		if sub == "" && !dashdash {
			sub = v
			continue
		}
		return false // an explicit pathspec or object
	}
	return sub != "grep"
}

// gitDiffsIndex reports whether the git arguments args are a git diff
// that compares the work tree with the index: no word before "--" but the
// subcommand (no revision, no <rev>:<path>), and none of --cached,
// --staged, --merge-base or --no-index (abbreviated or not).
func gitDiffsIndex(args []string) bool {
	sub := ""
	skip := false
	for _, v := range args {
		if skip {
			skip = false
			continue
		}
		if v == "--" {
			break
		}
		if !strings.HasPrefix(v, "-") {
			if sub != "" {
				return false
			}
			sub = v
			continue
		}
		if sub == "" {
			skip = slices.Contains(catalog["git"].valueOpts, v)
			continue
		}
		for _, o := range []string{"--cached", "--staged", "--merge-base", "--no-index"} {
			if hasOpt(v, o, styleGNU) {
				return false
			}
		}
	}
	return sub == "diff"
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
