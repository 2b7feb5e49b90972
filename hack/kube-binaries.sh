#!/usr/bin/env bash
# kube-binaries.sh: build (once) and cache the etcd, kube-apiserver and kubectl
# binaries that the e2e harness (test/e2e/framework) runs, then print where they are:
#
#   ETCD_BIN=/root/.cache/kube-e2e/etcd/v3.7.3/etcd
#   KUBE_APISERVER_BIN=/root/.cache/kube-e2e/kube-apiserver/v1.37.1/kube-apiserver
#   KUBECTL_BIN=/root/.cache/kube-e2e/kubectl/v1.37.1/kubectl
#
#   bins=$(hack/kube-binaries.sh) && eval "$bins" && export ETCD_BIN KUBE_APISERVER_BIN KUBECTL_BIN
#   hack/kube-binaries.sh --export     # prints `export VAR=...` lines instead
#
# Both are built from the Go module proxy with nothing but the Go toolchain:
# etcd from go.etcd.io/etcd/server/v3, kube-apiserver and kubectl from a wrapper
# module that requires k8s.io/kubernetes and maps its v0.0.0 staging modules to
# the matching published v0.X.Y releases. Nothing is rebuilt when a binary is
# already cached; stdout then carries only the three lines and stderr stays quiet. Concurrent runs
# are serialised with flock(1), and a build already running in the cache
# directory (e.g. one started by another tool) is waited for, not duplicated.
#
# Env: KUBE_VERSION (v1.37.1), ETCD_VERSION (v3.7.3),
#      KUBE_E2E_CACHE (${XDG_CACHE_HOME:-$HOME/.cache}/kube-e2e),
#      ETCD_BIN / KUBE_APISERVER_BIN / KUBECTL_BIN (use these binaries, build nothing).
# Layout: $KUBE_E2E_CACHE/etcd/$ETCD_VERSION/etcd
#         $KUBE_E2E_CACHE/kube-apiserver/$KUBE_VERSION/kube-apiserver
#         $KUBE_E2E_CACHE/kubectl/$KUBE_VERSION/kubectl
# Uncached cost: etcd ~1 min; kube-apiserver ~5-8 min on 2 cores, ~2.5 GB RAM,
# ~3 GB of GOCACHE and ~1 GB of module downloads; kubectl 836 s measured on 2
# cores shared with other builds (kube-apiserver already cached).
set -Eeuo pipefail
shopt -s inherit_errexit

KUBE_VERSION=${KUBE_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
CACHE=${KUBE_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-e2e}
PREFIX=""
case ${1:-} in
  "") ;;
  --export) PREFIX="export " ;;
  -h | --help) sed -n '2,/^set -E/{/^set -E/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) echo "kube-binaries: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac

log() { echo "kube-binaries: $*" >&2; }
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { log "no go toolchain in PATH"; exit 1; }

# The builds must not inherit the caller's module/workspace/cgo settings (a
# GOFLAGS=-race from the environment would break a CGO_ENABLED=0 build).
go_() { env GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 go "$@"; }

