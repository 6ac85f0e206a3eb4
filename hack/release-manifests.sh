#!/usr/bin/env bash
# Renders HyperFleet's clusterctl release assets into OUT_DIR (default out/):
#   infrastructure-components.yaml  infrastructure CRDs, RunnerPool, RBAC, the manager
#   bootstrap-components.yaml       bootstrap CRDs and the bootstrap service
#   metadata.yaml, cluster-template*.yaml
# Those files are what a GitHub release (or a local clusterctl repository version folder) holds.
#
#   hack/release-manifests.sh [OUT_DIR]
#
# Environment: RELEASE_TAG (default v0.1.0), IMG (manager image, default
# ghcr.io/hyperfleet-io/hyperfleet:$RELEASE_TAG), BOOTSTRAP_IMG (default
# ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service:$RELEASE_TAG), KUBECTL (default the tools cache's).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/out}
RELEASE_TAG=${RELEASE_TAG:-v0.1.0}
IMG=${IMG:-ghcr.io/hyperfleet-io/hyperfleet:$RELEASE_TAG}
BOOTSTRAP_IMG=${BOOTSTRAP_IMG:-ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service:$RELEASE_TAG}
CACHE=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools}
KUBECTL=${KUBECTL:-$CACHE/k8s/kubectl}
if [ ! -x "$KUBECTL" ]; then
  KUBECTL=$(command -v kubectl || true)
fi
if [ -z "$KUBECTL" ]; then
  echo "kubectl not found: run 'make tools' (its kustomize renders the release)" >&2
  exit 1
fi

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# split_image IMAGE: prints "name tag" (a digest reference keeps its @sha256 part in the name).
split_image() {
  local ref=$1 name tag
  if [[ "$ref" == *@* ]]; then echo "$ref"; return; fi
  name=${ref%:*} tag=${ref##*:}
  if [[ "$name" == "$ref" || "$tag" == */* ]]; then name=$ref tag=latest; fi
  echo "$name $tag"
}

# render OVERLAY IMAGE_NAME IMAGE OUTFILE: builds a throwaway overlay that pins the image, so the
# release never edits files in the repository.
render() {
  local overlay=$1 image_name=$2 image=$3 out=$4 dir=$work/$(basename "$1") name tag
  read -r name tag <<<"$(split_image "$image")"
  mkdir -p "$dir"
  cat >"$dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$dir" "$ROOT/$overlay")
images:
- name: $image_name
  newName: $name
  newTag: ${tag:-latest}
YAML
  # kustomize drops the quotes around "\${VAR:=default}" in ConfigMap data; put them back so a
  # substituted value such as true or 10 stays a string.
  "$KUBECTL" kustomize "$dir" |
    sed -E 's/^(  [A-Z][A-Z0-9_]*: )(\$\{[A-Z0-9_]+:=[^}"]*\})$/\1"\2"/' >"$out.tmp"
  mv "$out.tmp" "$out"
}

render config/release/infrastructure "ghcr.io/hyperfleet-io/hyperfleet" "$IMG" "$OUT/infrastructure-components.yaml"
render config/release/bootstrap "ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service" "$BOOTSTRAP_IMG" "$OUT/bootstrap-components.yaml"
cp "$ROOT/metadata.yaml" "$OUT/metadata.yaml"
cp "$ROOT"/templates/cluster-template*.yaml "$OUT/"
echo "release manifests for $RELEASE_TAG written to $OUT" >&2
