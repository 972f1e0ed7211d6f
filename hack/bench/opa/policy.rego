# The benchmark chain's coding-agent policy (internal/hooks/chain_bench_test.go)
# written the way a Rego policy for tool calls usually is: the shell command
# split on "|" and words matched with plain string globs. It reads no file
# system and parses no shell; it is the baseline the built-in chain is
# compared with, not something the project uses.
package toolhooks

import rego.v1

default allow := false

forbidden := [
	"**/.env", "**/*.pem", "**/id_rsa*", "**/.git/config", "**/.ssh/**",
	"/workspace/secret-05/**", "/workspace/secret-06/**", "/workspace/secret-07/**", "/workspace/secret-08/**", "/workspace/secret-09/**", "/workspace/secret-10/**", "/workspace/secret-11/**", "/workspace/secret-12/**", "/workspace/secret-13/**", "/workspace/secret-14/**", "/workspace/secret-15/**", "/workspace/secret-16/**", "/workspace/secret-17/**", "/workspace/secret-18/**", "/workspace/secret-19/**",
]

allowed_commands := [
	"git status", "git diff *", "git log *", "grep *", "head *", "ls", "ls *", "cat *", "go test *", "go build *",
	"tool10 *", "tool11 *", "tool12 *", "tool13 *", "tool14 *", "tool15 *", "tool16 *", "tool17 *", "tool18 *", "tool19 *",
]

commands := [trim_space(c) | some c in split(input.arguments.command, "|")]

command_allowed(c) if {
	some p in allowed_commands
	glob.match(p, [], c)
}

words contains w if {
	some c in commands
	some w in split(c, " ")
	w != ""
}

absolute(w) := w if startswith(w, "/")

absolute(w) := concat("/", ["/workspace", input.arguments.cwd, w]) if not startswith(w, "/")

forbidden_word if {
	some w in words
	some g in forbidden
	glob.match(g, ["/"], absolute(w))
}

outside_workspace if {
	some w in words
	startswith(w, "/")
	not startswith(w, "/workspace/")
}

allow if {
	input.tool == "shell"
	every c in commands {
		command_allowed(c)
	}
	not forbidden_word
	not outside_workspace
}
