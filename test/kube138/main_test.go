package kube138

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
)

// repoRoot is the repository root (the kcedar module), relative to this
// package's directory, where go test runs the tests.
const repoRoot = "../.."

var kcedarFlag = flag.String("kcedar", "", "the kcedar binary to run `kcedar serve` and `kcedar manifests` with (default: built from the root module into a temporary directory)")

// builtBinary is the kcedar binary built for this run when -kcedar is not
// given, and its temporary directory (removed by TestMain).
var builtBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if builtBinary.dir != "" {
		os.RemoveAll(builtBinary.dir)
	}
	os.Exit(code)
}

// kcedarBinary is the kcedar binary: -kcedar, else built once from the root
// module (in its own directory, so with its own requirements: k8s.io
// v0.37.1, not this module's v0.38.0-beta.0).
func kcedarBinary(t *testing.T) string {
	t.Helper()
	if *kcedarFlag != "" {
		return *kcedarFlag
	}
	builtBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "kube138-kcedar-")
		if err != nil {
			builtBinary.err = err
			return
		}
		builtBinary.dir, builtBinary.path = dir, filepath.Join(dir, "kcedar")
		cmd := exec.Command("go", "build", "-o", builtBinary.path, "./cmd/kcedar")
		cmd.Dir = repoRoot
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		builtBinary.err = cmd.Run()
	})
	if builtBinary.err != nil {
		t.Fatalf("building kcedar in %s: %v", repoRoot, builtBinary.err)
	}
	return builtBinary.path
}

// enableConditionalAuthorization turns the ConditionalAuthorization feature
// gate on for the test, as kube-apiserver --feature-gates would: the webhook
// authorizer, the validation of both answers and the admission plugin read
// it.
func enableConditionalAuthorization(t *testing.T) {
	t.Helper()
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, genericfeatures.ConditionalAuthorization, true)
}
