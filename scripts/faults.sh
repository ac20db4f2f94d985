#!/usr/bin/env bash
# The fault suite in full (long scenarios included) against the real services, then docs/reliability.md
# regenerated from the figures it measured. Extra arguments go to pytest (e.g. -k network).
# Needs the services from scripts/provision.sh; the disk-full scenario needs root (it mounts a tmpfs).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

out="$(mktemp -d "${TMPDIR:-/tmp}/wattbench-faults.XXXXXX")"
export WATTBENCH_FAULTS=full
export WATTBENCH_FAULT_REPORT="$out/faults.json"

start=$(date +%s)
python3 -m pytest -p no:cacheprovider tests/faults -rsxX -s --junitxml="$out/junit.xml" "$@" 2>&1 | tee "$out/pytest.log"
rc=${PIPESTATUS[0]}
elapsed=$(( $(date +%s) - start ))

if [ -s "$WATTBENCH_FAULT_REPORT" ]; then
  python3 tests/faults/report.py "$WATTBENCH_FAULT_REPORT" --junit "$out/junit.xml" \
    --out docs/reliability.md --elapsed "$elapsed" || rc=1
else
  echo "[faults] no figures were recorded; docs/reliability.md left as it was" >&2
  rc=1
fi
echo "[faults] $elapsed s; figures, junit and log in $out" >&2
exit "$rc"
