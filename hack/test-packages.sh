#!/usr/bin/env bash
# hack/test-packages.sh: the packages of ./... in the order `make test` hands
# them to go test, which builds, runs and prints them in that order (-p at a
# time): the test binaries with the fewest dependencies first, so that on a
# cold cache the first results come after the first few hundred packages
# have compiled, not after all of them, and the long single-threaded tests
# (internal/engine and its diff) run while the client-go half of the
# dependencies still compiles. Then the packages without tests (go test
# only compiles them), and test/docs last: its test builds kcedar with a go
# command of its own, which must find every package already compiled rather
# than compile them a second time alongside go test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
last=github.com/kcedar/kcedar/test/docs
go list -test -f '{{.ImportPath}} {{len .Deps}}' ./... | awk -v last="$last" '
  / \[/ { next }                                                  # a package built for a test
  /\.test / { deps[substr($1, 1, length($1) - 5)] = $2; next }    # a test binary
  { pkgs[++n] = $1 }
  END {
    for (i = 1; i <= n; i++) {
      p = pkgs[i]
      print (p == last ? 1e9 : p in deps ? deps[p] : 1e8), p
    }
  }' | sort -n -s | cut -d' ' -f2
