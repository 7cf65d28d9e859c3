#!/usr/bin/env bash
# Usage: scripts/fetch-server.sh NAME
# Fetches a server version from Debian trixie's packages once, into a cache that survives between
# runs, and prints the directory holding its redis-server, redis-sentinel and redis-cli
# (wrappers). NAME is
#   redis-8.0   Debian trixie's Redis 8.0.x   (the binary is in redis-tools)
#   valkey-8.1  Debian trixie's Valkey 8.1.x  (the binary is in valkey-tools)
# Nothing is installed system-wide and nothing is built: `apt-get download` with a private sources
# list, lists and cache directory fetches the server's package and the libraries it needs, `dpkg -x`
# unpacks them, and the wrappers run the binary through the unpacked loader with the unpacked
# libraries. The binary picks its mode from its name, which the wrappers give it (--argv0).
#
# Cache: ${RLOCK_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlock/servers}/NAME. Once it holds a
# complete install it is used as is (no network); delete the directory to fetch again. Fails with
# a message, and leaves no partial install behind, if anything is missing.
set -euo pipefail

name=${1:-}
case "$name" in
redis-8.0)
  pkg=redis-tools
  prefix=redis
  want='^8\.0\.'
  ;;
valkey-8.1)
  pkg=valkey-tools
  prefix=valkey
  want='^8\.1\.'
  ;;
*)
  echo "usage: $0 redis-8.0|valkey-8.1" >&2
  exit 2
  ;;
esac

die() {
  echo "fetch-server $name: $*" >&2
  exit 1
}

cache=${RLOCK_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlock/servers}
dest="$cache/$name"
if [ -f "$dest/ok" ] && [ -x "$dest/bin/redis-server" ] && [ -x "$dest/bin/redis-sentinel" ] &&
  [ -x "$dest/bin/redis-cli" ]; then
  echo "$dest/bin"
  exit 0
fi

for tool in apt-get dpkg; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (a Debian-based machine is needed)"
done
[ "$(dpkg --print-architecture)" = amd64 ] || die "only amd64 is supported"

# The Debian mirror this machine uses (deb.debian.org unless its sources say otherwise), and
# trixie's suite on it, signed by the archive keyring.
mirror=$(
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' ' || true
)
mirror=${mirror%/}
mirror=${mirror:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring not found (package debian-archive-keyring)"

mkdir -p "$cache"
work=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
echo "deb [signed-by=$keyring] $mirror trixie main" >"$work/sources.list"
apt_opts=(
  -o "Dir::Etc::sourcelist=$work/sources.list"
  -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache"
  -o "Dir::State::status=/dev/null"
  -o "Acquire::Languages=none"
  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
)
# apt fetches as the unprivileged _apt user when run as root; that user cannot write here.
if [ "$(id -u)" = 0 ]; then apt_opts+=(-o "APT::Sandbox::User=root"); fi

echo "fetch-server $name: fetching $pkg and its libraries from $mirror trixie" >&2
apt-get "${apt_opts[@]}" -qq update >"$work/apt.log" 2>&1 || {
  cat "$work/apt.log" >&2
  die "apt-get update for trixie failed"
}
# The server's package and what it needs to run: its libraries and theirs (the closure below
# is checked with the loader after unpacking).
libs=(libc6 libssl3t64 libjemalloc2 liblzf1 libsystemd0 libstdc++6 libatomic1 libgcc-s1 libcap2
  libzstd1 zlib1g)
(cd "$work/debs" && apt-get "${apt_opts[@]}" -qq download "$pkg" "${libs[@]}") >"$work/apt.log" 2>&1 || {
  cat "$work/apt.log" >&2
  die "apt-get download failed"
}
for deb in "$work"/debs/*.deb; do
  dpkg -x "$deb" "$work/root" || die "dpkg -x $deb failed"
done

root="$dest/root" # where the files will be once moved into place
loader="usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
libpath="usr/lib/x86_64-linux-gnu:lib/x86_64-linux-gnu"
bin="usr/bin/$prefix-check-rdb" # the server binary (the server package only links to it)
[ -x "$work/root/$loader" ] || die "no loader at $loader in the unpacked packages"
[ -x "$work/root/$bin" ] || die "no $bin in $pkg"
[ -x "$work/root/usr/bin/$prefix-cli" ] || die "no usr/bin/$prefix-cli in $pkg"

# Every library the server and the CLI need resolves inside the unpacked tree.
for b in "$bin" "usr/bin/$prefix-cli"; do
  out=$("$work/root/$loader" --library-path "$work/root/${libpath//:/:$work/root/}" --list "$work/root/$b") ||
    die "the loader cannot load $b: $out"
  if grep -q 'not found' <<<"$out"; then
    die "$b needs libraries that were not fetched: $(grep 'not found' <<<"$out" | tr '\n' ' ')"
  fi
done

mkdir -p "$work/bin"
# wrapper NAME BINARY: a script named NAME that runs BINARY as NAME through the unpacked loader.
wrapper() {
  cat >"$work/bin/$1" <<EOF
#!/bin/sh
# $1 of $name, run through its own loader and libraries (made by scripts/fetch-server.sh).
exec "$root/$loader" --library-path "$root/${libpath//:/:$root/}" --argv0 "$1" "$root/$2" "\$@"
EOF
  chmod +x "$work/bin/$1"
}
wrapper redis-server "$bin"
wrapper redis-cli "usr/bin/$prefix-cli"
wrapper redis-sentinel "$bin"
if [ "$prefix" != redis ]; then
  wrapper "$prefix-server" "$bin"
  wrapper "$prefix-cli" "usr/bin/$prefix-cli"
fi

# Move into place (replacing a partial install), then check the version it reports.
rm -rf "$dest"
mkdir -p "$dest"
mv "$work/root" "$work/bin" "$dest/"
version=$("$dest/bin/redis-server" --version) || {
  rm -rf "$dest"
  die "the fetched server does not run"
}
v=$(sed -n 's/.* v=\([^ ]*\).*/\1/p' <<<"$version")
if ! grep -qE "$want" <<<"$v"; then
  rm -rf "$dest"
  die "expected version $want, got: $version"
fi
echo "$version" >"$dest/ok"
echo "fetch-server $name: $version" >&2
echo "$dest/bin"
