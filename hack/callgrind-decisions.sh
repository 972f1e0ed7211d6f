#!/usr/bin/env bash
# callgrind-decisions.sh: instructions per decision, counted by valgrind's
# callgrind, which is repeatable on a loaded machine where wall-clock numbers
# are not. It builds the test binaries of internal/gateway and internal/hooks
# and runs BenchmarkDecisionHandler (the /v1/decisions handler, mixed calls)
# and the BenchmarkBuiltinChain sub-benchmarks (Executor.Evaluate) under
# callgrind twice, with N1 and N2 iterations, on one CPU; the difference of
# the two instruction totals divided by N2-N1 cancels start-up and setup.
#
# The garbage collector runs with GOGC=off by default (CG_GOGC overrides):
# when a collection happens relative to the short measured window is not
# repeatable, and it swings the totals by several percent; the collector's
# share shows in the allocations per decision (-benchmem) instead.
#
# Usage: hack/callgrind-decisions.sh [OUTDIR]   (N1, N2, CG_GOGC from the environment)
set -euo pipefail
N1="${N1:-200}"
N2="${N2:-1200}"
CG_GOGC="${CG_GOGC:-off}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
command -v valgrind >/dev/null || { echo "callgrind-decisions: valgrind is not installed (Debian: apt-get install valgrind)" >&2; exit 2; }

echo "callgrind-decisions: building test binaries into $out" >&2
(cd "$root" && go test -c -o "$out/gateway.test" ./internal/gateway && go test -c -o "$out/hooks.test" ./internal/hooks)

# irs BIN BENCH N: total instructions of one run.
irs() {
	local f="$out/callgrind.$(basename "$1").$(echo "$2" | tr -c "a-zA-Z0-9_\n" "_").$3.out"
	# Callgrind follows neither Go's preemption signals nor RDTSCP (valgrind
	# 3.19), so both are switched off; the x/sys/cpu warning about the latter is harmless.
	if ! GOGC="$CG_GOGC" GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$f" "$1" \
		-test.run '^$' -test.bench "$2" -test.benchtime "${3}x" -test.cpu 1 >"$f.log" 2>&1 ||
		! grep -q '^PASS' "$f.log"; then
		echo "callgrind-decisions: $1 $2 failed under valgrind, see $f.log" >&2
		exit 1
	fi
	awk '/^summary:/ {print $2; exit}' "$f"
}

perdecision() {
	local bin="$1" bench="$2" a b
	echo "callgrind-decisions: $bench ($N1 and $N2 iterations)" >&2
	a="$(irs "$bin" "$bench" "$N1")"
	b="$(irs "$bin" "$bench" "$N2")"
	printf '%-60s %10d instructions/decision\n' "$bench" $(((b - a) / (N2 - N1)))
}

perdecision "$out/gateway.test" '^BenchmarkDecisionHandler$'
perdecision "$out/hooks.test" '^BenchmarkBuiltinChain$/^no_path$'
perdecision "$out/hooks.test" '^BenchmarkBuiltinChain$/^read_file_with_a_4-segment_path$'
perdecision "$out/hooks.test" '^BenchmarkBuiltinChain$/^3-command_shell_pipeline$'
