// Package policies holds kcedar's example policies: the quickstart and the
// library under ./library, each tested (and its examples checked against the
// schema) by this package's tests. Synthetic policy sets for benchmarks live in
// internal/testing/testgen.
package policies
