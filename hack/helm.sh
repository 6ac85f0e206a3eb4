#!/usr/bin/env bash
# Builds helm from the Go module proxy into HyperFleet's tools cache so CI can lint and render
# charts/hyperfleet without a separate download. Idempotent and version-pinned: a warm cache
# returns immediately.
#
#   hack/helm.sh [CACHE_DIR]      # installs CACHE_DIR/bin/helm
#
# CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools, the same cache hack/tools.sh uses.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-3.16.4}
HELM_K8S_MINOR=${HELM_K8S_MINOR:-31}

CACHE=${1:-${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools}}
mkdir -p "$CACHE/bin"
CACHE=$(cd "$CACHE" && pwd)
BIN_DIR=$CACHE/bin

log() { echo "[helm $(date +%T)] $*" >&2; }

# Link-time settings helm's own release build makes: its version, and the Kubernetes version
# `helm template` and `helm lint` assume without a cluster (1.20 otherwise, which fails charts
# that declare a kubeVersion). v3.16 is built against Kubernetes 1.31 libraries.
ld="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ld="$ld -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$HELM_K8S_MINOR"
done
stamp=$BIN_DIR/.helm-build

if [ -x "$BIN_DIR/helm" ] && [ "$(cat "$stamp" 2>/dev/null)" == "$ld" ] &&
  [[ "$("$BIN_DIR/helm" version --template '{{.Version}}' 2>/dev/null || true)" == "v$HELM_VERSION" ]]; then
  log "helm v$HELM_VERSION cached"
  exit 0
fi

log "building helm v$HELM_VERSION (first run only, a few minutes)"
CGO_ENABLED=0 GOFLAGS= GOBIN=$BIN_DIR go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
echo "$ld" >"$stamp"
log "installed $BIN_DIR/helm"
