package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	for _, want := range []string{"| zoo | 1000 | HTTP/1.1 | 66.0 µs | 56.0 µs | 1.18 |", "performance/bench-cpu-zoo.svg", "go run ./test/load -workload zoo"} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	for _, svg := range []string{"bench-cpu-zoo.svg", "bench-latency-zoo.svg"} {
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