# builders_in DIR: PIDs of processes whose working directory is DIR/src, i.e.
# a build of this binary in progress (ours or another tool's, e.g. kube-up.sh).
builders_in() {
  local p
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/cwd" 2>/dev/null) == "$1/src" ]] && echo "${p#/proc/}"
  done
  return 0
}

# cached NAME DIR BUILDFN: print DIR/NAME, building it with BUILDFN if missing.
cached() {
  local name=$1 dir=$2 build=$3 waited=0
  if [[ -x $dir/$name ]]; then echo "$dir/$name"; return; fi
  mkdir -p "$dir"
  exec {lock}>"$dir/.lock"
  if command -v flock >/dev/null && ! flock -n "$lock"; then
    log "another kube-binaries.sh is building $name in $dir; waiting"
    flock "$lock"
  fi
  while [[ ! -x $dir/$name && -n $(builders_in "$dir") ]]; do
    ((waited % 60 == 0)) && log "a build of $name is already running in $dir/src (pid $(builders_in "$dir" | xargs)); waiting"
    sleep 5; waited=$((waited + 5))
  done
  if [[ ! -x $dir/$name ]]; then
    rm -f "$dir/$name".tmp* # left over by an interrupted build
    local start=$SECONDS
    "$build" "$dir" "$dir/$name.tmp.$$"
    mv -f "$dir/$name.tmp.$$" "$dir/$name"
    log "built $dir/$name in $((SECONDS - start)) s"
  fi
  exec {lock}>&-
  echo "$dir/$name"
}

build_etcd() { # build_etcd DIR OUT
  log "building etcd $ETCD_VERSION into $1 (one-off, ~1 min)"
  mkdir -p "$1/src"
  printf 'module kubee2e/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$ETCD_VERSION" >"$1/src/go.mod"
  (cd "$1/src" && go_ build -trimpath -ldflags='-s -w' -o "$2" go.etcd.io/etcd/server/v3) >&2
}

# wrapper_module DIR: write DIR/src/go.mod, a module requiring k8s.io/kubernetes
# at $KUBE_VERSION with its v0.0.0 staging modules mapped to their published
# v0.X.Y releases (k8s.io/kubernetes replaces them with ./staging/...).
wrapper_module() {
  mkdir -p "$1/src"
  local kmod staging=v0.${KUBE_VERSION#v1.}
  rm -f "$1/src/go.mod" "$1/src/go.sum"
  kmod=$(cd "$1/src" && go_ mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
    sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [[ -f $kmod ]] || { log "could not download k8s.io/kubernetes@$KUBE_VERSION"; return 1; }
  {
    printf 'module kubee2e/apiserver\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KUBE_VERSION"
    awk -v v="$staging" '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print "\t" $1 " => " $1 " " v}' "$kmod"
    echo ')'
  } >"$1/src/go.mod"
}

# kube_ldflags: the version ldflags of a Kubernetes binary at $KUBE_VERSION.
kube_ldflags() {
  local ver=${KUBE_VERSION#v} pkg=k8s.io/component-base/version
  local ld="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=${ver%%.*}"
  ld+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$ver") -X $pkg.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  echo "$ld"
}

build_apiserver() { # build_apiserver DIR OUT
  log "building kube-apiserver $KUBE_VERSION into $1 (one-off: ~5-8 min on 2 cores, ~2.5 GB RAM, ~3 GB GOCACHE)"
  wrapper_module "$1"
  (cd "$1/src" && go_ build -trimpath -ldflags="$(kube_ldflags)" -o "$2" k8s.io/kubernetes/cmd/kube-apiserver) >&2
}

build_kubectl() { # build_kubectl DIR OUT
  log "building kubectl $KUBE_VERSION into $1 (one-off: up to ~14 min on 2 busy cores)"
  wrapper_module "$1"
  (cd "$1/src" && go_ build -trimpath -ldflags="$(kube_ldflags)" -o "$2" k8s.io/kubernetes/cmd/kubectl) >&2
}

given() { # given VAR: the binary named by $VAR, which must be executable
  [[ -x ${!1} && ! -d ${!1} ]] || { log "$1=${!1} is not an executable file"; return 1; }
  echo "${!1}"
}

if [[ -n ${ETCD_BIN:-} ]]; then ETCD=$(given ETCD_BIN); else ETCD=$(cached etcd "$CACHE/etcd/$ETCD_VERSION" build_etcd); fi
if [[ -n ${KUBE_APISERVER_BIN:-} ]]; then APISERVER=$(given KUBE_APISERVER_BIN); else
  APISERVER=$(cached kube-apiserver "$CACHE/kube-apiserver/$KUBE_VERSION" build_apiserver)
fi
if [[ -n ${KUBECTL_BIN:-} ]]; then KUBECTL=$(given KUBECTL_BIN); else
  KUBECTL=$(cached kubectl "$CACHE/kubectl/$KUBE_VERSION" build_kubectl)
fi
printf '%sETCD_BIN=%q\n%sKUBE_APISERVER_BIN=%q\n%sKUBECTL_BIN=%q\n' "$PREFIX" "$ETCD" "$PREFIX" "$APISERVER" "$PREFIX" "$KUBECTL"
