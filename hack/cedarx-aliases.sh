#!/usr/bin/env bash
# hack/cedarx-aliases.sh: regenerate internal/lib/cedarx, the one adapter through
# which kcedar reaches cedar-go's experimental x/exp packages. Each adapter
# package re-exports its x/exp package's API as aliases under the same package
# name, so the rest of kcedar imports github.com/kcedar/kcedar/internal/lib/cedarx/...
# and a cedar-go upgrade that changes x/exp touches internal/lib/cedarx only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
gen() { # import path below x/exp, package name, adapter dir
  local path=github.com/cedar-policy/cedar-go/x/exp/$1
  mkdir -p "internal/lib/cedarx/$3"
  (cd hack/cedarx-gen && go run . "$root" "$path" "$2") > "internal/lib/cedarx/$3/zz_generated.go"
  gofmt -w "internal/lib/cedarx/$3/zz_generated.go"
}
gen ast ast ast
gen eval eval eval
gen schema schema schema
gen schema/ast ast schema/ast
gen schema/resolved resolved schema/resolved
gen schema/validate validate schema/validate
