//go:build e2e

package e2e

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// costFloorBar is the most kcedar deciding may cost, in kcedar CPU per
// review, as a multiple of the floor (kcedar serving the empty set).
const costFloorBar = 1.2

// costPolicySets switches the policy set the cost benchmark's kcedar serves
// between the benchmark's policies and the empty set (the floor phase), by
// rewriting its policy file and waiting for /readyz to report the new set.
type costPolicySets struct {
	file    string // the --policies file kcedar polls
	full    []byte // the benchmark's policies, as kcedar started with them
	fullMsg string // what /readyz says while they serve ("serving N policies")
	metrics *kcedarMetrics
	empty   bool // the empty set is serving
}

const costEmptyMsg = "serving 0 policies"

// newCostPolicySets finds kcedar's policy file in its arguments and notes
// what /readyz reports for the set serving now.
func newCostPolicySets(t *testing.T, kcedar *framework.Process, m *kcedarMetrics) *costPolicySets {
	t.Helper()
	i := slices.Index(kcedar.Args, "--policies")
	if i < 0 || i+1 >= len(kcedar.Args) {
		t.Fatalf("no --policies in kcedar's arguments %q", kcedar.Args)
	}
	s := &costPolicySets{file: kcedar.Args[i+1], metrics: m}
	var err error
	if s.full, err = os.ReadFile(s.file); err != nil {
		t.Fatal(err)
	}
	ready := m.readyz(t)
	_, rest, ok := strings.Cut(ready, "serving ")
	n, _, ok2 := strings.Cut(rest, " policies")
	if !ok || !ok2 {
		t.Fatalf("kcedar /readyz does not say how many policies serve: %q", ready)
	}
	s.fullMsg = "serving " + n + " policies"
	return s
}

// serve makes kcedar serve the empty set (empty) or the benchmark's
// policies, and waits until it does.
func (s *costPolicySets) serve(t *testing.T, empty bool) {
	t.Helper()
	if empty == s.empty {
		return
	}
	content, want := s.full, s.fullMsg
	if empty {
		content, want = []byte("// the cost benchmark's floor: no policies\n"), costEmptyMsg
	}
	tmp := filepath.Join(filepath.Dir(s.file), ".policies.tmp")
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.file); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := s.metrics.readyz(t)
		if strings.HasPrefix(got, "ok: "+want+" ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcedar did not load the new policy set (want %q): /readyz says %q", want, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.empty = empty
}

// readyz returns the body of kcedar's /readyz.
func (m *kcedarMetrics) readyz(t *testing.T) string {
	t.Helper()
	resp, err := m.client.Get(strings.TrimSuffix(m.url, "/metrics") + "/readyz")
	if err != nil {
		t.Fatalf("kcedar readyz: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("kcedar readyz: %v", err)
	}
	return string(b)
}

// logCostFloor reports kcedar's own cost in each of its phases against the
// floor phase of the same rounds: kcedar CPU per review (net of its idle
// rate) and throughput, with their ratios to the floor (medians of the
// rounds' ratios), and whether kcedar deciding (phases[0]) meets the bar.
func logCostFloor(t *testing.T, floor *costPhase, phases []*costPhase) {
	t.Helper()
	ratio := func(rs []costResult, f func(costResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r) / f(floor.results[i])
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	kcedarCPU := func(r costResult) float64 { return float64(r.net["kcedar"]) }
	rps := func(r costResult) float64 { return r.rps }
	t.Logf("kcedar's own cost against its floor (the empty set, same traffic, same rounds); ratios are medians of the rounds' ratios:")
	t.Logf("| phase | req/s | kcedar CPU/review | net of idle | vs floor: kcedar CPU/review (net), throughput |")
	t.Logf("|---|---|---|---|---|")
	for _, p := range phases {
		m := costMedian(p.results)
		t.Logf("| %s | %.0f | %d µs | %d µs | %.2fx, %.2fx |", p.name, m.rps, m.cpu["kcedar"].Microseconds(), m.net["kcedar"].Microseconds(),
			ratio(p.results, kcedarCPU), ratio(p.results, rps))
	}
	got := ratio(phases[0].results, kcedarCPU)
	verdict := "met"
	if got > costFloorBar {
		verdict = "NOT met"
	}
	t.Logf("%s vs the floor, kcedar CPU per review: %.2fx (bar: <= %.1fx): %s", phases[0].name, got, costFloorBar, verdict)
}
