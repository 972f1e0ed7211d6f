#!/usr/bin/env bash
# The e2e step of `make ci`: runs `make e2e` (the Helm chart on a local
# single-node cluster) when this machine can run the cluster: root, cgroups,
# and containerd, runc and the CNI plugins (installed from Debian when
# missing). A machine that cannot run it fails loudly unless
# TOOLHOOKS_SKIP_E2E=1 says to skip it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
banner() {
  echo "!! ================================================================="
  printf '!! %s\n' "$@"
  echo "!! ================================================================="
}
if hack/local-cluster.sh check; then
  start=$(date +%s)
  make e2e
  echo "== e2e suite passed in $(( $(date +%s) - start ))s"
elif [ "${TOOLHOOKS_SKIP_E2E:-0}" = 1 ]; then
  banner "e2e suite SKIPPED (TOOLHOOKS_SKIP_E2E=1): this machine cannot run it"
else
  banner "e2e suite cannot run on this machine (see above); failing." \
    "Set TOOLHOOKS_SKIP_E2E=1 to skip it explicitly."
  exit 1
fi
