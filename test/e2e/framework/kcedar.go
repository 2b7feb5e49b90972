package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	kcedarOnce sync.Once
	kcedarPath string
	kcedarErr  error
)

// KcedarBinary returns the kcedar binary under test: $KCEDAR_BIN if set, else
// ./cmd/kcedar built once per test binary (go build, from the module root
// that `go env GOMOD` names) into a temporary directory. When the test binary
// runs under the race detector, kcedar is built with -race too, and
// StartProcess fails the test if kcedar reports a data race.
func KcedarBinary(t testing.TB) string {
	t.Helper()
	kcedarOnce.Do(func() { kcedarPath, kcedarErr = buildKcedar() })
	if kcedarErr != nil {
		t.Fatalf("kcedar binary: %v", kcedarErr)
	}
	return kcedarPath
}

// RaceEnabled reports whether the test binary (and so the kcedar binary
// KcedarBinary builds) runs under the race detector: benchmarks skip then.
func RaceEnabled() bool { return raceEnabled }

const binDirPrefix = "kcedar-e2e-bin-"

// ModuleRoot is the directory of the go.mod that `go env GOMOD` names.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the kcedar module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

func buildKcedar() (string, error) {
	if p := os.Getenv("KCEDAR_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("KCEDAR_BIN: %w", err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	sweepStaleBinDirs()
	dir, err := os.MkdirTemp("", binDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kcedar")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/kcedar/kcedar/cmd/kcedar")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// sweepStaleBinDirs removes the kcedar build directories of test binaries
// that are gone (nothing runs when a test binary exits, so each one leaves
// its directory behind).
func sweepStaleBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), binDirPrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}
