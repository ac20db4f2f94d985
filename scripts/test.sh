#!/usr/bin/env bash
# The whole test suite on a fresh machine: provision the real services, install the package with its
# test extras and the development kit the tests share with bench/ (devkit/), run pytest. Extra
# arguments go to pytest (e.g. scripts/test.sh -k contract).
#
# Tests run in parallel, WATTBENCH_TEST_WORKERS of them at once (default 4 on two cores: most tests
# wait on services and timed windows, see docs/testing.md). `scripts/test.sh -n 0` runs serially, for
# debugging; any -n of your own replaces the default.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

start=$(date +%s)
bash scripts/provision.sh || { echo "provisioning failed" >&2; exit 1; }
echo "[test] services provisioned in $(( $(date +%s) - start )) s" >&2

python3 -m pip install -q --disable-pip-version-check -e ".[test,grafana]" -e ./devkit 2>&1 | grep -v "Running pip as the 'root' user" >&2
if [ "${PIPESTATUS[0]}" -ne 0 ]; then echo "pip install failed" >&2; exit 1; fi

parallel=(-n "${WATTBENCH_TEST_WORKERS:-4}")
for arg in "$@"; do
  case "$arg" in -n|-n*|--numprocesses|--numprocesses=*|--dist|--dist=*) parallel=() ;; esac
done
python3 -m pytest -p no:cacheprovider --durations=30 "${parallel[@]}" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  # pytest's "no tests collected": a selection that matched nothing is not a failure of the code.
  echo "[test] pytest collected no tests for this selection" >&2
  exit 0
fi
exit "$rc"
