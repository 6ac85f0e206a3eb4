#!/usr/bin/env bash
# Builds the in-VM agent as static Linux binaries for amd64 and arm64 into OUT_DIR (default out/),
# with SHA256SUMS: the release assets a BootstrapConfigTemplate's spec.agent.downloadURL and
# spec.agent.sha256 point at when the VM template does not already contain the agent.
#
#   hack/release-agent.sh [OUT_DIR]
#
# Environment: RELEASE_TAG (default v0.1.0), ARCHES (default "amd64 arm64").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/out}
RELEASE_TAG=${RELEASE_TAG:-v0.1.0}
ARCHES=${ARCHES:-amd64 arm64}

mkdir -p "$OUT"
cd "$ROOT"
files=()
for arch in $ARCHES; do
  name=hyperfleet-agent-linux-$arch
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$RELEASE_TAG" -o "$OUT/$name" ./cmd/hyperfleet-agent
  files+=("$name")
done
(cd "$OUT" && sha256sum "${files[@]}" > SHA256SUMS)
echo "agent binaries for ${ARCHES} in $OUT"
