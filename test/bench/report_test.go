package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestWriteReplacesOnlyTheGeneratedSection: the report lands between the
// markers, what is outside them is kept byte for byte, and the plots it
// links are written and parse as XML.
func TestWriteReplacesOnlyTheGeneratedSection(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "performance.md")
	before, after := "# Performance\n\nhand-written\n\n", "\n\n## Other measurements\n\nkept\n"
	old := before + beginMarker + "\nthe previous report\n" + endMarker + after
	if err := os.WriteFile(doc, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &report{options: options{doc: doc, figures: filepath.Join(dir, "performance"), conns: 16, rounds: 1}}
	r.loads = []summary{
		{Workload: "zoo", Proto: "h1", Policies: 1, Kcedar: stats{CPUPerRequestMicros: 60, P50Micros: 900, P99Micros: 4000}, Bare: &stats{CPUPerRequestMicros: 55}, Ratio: 1.09},
		{Workload: "zoo", Proto: "h1", Policies: 1000, Kcedar: stats{CPUPerRequestMicros: 66, P50Micros: 950, P99Micros: 4100}, Bare: &stats{CPUPerRequestMicros: 56}, Ratio: 1.18},
	}
	r.reloads = []summary{reloadSummary(1000, 0.33), reloadSummary(10000, 0.38)}
	r.startups = []summary{
		startupSummary("zoo", 1000, 0.68, 0.33), startupSummary("zoo", 10000, 1.22, 0.63),
		startupSummary("fifth", 1000, 0.70, 0.40), startupSummary("fifth", 10000, 2.10, 1.30),
		startupSummary("rbac", 1693, 0.90, 0.50),
	}
	r.commands = []string{"go run ./test/load -workload zoo"}
	if err := r.write(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, before+beginMarker) || !strings.HasSuffix(got, endMarker+after) || strings.Contains(got, "the previous report") {
		t.Fatalf("the document around the generated section changed:\n%s", got)
	}
	for _, want := range []string{
		"| zoo | 1000 | HTTP/1.1 | 66.0 µs | 56.0 µs | 1.18 |", "performance/bench-cpu-zoo.svg", "go run ./test/load -workload zoo",
		"| 10000 | 0.38 s |", "performance/bench-reload.svg",
		// validate / policy, and over the 9,000 added policies: 0.30 s is 33.3 µs each, 0.90 s is 100 µs each.
		"| zoo | 1000 | 0.68 s | 0.50 s | 86 MiB | 0.33 s | 330 µs | – |", "| zoo | 10000 | 1.22 s | 0.50 s | 86 MiB | 0.63 s | 63 µs | 33 µs |",
		"| fifth | 1000 | 0.70 s |", "| fifth | 10000 | 2.10 s | 0.50 s | 86 MiB | 1.30 s | 130 µs | 100 µs |",
		"| rbac | 1693 | 0.90 s | 0.50 s | 86 MiB | 0.50 s | 295 µs | – |",
		"performance/bench-startup.svg", "performance/bench-validate.svg",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	for _, svg := range []string{"bench-cpu-zoo.svg", "bench-latency-zoo.svg", "bench-reload.svg", "bench-startup.svg", "bench-validate.svg"} {
		f, err := os.Open(filepath.Join(dir, "performance", svg))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(f)
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", svg, err)
			}
		}
		f.Close()
	}
	// Without markers the document is left alone and the run fails.
	if err := os.WriteFile(doc, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.write(); err == nil {
		t.Error("a document without markers was accepted")
	}
}

func reloadSummary(n int, seconds float64) summary {
	s := summary{Workload: "zoo", Policies: n}
	s.Reload = &struct {
		SteadyP99Micros     float64 `json:"steadyP99Micros"`
		RebuildP99Micros    float64 `json:"rebuildP99Micros"`
		AfterP99Micros      float64 `json:"afterP99Micros"`
		ServingAfterSeconds float64 `json:"servingAfterSeconds"`
	}{5400, 7300, 5700, seconds}
	return s
}

func startupSummary(workload string, n int, ready, validate float64) summary {
	s := summary{Workload: workload, Policies: n}
	s.Startup = &struct {
		ReadySeconds    float64 `json:"readySeconds"`
		ReadyCPUSeconds float64 `json:"readyCPUSeconds"`
		RSSMiB          int64   `json:"rssMiB"`
		ValidateSeconds float64 `json:"validateSeconds"`
	}{ready, 0.5, 86, validate}
	return s
}

// TestPlanMeasuresEveryListedWorkload: with no -workloads, every workload
// the load test lists is load-tested at every policy count over each
// protocol, and started and validated at every set size; a fixed-size one
// once per protocol and once started; the zoo is reloaded at each size.
func TestPlanMeasuresEveryListedWorkload(t *testing.T) {
	listed := parseWorkloads("fifth\nplatform\nrandom\nrbac fixed-size\nrbac-like\nshapes\nteam\nzoo\n")
	if len(listed) != 8 || !listed[3].fixedSize || listed[4].fixedSize {
		t.Fatalf("parsed %+v", listed)
	}
	o := options{policies: []int{1, 1000, 10000, 100000}, reloadSizes: []int{1000, 10000, 100000}, protos: []string{"h1", "h2"}}
	got := map[step]int{}
	for _, st := range plan(o, listed) {
		got[st]++
	}
	want := map[step]int{}
	for _, w := range listed {
		counts, sizes := o.policies, o.reloadSizes
		if w.fixedSize {
			counts, sizes = counts[:1], sizes[:1]
		}
		for _, n := range counts {
			for _, p := range o.protos {
				want[step{kind: loadStep, workload: w.name, policies: n, proto: p}] = 1
			}
		}
		for _, n := range sizes {
			want[step{kind: startupStep, workload: w.name, policies: n}] = 1
		}
	}
	for _, n := range o.reloadSizes {
		want[step{kind: reloadStep, workload: "zoo", policies: n}] = 1
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan:\n got %v\nwant %v", got, want)
	}
	// -workloads narrows both the load and the start-up runs.
	o.workloads = []string{"random"}
	for _, st := range plan(o, listed) {
		if st.kind != reloadStep && st.workload != "random" {
			t.Errorf("with -workloads random the plan runs %+v", st)
		}
	}
}

// TestSVGPlotPlacesPoints: on the log axis, 10 policies sit halfway
// between 1 and 100, and a larger y is drawn higher.
func TestSVGPlotPlacesPoints(t *testing.T) {
	svg := svgPlot("t", "x", "y", []series{{name: "s", points: []point{{1, 10}, {10, 20}, {100, 40}}}})
	var xs, ys []string
	for _, line := range strings.Split(svg, "\n") {
		if strings.HasPrefix(line, "<circle") {
			f := strings.Fields(line)
			xs = append(xs, strings.Trim(strings.TrimPrefix(f[1], "cx="), `"`))
			ys = append(ys, strings.Trim(strings.TrimPrefix(f[2], "cy="), `"`))
		}
	}
	if len(xs) != 3 {
		t.Fatalf("%d points drawn:\n%s", len(xs), svg)
	}
	x0, x1, x2 := atof(t, xs[0]), atof(t, xs[1]), atof(t, xs[2])
	if d := (x1 - x0) - (x2 - x1); d > 0.2 || d < -0.2 || x0 >= x1 {
		t.Errorf("x positions %v: 10 is not halfway between 1 and 100 on a log axis", xs)
	}
	if !(atof(t, ys[0]) > atof(t, ys[1]) && atof(t, ys[1]) > atof(t, ys[2])) {
		t.Errorf("y positions %v: larger values are not drawn higher", ys)
	}
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
