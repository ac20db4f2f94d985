#!/usr/bin/env bash
# Installs the real services the test suite runs against, where they are missing.
# Binaries built with `go install`, the npm MicroPython build, MicroPython's unix port (built from
# ../shared/micropython-1.27.0 where that folder exists) and Home Assistant's venv are cached once
# per machine (~/.cache/wattbench/services; WATTBENCH_SERVICES moves it), so a second run, from this
# clone or any other, only checks that they are there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Cached per machine, not per clone: a fresh clone on a machine that has provisioned before finds
# everything here. Each service is keyed by its pinned version (the markers below), so a changed pin
# rebuilds only that service.
cache="${WATTBENCH_SERVICES:-${XDG_CACHE_HOME:-$HOME/.cache}/wattbench/services}"
mkdir -p "$cache/bin" "$cache/npm"

INFLUXDB_VERSION=v1.8.10
TELEGRAF_VERSION=v1.37.2
TELEGRAF_TAGS="custom,inputs.mqtt_consumer,inputs.cpu,inputs.mem,inputs.system,inputs.ipmi_sensor,inputs.redfish,outputs.influxdb,outputs.influxdb_v2,parsers.json_v2,parsers.json,parsers.influx"
MPY_WASM_PKG=@micropython/micropython-webassembly-pyscript
MPY_WASM_VERSION=1.27.0
# MicroPython's unix port, the firmware's real interpreter with a board-sized fixed heap
# (devkit/wattbench_devkit/unix.py). Its sources are not fetched: they sit beside the clone, unmodified
# (their PROVENANCE.md); a clone without them skips the tests that need it.
MPY_UNIX_VERSION=1.27.0
MPY_UNIX_SRC="${WATTBENCH_MICROPYTHON_SRC:-$root/../shared/micropython-$MPY_UNIX_VERSION}"
# 32-bit like the boards' ports, so objects are the boards' size; no readline, FFI, SSL or btree, which
# need libraries the sources leave out and the firmware does not use.
MPY_UNIX_FLAGS="VARIANT=standard FROZEN_MANIFEST= MICROPY_PY_BTREE=0 MICROPY_PY_SSL=0 MICROPY_PY_FFI=0 MICROPY_USE_READLINE=0 MICROPY_FORCE_32BIT=1"

