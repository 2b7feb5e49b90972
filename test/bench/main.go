package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// options are the flags.
type options struct {
	kcedar, doc, figures  string
	policies, reloadSizes []int
	workloads, protos     []string
	duration, warmup      time.Duration
	rounds, conns         int
	quick                 bool
}

func main() {
	o := options{}
	var policies, reloadSizes, workloads, protos string
	flag.StringVar(&o.kcedar, "kcedar", "bin/kcedar", "kcedar binary")
	flag.StringVar(&o.doc, "doc", "docs/performance.md", "the document whose generated section the report replaces")
	flag.StringVar(&o.figures, "figures", "docs/performance", "directory of the plots (SVG)")
	flag.BoolVar(&o.quick, "quick", false, "a short run: 1 and 1,000 policies, phases of 1 s after 1 s of warm-up, three rounds (the other flags' defaults change with it)")
	flag.StringVar(&policies, "policies", "", "policy counts, comma-separated (default 1,1000,10000,100000; -quick: 1,1000)")
	flag.StringVar(&reloadSizes, "reload-sizes", "", "set sizes of the reload test (the zoo) and of the start-up and validate test (every workload) (default 1000,10000,100000; -quick: 1000,10000)")
	flag.StringVar(&workloads, "workloads", "", "workloads, comma-separated (default: every one the load test lists)")
	flag.StringVar(&protos, "protos", "h1,h2", "protocols")
	flag.DurationVar(&o.duration, "duration", 0, "measurement per phase (default 8s; -quick: 1s)")
	flag.DurationVar(&o.warmup, "warmup", 0, "warm-up per phase (default 2s; -quick: 1s)")
	flag.IntVar(&o.rounds, "rounds", 0, "rounds per run, each alternating kcedar and the bare server (default 3)")
	flag.IntVar(&o.conns, "conns", 16, "concurrent requests")
	flag.Parse()
	o.policies = ints(or(policies, pick(o.quick, "1,1000", "1,1000,10000,100000")))
	o.reloadSizes = ints(or(reloadSizes, pick(o.quick, "1000,10000", "1000,10000,100000")))
	o.protos = strings.Split(protos, ",")
	o.workloads = split(workloads)
	if o.duration == 0 {
		o.duration = map[bool]time.Duration{true: time.Second, false: 8 * time.Second}[o.quick]
	}
	if o.warmup == 0 {
		o.warmup = map[bool]time.Duration{true: time.Second, false: 2 * time.Second}[o.quick]
	}
	if o.rounds == 0 {
		o.rounds = 3
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run builds the load test, runs every measurement and writes the report.
func run(o options) error {
	started := time.Now()
	tmp, err := os.MkdirTemp("", "kcedar-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	load := filepath.Join(tmp, "load")
	if out, err := exec.Command("go", "build", "-o", load, "./test/load").CombinedOutput(); err != nil {
		return fmt.Errorf("building the load test: %v\n%s", err, out)
	}
	listed, err := listWorkloads(load)
	if err != nil {
		return err
	}
	r := &report{options: o, started: started}
	runner := &runner{load: load, kcedar: o.kcedar, tmp: tmp, report: r}
	for _, st := range plan(o, listed) {
		switch st.kind {
		case loadStep:
			err = runner.loadRun(st.workload, st.policies, st.proto, o)
		case reloadStep:
			err = runner.reloadRun(st.policies, o)
		case startupStep:
			err = runner.startupRun(st.workload, st.policies)
		}
		if err != nil {
			return err
		}
	}
	r.took = time.Since(started)
	return r.write()
}

// stepKind is what a run of the load test measures.
type stepKind int

const (
	loadStep    stepKind = iota // load against kcedar and the bare server
	reloadStep                  // a reload of the zoo under load
	startupStep                 // serve's start-up and validate
)

// step is one run of the load test.
type step struct {
	kind     stepKind
	workload string
	policies int
	proto    string // of a load step
}

// plan lists the report's runs in order: every workload (o.workloads, or
// else every one listed) at every policy count over each protocol; the
// zoo's reload at each set size; then every workload's start-up and
// validate at each set size. A fixed-size workload runs once per kind.
func plan(o options, listed []listedWorkload) []step {
	names := o.workloads
	fixed := map[string]bool{}
	for _, w := range listed {
		fixed[w.name] = w.fixedSize
		if len(o.workloads) == 0 {
			names = append(names, w.name)
		}
	}
	sizes := func(name string, counts []int) []int {
		if fixed[name] && len(counts) > 1 {
			return counts[:1] // its size is its own: one run
		}
		return counts
	}
	var steps []step
	for _, name := range names {
		for _, n := range sizes(name, o.policies) {
			for _, p := range o.protos {
				steps = append(steps, step{kind: loadStep, workload: name, policies: n, proto: p})
			}
		}
	}
	for _, n := range o.reloadSizes {
		steps = append(steps, step{kind: reloadStep, workload: "zoo", policies: n})
	}
	for _, name := range names {
		for _, n := range sizes(name, o.reloadSizes) {
			steps = append(steps, step{kind: startupStep, workload: name, policies: n})
		}
	}
	return steps
}

// listedWorkload is a line of the load test's -list-workloads.
type listedWorkload struct {
	name      string
	fixedSize bool
}

func listWorkloads(load string) ([]listedWorkload, error) {
	out, err := exec.Command(load, "-list-workloads").Output()
	if err != nil {
		return nil, fmt.Errorf("load -list-workloads: %v", err)
	}
	return parseWorkloads(string(out)), nil
}

// parseWorkloads reads -list-workloads' output: a name a line, followed by
// fixed-size when -policies does not apply.
func parseWorkloads(out string) []listedWorkload {
	var ws []listedWorkload
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		ws = append(ws, listedWorkload{name: f[0], fixedSize: len(f) > 1 && f[1] == "fixed-size"})
	}
	return ws
}

// runner runs the load test binary and collects its summaries.
type runner struct {
	load, kcedar, tmp string
	report            *report
	seq               int
}

// exec runs the load test with args plus -json, echoing its output, and
// reads the summary it wrote.
func (rn *runner) exec(args ...string) (summary, error) {
	rn.seq++
	out := filepath.Join(rn.tmp, fmt.Sprintf("run-%d.json", rn.seq))
	args = append([]string{"-kcedar", rn.kcedar}, args...)
	shown := strings.Join(append([]string{"-kcedar", relative(rn.kcedar)}, args[2:]...), " ")
	rn.report.commands = append(rn.report.commands, "go run ./test/load "+shown)
	fmt.Fprintf(os.Stderr, "bench: go run ./test/load %s\n", shown)
	cmd := exec.Command(rn.load, append(args, "-json", out)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	os.Stderr.Write(buf.Bytes())
	if err != nil {
		return summary{}, fmt.Errorf("%s: %v", strings.Join(args, " "), err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return summary{}, err
	}
	var s summary
	return s, json.Unmarshal(b, &s)
}

func (rn *runner) loadRun(workload string, n int, proto string, o options) error {
	s, err := rn.exec("-workload", workload, "-policies", strconv.Itoa(n), "-proto", proto, "-bare", "-floor=false",
		"-conns", strconv.Itoa(o.conns), "-duration", o.duration.String(), "-warmup", o.warmup.String(), "-rounds", strconv.Itoa(o.rounds))
	if err != nil {
		return err
	}
	s.Requested = n
	rn.report.loads = append(rn.report.loads, s)
	return nil
}

// reloadRun measures a reload of the zoo of n policies under load.
func (rn *runner) reloadRun(n int, o options) error {
	s, err := rn.exec("-reload", "-workload", "zoo", "-policies", strconv.Itoa(n), "-conns", strconv.Itoa(o.conns),
		"-duration", o.duration.String(), "-warmup", o.warmup.String())
	if err != nil {
		return err
	}
	rn.report.reloads = append(rn.report.reloads, s)
	return nil
}

// startupRun measures serve's start-up and validate on the workload's set
// of n policies.
func (rn *runner) startupRun(workload string, n int) error {
	s, err := rn.exec("-startup", "-workload", workload, "-policies", strconv.Itoa(n))
	if err != nil {
		return err
	}
	rn.report.startups = append(rn.report.startups, s)
	return nil
}

// relative is path relative to the working directory (the repository's
// root under make), when it lies below it.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func ints(csv string) []int {
	var out []int
	for _, f := range split(csv) {
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %q is not a count\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func split(csv string) []string {
	var out []string
	for _, f := range strings.Split(csv, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func pick(quick bool, short, full string) string {
	if quick {
		return short
	}
	return full
}
