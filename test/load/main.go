// Command load is kcedar's load test: it starts `kcedar serve` over TLS with a
// generated policy set, drives SubjectAccessReviews at it over keep-alive
// connections, and reports throughput, latency percentiles and the server's
// RSS; then it reloads the same server with an empty policy set and measures
// the HTTP/TLS/JSON floor the same way.
//
//	go run ./test/load -kcedar bin/kcedar -policies 1000 -conns 16 -duration 10s
//	go run ./test/load -kcedar bin/kcedar -workload zoo -policies 1000
//	go run ./test/load -kcedar bin/kcedar -workload shapes -policies 10000
//	go run ./test/load -kcedar bin/kcedar -workload zoo -policies 100000 -startup
//	go run ./test/load -kcedar bin/kcedar -workload zoo -policies 100000 -edit
//
// With -startup it measures instead how long `kcedar serve` takes to become
// ready with the policies (written as files of 1,000 policies in a
// directory), its RSS then, and how long `kcedar validate` takes on them.
// With -edit it measures the cost of a change to one policy (edit.go).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

func main() {
	var (
		bin      = flag.String("kcedar", "bin/kcedar", "kcedar binary")
		nPol     = flag.Int("policies", 1000, "RBAC-like policies to load")
		conns    = flag.Int("conns", 16, "concurrent requests: keep-alive connections over HTTP/1.1, streams over HTTP/2")
		duration = flag.Duration("duration", 10*time.Second, "measurement time per phase")
		warmup   = flag.Duration("warmup", 2*time.Second, "warm-up time per phase")
		rounds   = flag.Int("rounds", 3, "alternate the phases this many times and report medians (evens out noise)")
		workload = flag.String("workload", "rbac-like", "the workload: "+workloadHelp())
		startup  = flag.Bool("startup", false, "measure serve start-up (time to ready, RSS) and validate time instead of load")
		list     = flag.Bool("list-workloads", false, "print the workloads' names, one a line (followed by fixed-size when -policies does not apply), and exit")
		bareAddr = flag.String("serve-bare", "", "serve the bare transport server on this address instead (what -bare starts)")
		bareCA   = flag.String("bare-ca", "", "with -serve-bare: write its CA here")
		edit     = flag.Bool("edit", false, "measure the cost of a change instead: serve -policies zoo policies in 8 files with --policy-settle -edit-settle, then add, edit and remove one policy in one file, written each way of -edit-ways; per change, the time from the write to the first decision reflecting it, kcedar's CPU against the full load's, and its RSS")
	)
	flag.Float64Var(&rate, "rate", 0, "pace the load at this many SubjectAccessReviews per second over all connections (0: as fast as the server answers); at a rate both phases sustain, CPU per SAR compares equal offered loads, not a faster floor whose requests share more wake-ups")
	flag.Uint64Var(&platformSeed, "seed", 1, "platform and random: the seed that draws the families (or predicates), their constants and the mix")
	flag.BoolVar(&reloadMode, "reload", false, "measure decision latency through a reload of the same set instead: steady p99 vs the p99 of the 5 s after the new set serves")
	flag.StringVar(&proto, "proto", proto, "h1: HTTP/1.1, a connection per concurrent request; h2: HTTP/2, -conns streams over -h2-conns connections (kube-apiserver's webhook client: one)")
	flag.IntVar(&h2Conns, "h2-conns", h2Conns, "with -proto h2: connections the streams share")
	flag.StringVar(&serveFlags, "serve-flags", "", "more kcedar serve flags for the load phases (space-separated), e.g. --gc-min-headroom=64Mi")
	flag.BoolVar(&withFloor, "floor", true, "measure kcedar with an empty policy set too (its floor)")
	flag.BoolVar(&withBare, "bare", false, "measure the bare transport server too (a stdlib HTTPS server that decodes the fields of the SubjectAccessReview a webhook reads and answers Allow), in a process of its own")
	flag.StringVar(&jsonOut, "json", "", "write the medians to this file as JSON (make bench reads it)")
	flag.BoolVar(&takesConditions, "conditions", false, "send the reviews as kube-apiserver does with conditional authorization on: declaring that the caller handles ConditionsMap and Union, so conditional decisions are evaluated in full and answered with their conditions (without it a conditional decision is folded, and decided folded)")
	flag.Parse()
	if *edit {
		if err := measureEdit(*bin, *nPol); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		return
	}
	if err := dispatch(*bin, *workload, *nPol, *conns, *duration, *warmup, *rounds, *startup, *list, *bareAddr, *bareCA); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// dispatch runs what the flags ask for.
func dispatch(bin, workload string, nPol, conns int, duration, warmup time.Duration, rounds int, startup, list bool, bareAddr, bareCA string) error {
	switch {
	case list:
		for _, name := range workloadNames() {
			if workloads[name].fixedSize {
				name += " fixed-size"
			}
			fmt.Println(name)
		}
		return nil
	case bareAddr != "":
		return serveBare(bareAddr, bareCA)
	case startup:
		return measureStartup(bin, workload, nPol)
	}
	w, ok := workloads[workload]
	if !ok {
		return fmt.Errorf("unknown -workload %q (%s)", workload, strings.Join(workloadNames(), ", "))
	}
	policySet, bodies, err := w.build(nPol)
	if err != nil {
		return err
	}
	if takesConditions {
		if bodies, err = declareConditions(bodies); err != nil {
			return err
		}
	}
	return run(bin, workload, policySet, bodies, conns, duration, warmup, rounds)
}

// workload is a policy set and the SubjectAccessReviews sent against it.
type workload struct {
	about string
	// fixedSize: the set's size does not follow -policies.
	fixedSize bool
	// build makes the set of (about) n policies and the request bodies.
	build func(n int) (policySet string, bodies [][]byte, err error)
}

// workloads are the load test's workloads by name. make bench runs every
// one (-list-workloads): a workload added here is measured there.
var workloads = map[string]workload{
	"rbac-like": {"testgen.RBACLike(-policies) and synthetic requests", false, func(n int) (string, [][]byte, error) {
		return testgen.RBACLike(n), requestBodies(), nil
	}},
	"rbac": {"the converted bootstrap + generated RBAC configuration (internal/tools/rbacconvert) and its generated SubjectAccessReviews; -policies does not apply", true, func(int) (string, [][]byte, error) {
		return rbacWorkload()
	}},
	"zoo": {"the policy-shape zoo (internal/testing/testgen/zoo) of -policies policies and its requests", false, func(n int) (string, [][]byte, error) {
		return zoo.Policies(n, 1), zooBodies(n), nil
	}},
	"team": {"the team-and-namespace shape (testgen.TeamAndNamespace), whose keys hold more satisfied permits as -policies grows", false, func(n int) (string, [][]byte, error) {
		return strings.Join(testgen.TeamAndNamespace(n), "\n"), requestsBodies(testgen.TeamRequests(*distinctRequests)), nil
	}},
	"platform": {"testgen.Platform, the shapes platform teams write (the user's extra, like suffixes and inner wildcards, name sets, containsAny over groups, hasTag) drawn per -seed; without a cluster serve knows no namespace, so the label families are left out", false, func(n int) (string, [][]byte, error) {
		return strings.Join(testgen.Platform(n, platformSeed, true), "\n"), requestsBodies(testgen.PlatformRequests(1000, *distinctRequests, platformSeed, true)), nil
	}},
	"random": {"testgen.RandomPredicates: policies of conjunctions whose paths, predicate kinds and constants are drawn at random (valid, each with a selective predicate, 300 drawn structures with each tenant's constants; the seed family of -seed plus 1<<20, apart from the tests'), and requests of its tenants; without a cluster serve knows no namespace, so no label is drawn", false, func(n int) (string, [][]byte, error) {
		seed, o := randomSeed(), testgen.PredicateOptions{Valid: true, Selective: true, NoLabels: true, Templates: 300}
		return strings.Join(testgen.RandomPredicates(n, seed, o), "\n"), requestsBodies(testgen.PredicateRequests(n, *distinctRequests, seed, o)), nil
	}},
	"fifth": {"testgen.Fifth, the fifth hidden workload's shapes: forbids keyed only on resource.apiGroup like, on principal.name like, on a set of principal.uid, with permits, and its requests (deletes of any type, nodes reading secrets, users' non-resource and impersonation requests)", false, func(n int) (string, [][]byte, error) {
		return strings.Join(testgen.Fifth(n), "\n"), requestsBodies(testgen.FifthRequests(n, *distinctRequests)), nil
	}},
	"shapes": {"other shapes (testgen.OtherShapes: relations, prefixes, a big group, break-glass forbids, username sets, disjunctions), one tenant per 8 policies", false, func(n int) (string, [][]byte, error) {
		return strings.Join(testgen.OtherShapes(n), "\n"), requestsBodies(testgen.OtherShapesRequests(n, *distinctRequests)), nil
	}},
}

// workloadNames are the names of the workloads, sorted.
func workloadNames() []string {
	var names []string
	for name := range workloads {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// workloadHelp describes every workload for -workload's help.
func workloadHelp() string {
	var parts []string
	for _, name := range workloadNames() {
		parts = append(parts, name+": "+workloads[name].about)
	}
	return strings.Join(parts, "; ")
}

type result struct {
	cpuPerReq time.Duration // server CPU (user + system) per request
	requests  int64
	errors    int64
	rps       float64
	p50, p99  time.Duration
	rssKB     int64
	peakRSSKB int64
}

// rbacWorkload is the realistic workload: the bootstrap roles
// and bindings of Kubernetes v1.37.1 plus a generated configuration (50
// roles, 100 bindings), converted to Cedar, and generated SubjectAccessReviews
// (those a kube-apiserver sends: no "*" verb, group, resource or subresource).
func rbacWorkload() (string, [][]byte, error) {
	root, err := framework.ModuleRoot()
	if err != nil {
		return "", nil, err
	}
	in := &rbacconvert.Input{}
	if err := in.ReadPaths([]string{filepath.Join(root, "internal", "tools", "rbacconvert", "testdata", "bootstrap")}); err != nil {
		return "", nil, err
	}
	gen := testgen.RBACConfig(20261121, 50, 100)
	in.Roles = append(in.Roles, gen.Roles...)
	in.ClusterRoles = append(in.ClusterRoles, gen.ClusterRoles...)
	in.RoleBindings = append(in.RoleBindings, gen.RoleBindings...)
	in.ClusterRoleBindings = append(in.ClusterRoleBindings, gen.ClusterRoleBindings...)
	docs, err := schemagen.Default()
	if err != nil {
		return "", nil, err
	}
	s, err := schemagen.Generate(docs)
	if err != nil {
		return "", nil, err
	}
	res, err := rbacconvert.Convert(s, in)
	if err != nil {
		return "", nil, err
	}
	var bodies [][]byte
	for _, spec := range testgen.SubjectAccessReviews(20261121, *distinctRequests) {
		if ra := spec.ResourceAttributes; ra != nil && (ra.Verb == "*" || ra.Group == "*" || ra.Resource == "*" || ra.Subresource == "*") {
			continue
		}
		b, err := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
		if err != nil {
			return "", nil, err
		}
		bodies = append(bodies, b)
	}
	return string(res.Policies), bodies, nil
}

// takesConditions: -conditions.
// distinctRequests is how many distinct reviews a generated workload sends
// (in turn): by default more than kcedar's decision cache holds
// (engine.DefaultCacheSize), so the figures are those of decisions made,
// not remembered.
var distinctRequests = flag.Int("requests", 20000, "distinct SubjectAccessReviews a generated workload draws and sends in turn (rbac-like sends its fixed 256); the default is more than kcedar's decision cache holds")

var takesConditions bool

// declareConditions makes each review declare, as kube-apiserver's webhook
// authorizer does with conditional authorization on, that its caller
// handles ConditionsMap and Union decisions.
func declareConditions(bodies [][]byte) ([][]byte, error) {
	out := make([][]byte, len(bodies))
	for i, b := range bodies {
		var sar map[string]any
		if err := json.Unmarshal(b, &sar); err != nil {
			return nil, err
		}
		spec, _ := sar["spec"].(map[string]any)
		if spec == nil {
			return nil, fmt.Errorf("review %d has no spec", i)
		}
		spec["authorizationOptions"] = map[string]any{"handledDecisionTypes": []string{"Allow", "Deny", "NoOpinion", "ConditionsMap", "Union"}}
		var err error
		if out[i], err = json.Marshal(sar); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// platformSeed: -seed.
var platformSeed uint64

// randomSeed is the random workload's seed: -seed in a family of its own,
// apart from the seeds the tests draw.
func randomSeed() uint64 { return 1<<20 + platformSeed }

// reloadMode: -reload.
var reloadMode bool

// rate: -rate (0: unpaced).
var rate float64

// withFloor, withBare, jsonOut, serveFlags: -floor, -bare, -json,
// -serve-flags.
var (
	withFloor  = true
	withBare   bool
	jsonOut    string
	serveFlags string
)

func run(bin, workload, full string, bodies [][]byte, conns int, duration, warmup time.Duration, rounds int) error {
	nPol := strings.Count(full, "@id(")
	dir, err := os.MkdirTemp("", "kcedar-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The set goes into a directory, in files below kcedar's size limit.
	polDir := filepath.Join(dir, "policies")
	if err := os.Mkdir(polDir, 0o755); err != nil {
		return err
	}
	if err := writePolicies(polDir, full); err != nil {
		return err
	}
	srv, err := startServer(bin, dir, polDir)
	if err != nil {
		return err
	}
	defer stopServer(srv.cmd)
	if reloadMode {
		if err := srv.load(full, fmt.Sprintf("serving %d policies", nPol)); err != nil {
			return err
		}
		fmt.Printf("kcedar reload test: %d connections, %d policies, %s steady (after %s warm-up), then a reload\n", conns, nPol, duration, warmup)
		rs, err := measureReload(srv.pool, srv.base, bodies, conns, duration, warmup, func() error { return writePolicies(polDir, full+reloadMarker) }, func() bool {
			body, _ := get(srv.pool, srv.base+"/readyz")
			return strings.Contains(body, fmt.Sprintf("serving %d policies", nPol+1))
		})
		if err != nil || jsonOut == "" {
			return err
		}
		return writeSummary(jsonOut, summary{Workload: workload, Proto: proto, Conns: conns, Policies: nPol, Reload: rs})
	}
	var bare *server
	if withBare {
		if bare, err = startBare(dir); err != nil {
			return err
		}
		defer stopServer(bare.cmd)
	}
	sum, err := phases(srv, bare, full, nPol, bodies, conns, duration, warmup, rounds)
	if err != nil || jsonOut == "" {
		return err
	}
	sum.Workload, sum.Proto, sum.H2Conns, sum.Conns = workload, proto, h2Conns, conns
	return writeSummary(jsonOut, sum)
}

// server is a running kcedar serve of the load test.
type server struct {
	cmd    *exec.Cmd
	pool   *x509.CertPool
	base   string
	polDir string
}

// startServer starts kcedar serving the policies of polDir (dir holds its
// CA) and waits until it is ready.
func startServer(bin, dir, polDir string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "ca.crt")
	args := []string{"serve", "--listen", addr, "--policies", polDir, "--write-ca", caFile, "--reload-interval", "200ms", "--log-level", "warn", "--allow-empty-policy-set"}
	cmd := exec.Command(bin, append(args, strings.Fields(serveFlags)...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &server{cmd: cmd, base: "https://" + addr, polDir: polDir}
	if err := srv.waitReady(caFile, "ok", 3*time.Minute); err != nil {
		stopServer(cmd)
		return nil, fmt.Errorf("kcedar: %w", err)
	}
	return srv, nil
}

// load writes content as the policy set and waits until /readyz says want.
func (srv *server) load(content string, want string) error {
	if err := writePolicies(srv.polDir, content); err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		body, _ := get(srv.pool, srv.base+"/readyz")
		if strings.Contains(body, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("policy set not loaded (want %q): %s", want, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// phases alternates the full set, the empty one (-floor) and the bare
// server (-bare), rounds times, and reports each and their medians.
func phases(srv, bare *server, full string, nPol int, bodies [][]byte, conns int, duration, warmup time.Duration, rounds int) (summary, error) {
	pid := srv.cmd.Process.Pid
	fmt.Printf("kcedar load test: %s, %d rounds of %s per phase (after %s warm-up), %d policies (floor: %v, bare server: %v)\n",
		protoName(conns), rounds, duration, warmup, nPol, withFloor, bare != nil)
	var fulls, empties, bares []result
	for r := 0; r < rounds; r++ {
		if err := srv.load(full, fmt.Sprintf("serving %d policies", nPol)); err != nil {
			return summary{}, err
		}
		f, err := measure(srv.pool, srv.base, bodies, conns, duration, warmup, pid)
		if err != nil {
			return summary{}, err
		}
		report(fmt.Sprintf("round %d: %d policies", r+1, nPol), f)
		fulls = append(fulls, f)
		if withFloor {
			if err := srv.load("// empty\n", "serving 0 policies"); err != nil {
				return summary{}, err
			}
			e, err := measure(srv.pool, srv.base, bodies, conns, duration, warmup, pid)
			if err != nil {
				return summary{}, err
			}
			report(fmt.Sprintf("round %d: empty (floor)", r+1), e)
			empties = append(empties, e)
		}
		if bare != nil {
			b, err := measure(bare.pool, bare.base, bodies, conns, duration, warmup, bare.cmd.Process.Pid)
			if err != nil {
				return summary{}, err
			}
			report(fmt.Sprintf("round %d: bare server", r+1), b)
			bares = append(bares, b)
		}
	}
	sum := summary{Policies: nPol, Rounds: rounds, Kcedar: median(fulls).export()}
	fmt.Println("medians:")
	report(fmt.Sprintf("%d policies", nPol), median(fulls))
	if withFloor {
		me, mf := median(empties), median(fulls)
		report("empty policy set (floor)", me)
		fmt.Printf("floor/full throughput ratio: %.2f\n", me.rps/mf.rps)
		fmt.Printf("full/floor CPU per SAR:      %.2f (medians; by round, the median of each round's ratio: %.2f)\n", float64(mf.cpuPerReq)/float64(me.cpuPerReq), medianRatio(fulls, empties))
		exp := me.export()
		sum.Floor = &exp
	}
	if bare != nil {
		mb := median(bares)
		report("bare transport server", mb)
		sum.KcedarOverBare = medianRatio(fulls, bares)
		fmt.Printf("kcedar/bare CPU per SAR:     %.2f (the median of each round's ratio; bar: <= 1.20)\n", sum.KcedarOverBare)
		exp := mb.export()
		sum.Bare = &exp
	}
	return sum, nil
}

// medianRatio is the median over rounds of full CPU per SAR over the
// floor's in the same round: phases that ran seconds apart, so that a drift
// of the machine's speed across rounds cancels out.
func medianRatio(fulls, empties []result) float64 {
	ratios := make([]float64, len(fulls))
	for i := range fulls {
		ratios[i] = float64(fulls[i].cpuPerReq) / float64(empties[i].cpuPerReq)
	}
	sort.Float64s(ratios)
	return ratios[len(ratios)/2]
}

// writePolicies replaces the policy files in dir with content, cut into
// files of at most 4 MiB, each written whole (to a temporary name, then
// renamed).
func writePolicies(dir, content string) error {
	old, err := filepath.Glob(filepath.Join(dir, "*.cedar"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for i, part := range zoo.Split(content, 4<<20) {
		name := filepath.Join(dir, fmt.Sprintf("policies-%03d.cedar", i))
		if err := os.WriteFile(name+".tmp", []byte(part), 0o644); err != nil {
			return err
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			return err
		}
	}
	return nil
}

// median takes the median throughput and p99 (and the last RSS) of rounds.
func median(rs []result) result {
	rps := make([]float64, len(rs))
	p50 := make([]time.Duration, len(rs))
	p99 := make([]time.Duration, len(rs))
	cpu := make([]time.Duration, len(rs))
	for i, r := range rs {
		rps[i], p50[i], p99[i], cpu[i] = r.rps, r.p50, r.p99, r.cpuPerReq
	}
	sort.Slice(cpu, func(i, j int) bool { return cpu[i] < cpu[j] })
	sort.Float64s(rps)
	sort.Slice(p50, func(i, j int) bool { return p50[i] < p50[j] })
	sort.Slice(p99, func(i, j int) bool { return p99[i] < p99[j] })
	last := rs[len(rs)-1]
	return result{rps: rps[len(rs)/2], p50: p50[len(rs)/2], p99: p99[len(rs)/2], cpuPerReq: cpu[len(rs)/2], rssKB: last.rssKB, peakRSSKB: last.peakRSSKB}
}

func report(name string, r result) {
	fmt.Printf("%-26s %8.0f SAR/s  p50 %-9s p99 %-9s server CPU/SAR %-8s errors %d  server RSS %d MiB (peak %d MiB)\n",
		name+":", r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.cpuPerReq.Round(100*time.Nanosecond), r.errors, r.rssKB/1024, r.peakRSSKB/1024)
}

func get(pool *x509.CertPool, url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// requestBodies are SubjectAccessReviews of users in teams, over namespaces
// and resources, a mix of hits and misses.
func requestBodies() [][]byte {
	resources := []string{"pods", "configmaps", "secrets", "serviceaccounts", "nodes"}
	verbs := []string{"get", "list", "watch", "create", "delete"}
	var out [][]byte
	for i := 0; i < 256; i++ {
		ra := map[string]any{"verb": verbs[i%len(verbs)], "resource": resources[i%len(resources)], "namespace": fmt.Sprintf("ns-%d", i%60)}
		if i%7 == 0 {
			ra["namespace"] = ""
		}
		sar := map[string]any{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
			"spec": map[string]any{
				"user":               fmt.Sprintf("user-%d", i*3),
				"uid":                fmt.Sprintf("uid-%d", i),
				"groups":             []string{fmt.Sprintf("team-%d", i%200), "system:authenticated"},
				"resourceAttributes": ra,
			},
		}
		b, _ := json.Marshal(sar)
		out = append(out, b)
	}
	return out
}

func measure(pool *x509.CertPool, base string, bodies [][]byte, conns int, duration, warmup time.Duration, pid int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), warmup+duration)
	defer cancel()
	start := time.Now()
	measureFrom := start.Add(warmup)
	var cpu0 time.Duration
	cpuAt := time.AfterFunc(warmup, func() { cpu0 = cpuTime(pid) })
	var lat []time.Duration
	errs := drive(ctx, pool, base, bodies, conns, func(t0, t1 time.Time) {
		if t0.After(measureFrom) {
			lat = append(lat, t1.Sub(t0))
		}
	})
	elapsed := time.Since(measureFrom)
	cpuAt.Stop()
	cpu1 := cpuTime(pid)
	if len(lat) == 0 {
		return result{}, fmt.Errorf("no requests completed")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{requests: int64(len(lat)), errors: errs, rps: float64(len(lat)) / elapsed.Seconds(),
		p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}
	// Requests that ended after the measurement window add a little CPU.
	r.cpuPerReq = (cpu1 - cpu0) / time.Duration(len(lat))
	r.rssKB, r.peakRSSKB = rss(pid)
	return r, nil
}

// drive posts bodies round robin over conns connections until ctx ends,
// calling done (under a lock) with the start and end of each request that
// succeeded; it returns how many failed.
func drive(ctx context.Context, pool *x509.CertPool, base string, bodies [][]byte, conns int, done func(t0, t1 time.Time)) int64 {
	var mu sync.Mutex
	var errs atomic.Int64
	var wg sync.WaitGroup
	cs, closeAll, err := clients(pool, base, conns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return int64(conns)
	}
	defer closeAll()
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			client := cs[c]
			pace := newPacer(conns)
			for i := c; ctx.Err() == nil; i++ {
				pace.wait()
				t0 := time.Now()
				resp, err := client.Post(base+"/v1/authorize", "application/json", bytes.NewReader(bodies[i%len(bodies)]))
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs.Add(1)
					continue
				}
				t1 := time.Now()
				mu.Lock()
				done(t0, t1)
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	return errs.Load()
}

// pacer spaces one connection's requests so that conns connections
// together send rate requests per second; a connection that falls behind
// sends at once, without making up more than one missed slot.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(conns int) *pacer {
	if rate <= 0 {
		return &pacer{}
	}
	interval := time.Duration(float64(conns) / rate * float64(time.Second))
	// Connections start spread over one interval, not all at once.
	return &pacer{interval: interval, next: time.Now().Add(time.Duration(rand.Int64N(int64(interval))))}
}

func (p *pacer) wait() {
	if p.interval == 0 {
		return
	}
	now := time.Now()
	if d := p.next.Sub(now); d > 0 {
		time.Sleep(d)
	} else if -d > p.interval {
		p.next = now
	}
	p.next = p.next.Add(p.interval)
}

func rss(pid int) (cur, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var v int64
		if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &v); n == 1 {
			cur = v
		}
		if n, _ := fmt.Sscanf(line, "VmHWM: %d kB", &v); n == 1 {
			peak = v
		}
	}
	return cur, peak
}

// cpuTime is the user + system CPU time of process pid so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// zooBodies are SubjectAccessReviews of the zoo's requests (kube-apiserver
// never sends a "*" verb, group or resource; the zoo's few are kept).
func zooBodies(n int) [][]byte { return requestsBodies(zoo.Requests(n, *distinctRequests, 2)) }

// requestsBodies renders requests as SubjectAccessReview bodies.
func requestsBodies(reqs []*entities.Request) [][]byte {
	var out [][]byte
	for _, r := range reqs {
		spec := map[string]any{"user": r.User.Name, "groups": r.User.Groups}
		if r.User.UID != "" {
			spec["uid"] = r.User.UID
		}
		if len(r.User.Extra) > 0 {
			spec["extra"] = r.User.Extra
		}
		if r.ResourceRequest {
			spec["resourceAttributes"] = map[string]any{"verb": r.Verb, "group": r.APIGroup, "version": r.APIVersion, "resource": r.Resource,
				"subresource": r.Subresource, "namespace": r.Namespace, "name": r.Name}
		} else {
			spec["nonResourceAttributes"] = map[string]any{"verb": r.Verb, "path": r.Path}
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
		out = append(out, b)
	}
	return out
}

// measureStartup writes the workload's set of n policies as files of 1,000
// policies, starts `kcedar serve` on them and times it to ready (and its
// RSS then), then times `kcedar validate` on the same files.
func measureStartup(bin, workload string, n int) error {
	w, ok := workloads[workload]
	if !ok {
		return fmt.Errorf("unknown -workload %q (%s)", workload, strings.Join(workloadNames(), ", "))
	}
	text, _, err := w.build(n)
	if err != nil {
		return err
	}
	n = strings.Count(text, "@id(")
	dir, err := os.MkdirTemp("", "kcedar-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pdir := filepath.Join(dir, "policies")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		return err
	}
	files := policyFiles(text, 1000)
	for i, chunk := range files {
		if err := os.WriteFile(filepath.Join(pdir, fmt.Sprintf("%s-%03d.cedar", workload, i)), []byte(chunk), 0o644); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "ca.crt")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--policies", pdir, "--write-ca", caFile, "--log-level", "warn")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := fmt.Sprintf("serving %d policies", n)
	for {
		if pem, err := os.ReadFile(caFile); err == nil && len(pem) > 0 {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			if body, err := get(pool, "https://"+addr+"/readyz"); err == nil && strings.Contains(body, want) {
				break
			}
		}
		if time.Since(start) > 120*time.Second {
			return fmt.Errorf("kcedar did not become ready in 120 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ready := time.Since(start)
	cpu := cpuTime(cmd.Process.Pid)
	cur, peak := rss(cmd.Process.Pid)
	fmt.Printf("serve, %d %s policies in %d files: ready after %s (CPU %s), RSS %d MiB (peak %d MiB)\n", n, workload, len(files), ready.Round(10*time.Millisecond), cpu, cur/1024, peak/1024)
	cmd.Process.Kill()
	cmd.Wait()
	t0 := time.Now()
	v := exec.Command(bin, "validate", pdir)
	out, err := v.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kcedar validate: %v\n%s", err, out)
	}
	validate := time.Since(t0)
	fmt.Printf("validate, same files: %s (CPU %s)\n", validate.Round(10*time.Millisecond), (v.ProcessState.UserTime() + v.ProcessState.SystemTime()).Round(10*time.Millisecond))
	if jsonOut == "" {
		return nil
	}
	return writeSummary(jsonOut, summary{Workload: workload, Policies: n, Startup: &startupStats{ReadySeconds: ready.Seconds(), ReadyCPUSeconds: cpu.Seconds(), RSSMiB: cur / 1024, ValidateSeconds: validate.Seconds()}})
}

// policyFiles cuts text into pieces of at most per policies each, at the
// lines where a policy's @id starts.
func policyFiles(text string, per int) []string {
	var out []string
	for {
		at, cut := 0, -1
		for range per {
			i := strings.Index(text[at:], "@id(")
			if i < 0 {
				break
			}
			at += i + len("@id(")
		}
		if i := strings.Index(text[at:], "\n@id("); i >= 0 && at > 0 {
			cut = at + i + 1
		}
		if cut < 0 {
			return append(out, text)
		}
		out, text = append(out, text[:cut]), text[cut:]
	}
}

// stopServer stops kcedar with SIGTERM (so a KCEDAR_CPU_PROFILE is written),
// and kills it if it has not exited within 10 s.
func stopServer(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
