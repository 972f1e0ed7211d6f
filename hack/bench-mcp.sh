#!/usr/bin/env bash
# bench-mcp.sh: measure what the gateway's MCP endpoint adds to a tools/call,
# with the load generator, the gateway and the upstream MCP server in separate
# processes (method: hack/benchmcp). It builds the gateway and
# benchmcp, then runs every load shape direct and gated and prints a
# markdown table (progress on stderr).
#
# Environment: RATES (open-loop calls/s, default 250,500,1000,2000),
# INFLIGHT (closed-loop calls in flight, default 1,64), DURATION (per run,
# default 5s), WARMUP (default 1s), SESSIONS (default 64), GATEWAY_BIN (a
# gateway binary to use instead of building this tree's, to compare
# revisions), BENCH_LOCK (a lock file to hold while measuring, e.g.
# /work/notes/bench.lock on a shared machine; default none).
set -euo pipefail

RATES="${RATES:-250,500,1000,2000}"
INFLIGHT="${INFLIGHT:-1,64}"
DURATION="${DURATION:-5s}"
WARMUP="${WARMUP:-1s}"
SESSIONS="${SESSIONS:-64}"
GATEWAY_BIN="${GATEWAY_BIN:-}"
BENCH_LOCK="${BENCH_LOCK:-}"

root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [[ -n "$GATEWAY_BIN" ]]; then
	cp "$GATEWAY_BIN" "$tmp/gateway"
else
	echo "bench-mcp: building the gateway" >&2
	(cd "$root" && go build -o "$tmp/gateway" ./cmd/gateway)
fi
echo "bench-mcp: building benchmcp" >&2
(cd "$root" && go build -o "$tmp/benchmcp" ./hack/benchmcp)

cmd=("$tmp/benchmcp" -gateway "$tmp/gateway" -rates "$RATES" -inflight "$INFLIGHT"
	-duration "$DURATION" -warmup "$WARMUP" -sessions "$SESSIONS")
if [[ -n "$BENCH_LOCK" ]]; then
	echo "bench-mcp: waiting for $BENCH_LOCK" >&2
	flock "$BENCH_LOCK" "${cmd[@]}"
else
	"${cmd[@]}"
fi
echo "bench-mcp: load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
