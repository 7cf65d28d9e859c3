#!/usr/bin/env bash
# Installs redis-server from Debian packages when it is missing. Idempotent.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server not found; installing it from Debian packages" >&2
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq redis-server >/dev/null
# Debian's package may start a system service on 6379; tests use their own servers only.
command -v redis-server >/dev/null
