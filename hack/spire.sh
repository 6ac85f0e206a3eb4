#!/usr/bin/env bash
# Builds spire-server and spire-agent from the Go module proxy for HyperFleet's SPIRE identity
# provider tests. Idempotent: when both binaries already report the pinned version it returns at once.
#
#   hack/spire.sh [CACHE_DIR]      # prints `export SPIRE_BIN_DIR=...` on success
#
# The version is stamped as SPIRE's own release build does (without the v): the sqlite datastore
# parses it as semver at start-up.
#
# Layout of CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools):
#   spire/{spire-server,spire-agent}
#
# `go install github.com/spiffe/spire/cmd/...@version` is refused (SPIRE's go.mod has replace
# directives), so the module is downloaded and built in a writable copy of itself. The sqlite
# datastore needs cgo, hence a C compiler. A cold build takes about 13 minutes on two cores.
set -euo pipefail

SPIRE_VERSION=${SPIRE_VERSION:-1.13.0}

CACHE=${1:-${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
SPIRE_DIR=$CACHE/spire BUILD=$CACHE/build/spire
mkdir -p "$SPIRE_DIR" "$BUILD"
# One build at a time: a second make (another terminal, a parallel test run) waits for the first
# instead of building over the same directory.
exec 9>"$BUILD/.lock"
flock 9

log() { echo "[spire $(date +%T)] $*" >&2; }
# version_is BIN WANT: true when BIN runs and prints exactly WANT (SPIRE prints it on stderr).
version_is() { [ -x "$1" ] || return 1; local out; out=$("$1" --version 2>&1) || return 1; [[ "$(echo "$out" | tr -d '[:space:]')" == "$2" ]]; }

if version_is "$SPIRE_DIR/spire-server" "$SPIRE_VERSION" && version_is "$SPIRE_DIR/spire-agent" "$SPIRE_VERSION"; then
  log "spire-server/spire-agent $SPIRE_VERSION cached"
  echo "export SPIRE_BIN_DIR=$SPIRE_DIR"
  exit 0
fi

command -v gcc >/dev/null || command -v cc >/dev/null || { log "a C compiler (gcc) is required: SPIRE's sqlite datastore uses cgo"; exit 1; }

log "downloading github.com/spiffe/spire@v$SPIRE_VERSION"
src=$(cd "$BUILD" && GOFLAGS= go mod download -json "github.com/spiffe/spire@v$SPIRE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
[ -d "$src" ] || { log "module download failed"; exit 1; }

d=$BUILD/src
rm -rf "$d"
cp -R "$src" "$d"
chmod -R u+w "$d"

ld="-s -w -X github.com/spiffe/spire/pkg/common/version.gittag=$SPIRE_VERSION"
start=$(date +%s)
for cmd in spire-server spire-agent; do
  log "building $cmd v$SPIRE_VERSION (first run only, about 13 minutes for both on two cores)"
  (cd "$d" && CGO_ENABLED=1 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$SPIRE_DIR/$cmd.tmp" "./cmd/$cmd")
  mv "$SPIRE_DIR/$cmd.tmp" "$SPIRE_DIR/$cmd"
  log "$cmd built ($(( $(date +%s) - start ))s so far)"
done
rm -rf "$d"

for cmd in spire-server spire-agent; do
  version_is "$SPIRE_DIR/$cmd" "$SPIRE_VERSION" || { log "$cmd does not report version $SPIRE_VERSION"; "$SPIRE_DIR/$cmd" --version || true; exit 1; }
done
log "spire-server/spire-agent $SPIRE_VERSION ready in $SPIRE_DIR ($(( $(date +%s) - start ))s)"
echo "export SPIRE_BIN_DIR=$SPIRE_DIR"
