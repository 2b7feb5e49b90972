#!/usr/bin/env bash
# capture-default.sh [EXTRA_ARGS...]: capture the API schema of a default
# kube-apiserver (the e2e harness's cluster: RBAC, default admission, no
# extra flags) into internal/schemagen/default:
#
#   kcedar schema capture --kubeconfig "$KUBECONFIG" --output-dir internal/schemagen/default EXTRA_ARGS...
#
# The cluster is started and stopped by test/e2e/framework/cmd/with-cluster;
# etcd and kube-apiserver come from hack/kube-binaries.sh (built once, cached).
# Env: OUT (output directory, default internal/schemagen/default), plus those of
# hack/kube-binaries.sh (KUBE_VERSION, ETCD_VERSION, KUBE_E2E_CACHE, ...).
set -Eeuo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-internal/schemagen/default}

bins=$(bash hack/kube-binaries.sh)
eval "$bins"
export ETCD_BIN KUBE_APISERVER_BIN

tmp=$(mktemp -d "${TMPDIR:-/tmp}/capture-default.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Build first: a compile error should not cost a cluster start, and the
# cluster should not idle while kcedar compiles.
go build -o "$tmp/kcedar" ./cmd/kcedar
go build -o "$tmp/with-cluster" ./test/e2e/framework/cmd/with-cluster

echo "capture-default: kcedar schema capture --output-dir $OUT $*" >&2
# shellcheck disable=SC2016 # expanded by the inner bash, once KUBECONFIG is set
"$tmp/with-cluster" -- bash -c 'exec "$0" schema capture --kubeconfig "$KUBECONFIG" --output-dir "$@"' \
  "$tmp/kcedar" "$OUT" "$@"
