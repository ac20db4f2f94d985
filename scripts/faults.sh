#!/usr/bin/env bash
# The fault suite in full (long scenarios included) against the real services, then docs/reliability.md
# regenerated from the figures it measured. Extra arguments go to pytest (e.g. -k network).
#
# By default it measures the working tree. WATTBENCH_FAULTS_REF=<commit> measures a clean export of that
# commit instead (its packages put ahead of the installed ones), so the figures belong to one known
# version even while the tree is being edited. The page names what was measured either way.
#
# Needs the services from scripts/provision.sh; the disk-full scenario needs root (it mounts a tmpfs).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

out="$(mktemp -d "${TMPDIR:-/tmp}/wattbench-faults.XXXXXX")"
export WATTBENCH_FAULTS=full
export WATTBENCH_FAULT_REPORT="$out/faults.json"

src="$root"
if [ -n "${WATTBENCH_FAULTS_REF:-}" ]; then
  measured="commit $(git rev-parse --short "$WATTBENCH_FAULTS_REF")" || exit 2
  src="$out/src"
  mkdir -p "$src" "$out/pkgs"
  git archive "$WATTBENCH_FAULTS_REF" | tar -x -C "$src" || exit 2
  ln -s "$src/collector/wattbench" "$out/pkgs/wattbench"
  ln -s "$src/firmware/wattbench_fw" "$out/pkgs/wattbench_fw"
  ln -s "$src/schema" "$out/pkgs/wattbench_schema"
  # The tests' shared kit of that commit as well (commits before devkit/ existed keep it under tests/).
  if [ -d "$src/devkit/wattbench_devkit" ]; then
    ln -s "$src/devkit/wattbench_devkit" "$out/pkgs/wattbench_devkit"
  fi
  export PYTHONPATH="$out/pkgs${PYTHONPATH:+:$PYTHONPATH}"
else
  measured="working tree at $(git describe --always --dirty 2>/dev/null || echo 'an unknown commit')"
fi
echo "[faults] measuring the $measured" >&2

start=$(date +%s)
(cd "$src" && python3 -m pytest -p no:cacheprovider tests/faults -rsxX -s --basetemp="$out/tmp" \
  --junitxml="$out/junit.xml" "$@") 2>&1 | tee "$out/pytest.log"
rc=${PIPESTATUS[0]}
elapsed=$(( $(date +%s) - start ))

if [ -s "$WATTBENCH_FAULT_REPORT" ]; then
  python3 "$src/tests/faults/report.py" "$WATTBENCH_FAULT_REPORT" --junit "$out/junit.xml" \
    --out "$root/docs/reliability.md" --elapsed "$elapsed" --measured "$measured" || rc=1
else
  echo "[faults] no figures were recorded; docs/reliability.md left as it was" >&2
  rc=1
fi
echo "[faults] $elapsed s; figures, junit, pytest log and every process log in $out" >&2
exit "$rc"
