package promtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// PromtoolPackage is the promtool that tests of Prometheus rules run
// (`promtool test rules`): Prometheus's own, pinned, built through the Go
// module proxy with `go run` on first use (then cached), never in go.mod.
// It is the same Prometheus module version as test/helm's PromQL parser
// (go.mod there). .ci/run builds it in a step of its own.
const PromtoolPackage = "github.com/prometheus/prometheus/cmd/promtool@v0.316.0"

// RequirePromtoolEnv, when set to anything but "", turns the skip of a test
// that cannot build promtool into a failure: .ci/run sets it, so the rules
// are tested there for real.
const RequirePromtoolEnv = "KCEDAR_REQUIRE_PROMTOOL"

// Promtool is a promtool the test can run.
type Promtool struct {
	t       testing.TB
	timeout time.Duration
}

// NewPromtool builds promtool (PromtoolPackage) and returns it. When it
// cannot be built (no Go module proxy and nothing cached, or not before the
// test's deadline; a cold build compiles Prometheus's discovery SDKs for
// minutes) the test is skipped with what to do, or fails if
// RequirePromtoolEnv is set.
func NewPromtool(t testing.TB) *Promtool {
	t.Helper()
	p := &Promtool{t: t, timeout: 10 * time.Minute}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			p.timeout = time.Until(dl) - 30*time.Second
		}
	}
	out, err := p.run(t.TempDir(), "--version")
	if err == nil {
		return p
	}
	msg := "promtool (" + PromtoolPackage + ") cannot be built or run: " + err.Error() + "\n" + out +
		"\nbuild it once with `go run " + PromtoolPackage + " --version` (through the Go module proxy; minutes on a cold cache), then run the test again"
	if os.Getenv(RequirePromtoolEnv) != "" {
		t.Fatalf("%s is set: %s", RequirePromtoolEnv, msg)
	}
	t.Skipf("SKIPPED: %s", msg)
	return nil
}

// Run runs promtool with args in dir and returns its combined output.
func (p *Promtool) Run(dir string, args ...string) (string, error) {
	p.t.Helper()
	return p.run(dir, args...)
}

func (p *Promtool) run(dir string, args ...string) (string, error) {
	if p.timeout <= 0 {
		return "", context.DeadlineExceeded
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", PromtoolPackage}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return strings.TrimSpace(string(out)), err
}
