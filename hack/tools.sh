#!/usr/bin/env bash
# Builds HyperFleet's test and development toolchain from the Go module proxy alone:
# envtest's etcd, kube-apiserver and kubectl, the Cluster API core manager and clusterctl,
# controller-gen and staticcheck. Idempotent: a warm cache returns in about a second.
#
#   hack/tools.sh [CACHE_DIR]      # prints `export KUBEBUILDER_ASSETS=...` on success
#
# Layout of CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools):
#   k8s/{etcd,kube-apiserver,kubectl}      -> KUBEBUILDER_ASSETS
#   capi/{capi-manager,clusterctl,crds/,webhook/}
#   bin/controller-gen, bin/staticcheck
#   node/{kubelet,kube-controller-manager,kube-scheduler,kube-proxy}   (NODE=1 or `hack/tools.sh --node`)
#   capi/{kcp-manager,config/,kcp-config/,metadata.yaml}, cert-manager/{controller,webhook,cainjector,chart/}   (likewise)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.34.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
CAPI_VERSION=${CAPI_VERSION:-1.12.5}
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-0.19.0}
STATICCHECK_VERSION=${STATICCHECK_VERSION:-0.8.2}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-1.11.5}

NODE=${NODE:-0}
if [ "${1:-}" = --node ]; then NODE=1; shift; fi
CACHE=${1:-${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
K8S_DIR=$CACHE/k8s CAPI_DIR=$CACHE/capi BIN_DIR=$CACHE/bin BUILD=$CACHE/build NODE_DIR=$CACHE/node
mkdir -p "$K8S_DIR" "$CAPI_DIR" "$BIN_DIR" "$BUILD"
# One build at a time: a second make waits for the first instead of building over it.
exec 9>"$BUILD/.lock"
flock 9
export CGO_ENABLED=0 CLUSTERCTL_DISABLE_VERSIONCHECK=true GOFLAGS=-mod=mod

log() { echo "[tools $(date +%T)] $*" >&2; }
# version_is BIN WANT ARGS...: true when BIN runs and prints WANT.
version_is() { [ -x "$1" ] || return 1; local out; out=$("$1" "${@:3}" 2>/dev/null) || true; [[ "$out" == *"$2"* ]]; }

# etcd: its go.mod has replace directives, so build it as a dependency of a throwaway module.
if version_is "$K8S_DIR/etcd" "$ETCD_VERSION" --version; then
  log "etcd $ETCD_VERSION cached"
else
  log "building etcd $ETCD_VERSION (first run only)"
  d=$BUILD/etcd; mkdir -p "$d"; rm -f "$d/go.mod" "$d/go.sum"
  printf 'module local/etcdbuild\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" >"$d/go.mod"
  (cd "$d" && go build -trimpath -ldflags "-s -w" -o "$K8S_DIR/etcd" go.etcd.io/etcd/server/v3)
fi

# kube-apiserver and kubectl: k8s.io/kubernetes replaces its staging modules with local paths,
# so a dependent module must point each one at its published v0.X.Y tag instead.
if version_is "$K8S_DIR/kube-apiserver" "v$K8S_VERSION" --version && version_is "$K8S_DIR/kubectl" "v$K8S_VERSION" version --client; then
  log "kube-apiserver/kubectl v$K8S_VERSION cached"
else
  log "building kube-apiserver and kubectl v$K8S_VERSION (first run only, several minutes)"
  d=$BUILD/k8s; mkdir -p "$d"; rm -f "$d/go.mod" "$d/go.sum"
  kmod=$(cd "$d" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  {
    printf 'module local/k8sbuild\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    awk -v v="v0.${K8S_VERSION#1.}" '$2=="=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " " v}' "$kmod"
    printf ')\n'
  } >"$d/go.mod"
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    # Without these /version reports v0.0.0-master and version checks misbehave.
    ld="$ld -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  (cd "$d" && go build -trimpath -ldflags "$ld" -o "$K8S_DIR/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  (cd "$d" && go build -trimpath -ldflags "$ld" -o "$K8S_DIR/kubectl" k8s.io/kubernetes/cmd/kubectl)
fi

# The rest of a node (test/node): kubelet, kube-controller-manager, kube-scheduler and kube-proxy,
# in one `go build` of the same throwaway module so they share its build cache.
node_bins="kubelet kube-controller-manager kube-scheduler kube-proxy"
node_cached() { for b in $node_bins; do version_is "$NODE_DIR/$b" "v$K8S_VERSION" --version || return 1; done; }
if [ "$NODE" = 1 ]; then
  if node_cached; then
    log "node binaries v$K8S_VERSION cached"
  else
    log "building kubelet, kube-controller-manager, kube-scheduler and kube-proxy v$K8S_VERSION (first run only, 15-25 minutes on 2 cores)"
    d=$BUILD/k8s; minor=$(echo "$K8S_VERSION" | cut -d. -f2); ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    mkdir -p "$NODE_DIR.tmp"
    pkgs=(); for b in $node_bins; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    (cd "$d" && go build -trimpath -ldflags "$ld" -o "$NODE_DIR.tmp/" "${pkgs[@]}")
    mkdir -p "$NODE_DIR"; for b in $node_bins; do mv -f "$NODE_DIR.tmp/$b" "$NODE_DIR/$b"; done; rmdir "$NODE_DIR.tmp"
  fi
fi

# Cluster API core manager and clusterctl.
# Link-time version of every Cluster API binary built here, as its release stamps it.
capi_ld="-s -w"
for kv in gitVersion=v$CAPI_VERSION gitMajor=1 gitMinor=$(echo "$CAPI_VERSION" | cut -d. -f2) gitTreeState=clean; do
  capi_ld="$capi_ld -X sigs.k8s.io/cluster-api/version.$kv"
done
if version_is "$CAPI_DIR/clusterctl" "v$CAPI_VERSION" version && [ -x "$CAPI_DIR/capi-manager" ]; then
  log "Cluster API v$CAPI_VERSION cached"
else
  log "building Cluster API v$CAPI_VERSION manager and clusterctl (first run only)"
  GOFLAGS= GOBIN=$BUILD/capi-gobin go install -trimpath -ldflags "$capi_ld" "sigs.k8s.io/cluster-api@v$CAPI_VERSION"
  GOFLAGS= GOBIN=$BUILD/capi-gobin go install -trimpath -ldflags "$capi_ld" "sigs.k8s.io/cluster-api/cmd/clusterctl@v$CAPI_VERSION"
  install -m 0755 "$BUILD/capi-gobin/cluster-api" "$CAPI_DIR/capi-manager"
  install -m 0755 "$BUILD/capi-gobin/clusterctl" "$CAPI_DIR/clusterctl"
fi
src=$(GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/cluster-api@v$CAPI_VERSION
[ -d "$src" ] || (cd "$BUILD" && GOFLAGS= go mod download "sigs.k8s.io/cluster-api@v$CAPI_VERSION")
rm -rf "$CAPI_DIR/crds" "$CAPI_DIR/webhook"; mkdir -p "$CAPI_DIR/crds" "$CAPI_DIR/webhook"
cp "$src"/config/crd/bases/*.yaml "$CAPI_DIR/crds/"
cp "$src"/config/webhook/manifests.yaml "$CAPI_DIR/webhook/"
chmod -R u+w "$CAPI_DIR/crds" "$CAPI_DIR/webhook"

# What `clusterctl init` installs besides HyperFleet, for the installed tests (test/installed) on the
# node: Cluster API's core and kubeadm control-plane kustomizations (config/), the kubeadm
# control-plane manager, and cert-manager, which clusterctl requires. cert-manager v1.11.5 is the
# last release whose controller, webhook and cainjector commands live in its root module (later
# ones keep them in sub-modules the module proxy does not serve); its go.mod has a replace
# directive, so it is built inside its own module.
if [ "$NODE" = 1 ]; then
  rm -rf "$CAPI_DIR/config" "$CAPI_DIR/kcp-config"
  cp -r "$src/config" "$CAPI_DIR/config"
  cp -r "$src/controlplane/kubeadm/config" "$CAPI_DIR/kcp-config"
  chmod -R u+w "$CAPI_DIR/config" "$CAPI_DIR/kcp-config"
  cp "$src/metadata.yaml" "$CAPI_DIR/metadata.yaml"; chmod u+w "$CAPI_DIR/metadata.yaml"
  if [ -x "$CAPI_DIR/kcp-manager" ] && [ "$(cat "$CAPI_DIR/.kcp-version" 2>/dev/null)" = "v$CAPI_VERSION" ]; then
    log "Cluster API v$CAPI_VERSION kubeadm control-plane manager cached"
  else
    log "building Cluster API v$CAPI_VERSION kubeadm control-plane manager (first run only)"
    GOFLAGS= GOBIN=$BUILD/capi-gobin go install -trimpath -ldflags "$capi_ld" "sigs.k8s.io/cluster-api/controlplane/kubeadm@v$CAPI_VERSION"
    install -m 0755 "$BUILD/capi-gobin/kubeadm" "$CAPI_DIR/kcp-manager"
    echo "v$CAPI_VERSION" >"$CAPI_DIR/.kcp-version"
  fi

  CM_DIR=$CACHE/cert-manager
  cm_src=$(GOFLAGS= go env GOMODCACHE)/github.com/cert-manager/cert-manager@v$CERT_MANAGER_VERSION
  [ -d "$cm_src" ] || (cd "$BUILD" && GOFLAGS= go mod download "github.com/cert-manager/cert-manager@v$CERT_MANAGER_VERSION")
  if [ "$(cat "$CM_DIR/.version" 2>/dev/null)" = "v$CERT_MANAGER_VERSION" ]; then
    log "cert-manager v$CERT_MANAGER_VERSION cached"
  else
    log "building cert-manager v$CERT_MANAGER_VERSION controller, webhook and cainjector (first run only, about 5 minutes)"
    rm -rf "$CM_DIR"; mkdir -p "$CM_DIR.tmp"
    ld="-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=v$CERT_MANAGER_VERSION"
    (cd "$cm_src" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ld" -o "$CM_DIR.tmp/" ./cmd/controller ./cmd/webhook ./cmd/cainjector)
    # The chart, with Chart.yaml as cert-manager's release makes it from Chart.template.yaml and the
    # CRDs as templates behind installCRDs, as its static cert-manager.yaml is rendered.
    cp -r "$cm_src/deploy/charts/cert-manager" "$CM_DIR.tmp/chart"; chmod -R u+w "$CM_DIR.tmp/chart"
    sed -e "s/^version: .*/version: v$CERT_MANAGER_VERSION/" -e "s/^appVersion: .*/appVersion: v$CERT_MANAGER_VERSION/" \
      -e 's/{{IS_PRERELEASE}}/false/' "$CM_DIR.tmp/chart/Chart.template.yaml" >"$CM_DIR.tmp/chart/Chart.yaml"
    rm -f "$CM_DIR.tmp/chart/Chart.template.yaml" "$CM_DIR.tmp/chart/README.template.md"
    { echo '{{- if .Values.installCRDs }}'; for f in "$cm_src"/deploy/crds/crd-*.yaml; do echo '---'; cat "$f"; done; echo '{{- end }}'; } \
      >"$CM_DIR.tmp/chart/templates/crds.yaml"
    echo "v$CERT_MANAGER_VERSION" >"$CM_DIR.tmp/.version"
    mv "$CM_DIR.tmp" "$CM_DIR"
  fi
fi

# controller-gen for deepcopy, CRDs and RBAC.
if version_is "$BIN_DIR/controller-gen" "v$CONTROLLER_GEN_VERSION" --version; then
  log "controller-gen v$CONTROLLER_GEN_VERSION cached"
else
  log "installing controller-gen v$CONTROLLER_GEN_VERSION"
  GOFLAGS= GOBIN=$BIN_DIR go install "sigs.k8s.io/controller-tools/cmd/controller-gen@v$CONTROLLER_GEN_VERSION"
fi

# staticcheck for `make lint`.
if version_is "$BIN_DIR/staticcheck" "($STATICCHECK_VERSION)" -version; then
  log "staticcheck v$STATICCHECK_VERSION cached"
else
  log "installing staticcheck v$STATICCHECK_VERSION"
  GOFLAGS= GOBIN=$BIN_DIR go install "honnef.co/go/tools/cmd/staticcheck@v$STATICCHECK_VERSION"
fi

echo "export KUBEBUILDER_ASSETS=$K8S_DIR"
