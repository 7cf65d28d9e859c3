#!/usr/bin/env bash
# Installs redis-sentinel (and redis-server) from Debian packages when missing. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
if command -v redis-sentinel >/dev/null 2>&1; then
  exit 0
fi
echo "redis-sentinel not found; installing it from Debian packages" >&2
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq redis-sentinel >/dev/null
# Debian's package may start a system sentinel on 26379; tests use their own sentinels only.
command -v redis-sentinel >/dev/null
