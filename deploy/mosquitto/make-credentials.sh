#!/usr/bin/env bash
# Create or extend a Mosquitto password file for wattbench clients.
#   make-credentials.sh FILE NAME [NAME ...]
# For each NAME (a device id, or wattbench-collector / wattbench-sweep / wattbench-telegraf /
# homeassistant) a random password is generated, added to FILE (hashed by mosquitto_passwd) and written
# to NAME.secret beside FILE with mode 600, for the device config or the host's environment.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PASSWORD_FILE NAME [NAME ...]" >&2; exit 2; }
file=$1; shift
dir=$(dirname "$file")
umask 077
[ -f "$file" ] || : > "$file"
for name in "$@"; do
  if ! [[ $name =~ ^[a-z0-9][a-z0-9_-]{0,31}$ ]]; then
    echo "refusing $name: names follow the device id pattern ^[a-z0-9][a-z0-9_-]{0,31}\$" >&2; exit 2
  fi
  secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 32)
  mosquitto_passwd -b "$file" "$name" "$secret"
  printf '%s\n' "$secret" > "$dir/$name.secret"
  echo "added $name (secret in $dir/$name.secret)"
done
