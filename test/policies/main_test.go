// Package policies tests kcedar's example policies (policies/): the
// quickstart and the library, each validated against the embedded schema and
// run against its test files. Synthetic policy sets for benchmarks live in
// internal/testing/testgen.
package policies

import (
	"os"
	"testing"
)

// TestMain runs the tests in policies/, where the examples live.
func TestMain(m *testing.M) {
	if err := os.Chdir("../../policies"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
