package autonomy

import (
	"fmt"
	"path"
	"strings"
)

// Finding is one allow-list entry that lets an agent run arbitrary
// programs, and why.
type Finding struct {
	// Entry is the allowedShellCommands entry.
	Entry string
	// Why says what the agent can run through it.
	Why string
}

// String renders the finding for a condition, an Event or the CLI.
func (f Finding) String() string {
	return fmt.Sprintf("allowedShellCommands entry %q %s", f.Entry, f.Why)
}

// runners run a program, script or code given as an argument, or one the
// agent can write (a Makefile, a test).
var runners = map[string]string{
	"bash": "runs any shell script or -c string", "sh": "runs any shell script or -c string",
	"dash": "runs any shell script or -c string", "zsh": "runs any shell script or -c string",
	"ksh": "runs any shell script or -c string", "fish": "runs any shell script or -c string",
	"python": "runs any Python code", "python3": "runs any Python code", "node": "runs any JavaScript",
	"perl": "runs any Perl code", "ruby": "runs any Ruby code", "php": "runs any PHP code",
	"deno": "runs any JavaScript", "bun": "runs any JavaScript", "lua": "runs any Lua code",
	"java": "runs any Java program", "Rscript": "runs any R code",
	"make": "runs the recipes of a Makefile the agent can write", "gmake": "runs the recipes of a Makefile the agent can write",
	"npx": "runs any npm package", "env": "runs any program", "xargs": "runs any program",
	"sudo": "runs any program as another user", "doas": "runs any program as another user",
	"nohup": "runs any program", "timeout": "runs any program", "nice": "runs any program",
	"exec": "runs any program", "eval": "runs any shell code", "source": "runs any shell script",
	"ssh": "runs any command on another host", "docker": "runs any container", "podman": "runs any container",
	"kubectl": "can exec into pods and run containers",
}

// subRunners are subcommands that run programs the agent chooses or writes.
var subRunners = map[string]map[string]string{
	"npm": {"run": "runs any package.json script", "run-script": "runs any package.json script", "exec": "runs any npm package",
		"x": "runs any npm package", "start": "runs the start script", "test": "runs the test script", "install": "runs install scripts",
		"i": "runs install scripts", "ci": "runs install scripts"},
	"pnpm": {"run": "runs any package.json script", "exec": "runs any program", "dlx": "runs any npm package",
		"test": "runs the test script", "install": "runs install scripts"},
	"yarn": {"run": "runs any package.json script", "exec": "runs any program", "dlx": "runs any npm package",
		"test": "runs the test script", "install": "runs install scripts"},
	"go": {"run": "runs any Go program", "generate": "runs the commands in //go:generate lines the agent can write",
		"tool": "runs any tool", "test": "runs test code the agent can write"},
	"cargo": {"run": "runs any Rust program", "test": "runs test code the agent can write",
		"build": "runs build.rs scripts the agent can write"},
	gitName: {"submodule": "runs commands through submodule foreach", "bisect": "runs commands through bisect run",
		"rebase": "runs commands through rebase --exec", "difftool": "runs any difftool",
		"config": "can set aliases and hooks that run commands"},
}

// Lint returns the allow-list entries that let an agent run arbitrary
// programs: ["*"], an interpreter, shell or program runner followed by a
// wildcard (python *, bash *, make *, env *), and subcommands that run
// programs the agent chooses or writes (npm run *, go run *, go test *).
// A policy with findings is valid; they are warnings.
func Lint(allowed []string) []Finding {
	var out []Finding
	for _, p := range allowed {
		fields := strings.Fields(p)
		if len(fields) == 0 {
			continue
		}
		wild := strings.ContainsAny(p, "*?")
		prog := path.Base(fields[0])
		switch {
		case p == "*":
			out = append(out, Finding{p, "allows every command: a program it runs may open any file, forbidden paths included, " +
				"where the command line does not name them (only the gateway's own shell tool checks each open at run time)"})
		case fields[0] == "*" || strings.ContainsAny(fields[0], "*?"):
			out = append(out, Finding{p, "allows any program name"})
		case wild && runners[prog] != "":
			out = append(out, Finding{p, runners[prog]})
		case wild && subRunners[prog] != nil:
			if len(fields) < 2 || strings.ContainsAny(fields[1], "*?") {
				out = append(out, Finding{p, "allows every " + prog + " subcommand, some of which run programs"})
			} else if why := subRunners[prog][fields[1]]; why != "" {
				out = append(out, Finding{p, why})
			}
		}
	}
	return out
}
