#!/usr/bin/env bash
# Installs the real services the test suite runs against, where they are missing.
# Binaries built with `go install` and the npm MicroPython build are cached under
# .services/ (git-ignored) so a second run only checks that they are there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${WATTBENCH_SERVICES:-$root/.services}"
mkdir -p "$cache/bin" "$cache/npm"

INFLUXDB_VERSION=v1.8.10
TELEGRAF_VERSION=v1.37.2
TELEGRAF_TAGS="custom,inputs.mqtt_consumer,inputs.cpu,inputs.mem,inputs.system,inputs.ipmi_sensor,inputs.redfish,outputs.influxdb,outputs.influxdb_v2,parsers.json_v2,parsers.json,parsers.influx"
MPY_WASM_PKG=@micropython/micropython-webassembly-pyscript

log() { printf '[provision] %s\n' "$*" >&2; }
t0=$(date +%s)

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
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  # Debian starts the packaged broker on :1883; tests run their own on free ports.
  $SUDO systemctl disable --now mosquitto >/dev/null 2>&1 || true
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

if [ ! -f "$cache/npm/node_modules/$MPY_WASM_PKG/micropython.mjs" ]; then
  log "npm install $MPY_WASM_PKG"
  (cd "$cache/npm" && [ -f package.json ] || echo '{"name":"wattbench-services","private":true}' > "$cache/npm/package.json"
   cd "$cache/npm" && npm install --silent --no-audit --no-fund "$MPY_WASM_PKG" >/dev/null)
fi

wait $p1
wait $p2
log "services ready in $(( $(date +%s) - t0 )) s under $cache"
