#!/usr/bin/env bash
# Installs, from Debian, the programs the test suites run and fail without
# (they never skip): node for the plugin tests; npm for the MCP tests' pinned
# packages (Debian's nodejs has no npm); bash, dash and strace for the shell
# checker's differential tests, which run allowed command lines under both
# shells and trace what they touch; redis-server for the Redis state store's
# tests, make demo-cluster and make e2e, which run a real server. Does
# nothing when all are present.
set -euo pipefail
need=()
for pkg in nodejs:node npm:npm bash:bash dash:dash strace:strace redis-server:redis-server; do
  command -v "${pkg#*:}" >/dev/null 2>&1 || need+=("${pkg%%:*}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing Debian packages the tests need: ${need[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
echo "== test programs: node $(node --version), npm $(npm --version), $(bash --version | head -1), dash, $(strace --version | head -1), $(redis-server --version | cut -d' ' -f1-3)"
