package deploy

import (
	"os"
	"testing"
)

// TestMain runs the tests in deploy/, where the manifests they render live.
func TestMain(m *testing.M) {
	if err := os.Chdir("../../deploy"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