t0=$(date +%s)
log() { printf '[provision +%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*" >&2; }

need_apt=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_apt+=(mosquitto)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# systemd-analyze verifies the units in deploy/systemd/ (no running systemd is needed).
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
# mosquitto_pub: the shell example of driving a run from your own script (docs/sweep.md) is tested.
command -v mosquitto_pub >/dev/null 2>&1 || need_apt+=(mosquitto-clients)
# Node runs the MicroPython WebAssembly build; Debian's package is recent enough for it.
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
# The power sources people already own, each tested against a real implementation: a BMC over IPMI
# (OpenIPMI's simulator, read with ipmitool) and a Prometheus server that scrapes the collector.
command -v ipmi_sim >/dev/null 2>&1 || need_apt+=(openipmi)
command -v ipmitool >/dev/null 2>&1 || need_apt+=(ipmitool)
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# The ready-made tool workloads (collector/wattbench/workloads/{fio,sysbench,stressng,bonnie}) are tested against real runs.
command -v fio >/dev/null 2>&1 || need_apt+=(fio)
command -v sysbench >/dev/null 2>&1 || need_apt+=(sysbench)
command -v stress-ng >/dev/null 2>&1 || need_apt+=(stress-ng)
command -v bonnie++ >/dev/null 2>&1 || [ -x /usr/sbin/bonnie++ ] || need_apt+=(bonnie++)
# `wattbench compare` pages are checked by rendering them, offline, in headless Chromium.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# Cluster sweeps run through a real Slurm (slurmctld, a slurmd per node name, munge), started by the
# tests from a generated configuration (devkit/wattbench_devkit/slurm.py).
command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || need_apt+=(slurm-wlm)
command -v sbatch >/dev/null 2>&1 || need_apt+=(slurm-client)
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || need_apt+=(munge)
# MLPerf power rehearsals (docs/mlperf-power.md): power-dev checks its clock against an NTP server, which the
# tests start from Debian's chrony on a loopback address (devkit/wattbench_devkit/services.py, Chrony).
command -v chronyd >/dev/null 2>&1 || [ -x /usr/sbin/chronyd ] || need_apt+=(chrony)
# The 32-bit unix port builds with gcc's multilib (the i386 C library and headers).
if [ -f "$MPY_UNIX_SRC/ports/unix/Makefile" ]; then
  command -v make >/dev/null 2>&1 || need_apt+=(make)
  dpkg -s gcc-multilib >/dev/null 2>&1 || need_apt+=(gcc-multilib)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  # Debian starts the packaged broker on :1883; tests run their own on free ports.
  $SUDO systemctl disable --now mosquitto >/dev/null 2>&1 || true
  # Likewise the packaged Prometheus (and its node exporter) on :9090/:9100.
  $SUDO systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
  # And the packaged Slurm and munge daemons: tests run their own from a generated configuration.
  $SUDO systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1 || true
  # And the packaged chrony, which would otherwise own UDP port 123 and steer the clock.
  $SUDO systemctl disable --now chrony >/dev/null 2>&1 || true
fi

build_go() {  # name, marker, module@version, [tags]
  local name=$1 marker=$2 mod=$3 tags=${4:-}
  if [ -x "$cache/bin/$name" ] && [ -f "$cache/bin/.$marker" ]; then return 0; fi
  log "go install $mod (first run only)"
  local args=()
  [ -n "$tags" ] && args+=(-tags "$tags")
  GOBIN="$cache/bin" GOFLAGS="${GOFLAGS:-} -mod=mod" go install "${args[@]}" "$mod"
  touch "$cache/bin/.$marker"
}

build_go influxd "influxd-$INFLUXDB_VERSION" "github.com/influxdata/influxdb/cmd/influxd@$INFLUXDB_VERSION" &
p1=$!
build_go telegraf "telegraf-$TELEGRAF_VERSION" "github.com/influxdata/telegraf/cmd/telegraf@$TELEGRAF_VERSION" "$TELEGRAF_TAGS" &
p2=$!

mpy_wasm_marker="$cache/npm/.micropython-webassembly-$MPY_WASM_VERSION"
if [ ! -f "$cache/npm/node_modules/$MPY_WASM_PKG/micropython.mjs" ] || [ ! -f "$mpy_wasm_marker" ]; then
  log "npm install $MPY_WASM_PKG@$MPY_WASM_VERSION"
  rm -f "$cache/npm"/.micropython-webassembly-*
  (cd "$cache/npm" && [ -f package.json ] || echo '{"name":"wattbench-services","private":true}' > "$cache/npm/package.json"
   cd "$cache/npm" && npm install --silent --no-audit --no-fund --save-exact "$MPY_WASM_PKG@$MPY_WASM_VERSION" >/dev/null)
  touch "$mpy_wasm_marker"
fi

# The build writes only into its BUILD directory in the cache: the sources stay untouched (in CI they
# have no write bits). The marker holds the version and the flags, so a change of either rebuilds.
mpy_unix_dir="$cache/micropython-$MPY_UNIX_VERSION-unix"
mpy_unix_marker="$mpy_unix_dir/.built-32bit"
mpy_unix_want="$MPY_UNIX_VERSION $MPY_UNIX_FLAGS"
p3=""
if [ ! -f "$MPY_UNIX_SRC/ports/unix/Makefile" ]; then
  log "MicroPython $MPY_UNIX_VERSION unix port skipped: no sources at $MPY_UNIX_SRC (its tests skip)"
elif [ -x "$mpy_unix_dir/micropython" ] && [ "$(cat "$mpy_unix_marker" 2>/dev/null)" = "$mpy_unix_want" ]; then
  :
else
  log "MicroPython $MPY_UNIX_VERSION unix port, 32-bit, from $MPY_UNIX_SRC (first run only)"
  (
    rm -rf "$mpy_unix_dir" && mkdir -p "$mpy_unix_dir"
    # shellcheck disable=SC2086 # the flags are words on purpose
    make -s -j"$(nproc)" -C "$MPY_UNIX_SRC/ports/unix" BUILD="$mpy_unix_dir/build" $MPY_UNIX_FLAGS \
      >"$mpy_unix_dir/build.log" 2>&1 || { log "MicroPython unix port build failed: see $mpy_unix_dir/build.log"; exit 1; }
    cp "$mpy_unix_dir/build/micropython" "$mpy_unix_dir/micropython"
    rm -rf "$mpy_unix_dir/build"
    printf '%s' "$mpy_unix_want" > "$mpy_unix_marker"
  ) &
  p3=$!
fi

# Home Assistant core for the real-HA integration test (tests/ecosystem/test_hass_real.py), in its own
# venv: 2025.4.4 is the newest release that installs on Python 3.13.0. The pins are the requirements
# of the MQTT integration and of the integrations Home Assistant always sets up (frontend, recorder,
# backup, network, hardware, person's image upload, isal), so the test can start it with --skip-pip
# and nothing is fetched while tests run. A missing interpreter or a failed install is reported, not
# fatal: the other services are still provisioned, and the test says what is missing (a failure in
# CI, a skip elsewhere).
HASS_VERSION=2025.4.4
HASS_PYTHON="${WATTBENCH_HASS_PYTHON:-${PYENV_ROOT:-$HOME/.pyenv}/versions/3.13.0/bin/python3.13}"
HASS_PINS=(
  "homeassistant==$HASS_VERSION" paho-mqtt==2.1.0 home-assistant-frontend==20250411.0 Pillow==11.1.0
  SQLAlchemy==2.0.39 fnv-hash-fast==1.4.0 cronsim==2.6 securetar==2025.2.1 ifaddr==0.2.0 isal==1.7.1
  psutil-home-assistant==0.0.1
)
hass_venv="$cache/hass-venv"
hass_marker="$hass_venv/.wattbench-hass-$HASS_VERSION"
if [ -f "$hass_marker" ] && [ -x "$hass_venv/bin/hass" ]; then
  :
elif [ ! -x "$HASS_PYTHON" ]; then
  log "Home Assistant skipped: Python 3.13.0 not found at $HASS_PYTHON (pyenv install 3.13.0, or set WATTBENCH_HASS_PYTHON)"
else
  log "Home Assistant $HASS_VERSION into $hass_venv (first run only; several minutes)"
  t_hass=$(date +%s)
  rm -rf "$hass_venv"
  # The marker is written last, so an interrupted or failed install is redone on the next run.
  if "$HASS_PYTHON" -m venv "$hass_venv" \
    && "$hass_venv/bin/pip" install -q --disable-pip-version-check "${HASS_PINS[@]}" >"$cache/hass-install.log" 2>&1; then
    touch "$hass_marker"
    log "Home Assistant installed in $(( $(date +%s) - t_hass )) s"
  else
    log "Home Assistant install failed after $(( $(date +%s) - t_hass )) s: see $cache/hass-install.log"
  fi
fi

wait $p1
wait $p2
[ -z "$p3" ] || wait $p3
log "services ready in $(( $(date +%s) - t0 )) s under $cache"
