//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// The cost benchmark's workload: costUsers users read pods and configmaps
// (get and list) in costNamespaces namespaces holding costObjects of each.
const (
	costNamespaces = 4
	costUsers      = 8
	costObjects    = 10
)

// costSettings are the knobs of TestAPIServerCost, from the environment.
type costSettings struct {
	rounds, conns, policies int
	duration, warmup        time.Duration
}

func costSettingsFromEnv(t *testing.T) costSettings {
	t.Helper()
	s := costSettings{rounds: 7, conns: 16, policies: 1000, duration: 8 * time.Second, warmup: 2 * time.Second}
	for name, p := range map[string]*int{"KCEDAR_E2E_COST_ROUNDS": &s.rounds, "KCEDAR_E2E_COST_CONCURRENCY": &s.conns, "KCEDAR_E2E_COST_POLICIES": &s.policies} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	for name, p := range map[string]*time.Duration{"KCEDAR_E2E_COST_DURATION": &s.duration, "KCEDAR_E2E_COST_WARMUP": &s.warmup} {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || (d == 0 && p == &s.duration) {
				t.Fatalf("%s=%q: want a duration such as 8s", name, v)
			}
			*p = d
		}
	}
	return s
}

// costAsked reports whether TestAPIServerCost was asked for: KCEDAR_E2E_COST
// is set, or -run names it.
func costAsked() bool {
	if os.Getenv("KCEDAR_E2E_COST") != "" {
		return true
	}
	f := flag.Lookup("test.run")
	return f != nil && strings.Contains(f.Value.String(), "APIServerCost")
}

// costPolicies is the zoo of n policies plus one policy per benchmark user
// (written the way the zoo writes them: the user pinned in a condition,
// several types through `is` disjunctions, a namespace list) that allows
// exactly the benchmark's requests.
func costPolicies(n int) string {
	var b strings.Builder
	b.WriteString(zoo.Policies(n, 1))
	var nss []string
	for i := range costNamespaces {
		nss = append(nss, strconv.Quote(costNamespace(i)))
	}
	for u := range costUsers {
		fmt.Fprintf(&b, "@id(\"bench-user-%d\")\npermit (principal is k8s::User, action in [k8s::Action::\"get\", k8s::Action::\"list\"], resource)\n"+
			"when { principal.username == %q && (resource is core::pods || resource is core::configmaps) && [%s].contains(resource.namespace) };\n\n",
			u, costUser("bench", u), strings.Join(nss, ", "))
	}
	return b.String()
}

func costNamespace(i int) string          { return fmt.Sprintf("bench-%d", i) }
func costUser(kind string, i int) string  { return fmt.Sprintf("%s-user-%d", kind, i) }
func costToken(kind string, i int) string { return fmt.Sprintf("%s-token-%d", kind, i) }

// TestAPIServerCost measures what kcedar adds to the kube-apiserver's own
// request latency and throughput. Two clusters run side by side on the
// machine: one with --authorization-mode=RBAC, one with kcedar (1,000 zoo
// policies plus the benchmark users' policies) before RBAC in an
// AuthorizationConfiguration whose webhook decision cache is off, so every
// request costs a SubjectAccessReview. The same users (token auth, through
// client-go) send the same get/list requests on pods and configmaps: granted
// by RoleBindings in the RBAC cluster, allowed by kcedar's policies in the
// other (where no RoleBinding grants them, so success proves kcedar
// decided). A third phase sends the same requests in the kcedar cluster as
// users kcedar has no opinion on and RBAC allows. A fourth, the floor,
// sends them again while kcedar serves the empty policy set (it answers
// NoOpinion at once, RBAC allows): what kcedar costs per review with no
// policy to look at, HTTP/2, TLS and JSON included. The phases alternate
// over several rounds (A/B/C/D, B/C/D/A, ..., to spread machine noise over
// all of them) and medians are reported; every request must succeed, and kcedar's
// decision counters must have grown by at least the requests of its phases.
// The bar: kcedar deciding costs at most 1.2x the floor in kcedar CPU per
// review.
//
// It is a benchmark: skipped unless KCEDAR_E2E_COST is set or -run names it
// (`make e2e-cost`), and under the race detector. Knobs:
// KCEDAR_E2E_COST_ROUNDS (7), _DURATION (8s per phase), _WARMUP (2s),
// _CONCURRENCY (16 client goroutines), _POLICIES (1000 zoo policies).
func TestAPIServerCost(t *testing.T) {
	if !costAsked() {
		t.Skip("benchmark: run with KCEDAR_E2E_COST=1 or -run TestAPIServerCost (make e2e-cost)")
	}
	if framework.RaceEnabled() {
		t.Skip("benchmark: the race detector would measure itself; run without -race (make e2e-cost)")
	}
	cfg := costSettingsFromEnv(t)

	var tokens []framework.Token
	for u := range costUsers {
		for _, kind := range []string{"bench", "rbac"} {
			tokens = append(tokens, framework.Token{Token: costToken(kind, u), User: costUser(kind, u)})
		}
	}
	tokens = append(tokens, framework.Token{Token: "nobody-token", User: "nobody"})

	policies := costPolicies(cfg.policies)
	// kcedar serve's default reload interval, not the other tests' 200 ms:
	// kcedar polls its policy file as often as in a deployment.
	// --allow-empty-policy-set: the floor phase serves the empty set.
	kcedar, kopts := startKcedarWebhook(t, policies, "--reload-interval", "2s", "--allow-empty-policy-set")
	kopts.Tokens = tokens
	metrics := newKcedarMetrics(t, kopts)
	sets := newCostPolicySets(t, kcedar, metrics)
	rbacCluster := framework.Start(t, framework.Options{Tokens: tokens})
	kcedarCluster := framework.Start(t, kopts)

	setupCostCluster(t, rbacCluster, true)
	setupCostCluster(t, kcedarCluster, false)
	checkCostAuthorization(t, rbacCluster, kcedarCluster)

	phases := []*costPhase{
		{name: "RBAC alone", cluster: rbacCluster, kind: "bench"},
		{name: "kcedar decides", cluster: kcedarCluster, kind: "bench", kcedarDecision: "Allow"},
		{name: "kcedar NoOpinion, RBAC decides", cluster: kcedarCluster, kind: "rbac", kcedarDecision: "NoOpinion"},
		{name: "floor: empty set, RBAC decides", cluster: kcedarCluster, kind: "rbac", kcedarDecision: "NoOpinion", emptySet: true},
	}
	// Every phase reads the CPU time of all five server processes: its own
	// (by role) and the idle ones, whose idle rate is then subtracted.
	procs := map[string]int{
		"RBAC cluster apiserver": rbacCluster.APIServerPid(), "RBAC cluster etcd": rbacCluster.EtcdPid(),
		"kcedar cluster apiserver": kcedarCluster.APIServerPid(), "kcedar cluster etcd": kcedarCluster.EtcdPid(),
		"kcedar": kcedar.Pid(),
	}
	for _, p := range phases {
		for u := range costUsers {
			p.clients = append(p.clients, p.cluster.ClientFor(t, costToken(p.kind, u)))
		}
		p.procs = procs
		if p.kcedarDecision == "" {
			p.own = map[string]string{"apiserver": "RBAC cluster apiserver", "etcd": "RBAC cluster etcd"}
		} else {
			p.own = map[string]string{"apiserver": "kcedar cluster apiserver", "etcd": "kcedar cluster etcd", "kcedar": "kcedar"}
		}
	}
	t.Logf("cost benchmark: %d policies (%d zoo + %d benchmark users'), %d client goroutines, %d rounds of %v per phase after %v warm-up",
		strings.Count(policies, "@id("), cfg.policies, costUsers, cfg.conns, cfg.rounds, cfg.duration, cfg.warmup)
	for r := range cfg.rounds {
		// Each round starts one phase later than the last, so that no phase
		// is always the one measured first, or right after a reload.
		for i := range phases {
			p := phases[(r+i)%len(phases)]
			if p.kcedarDecision != "" {
				sets.serve(t, p.emptySet)
			}
			before := metrics.decisions(t)
			res, err := p.run(t.Context(), cfg)
			if err != nil {
				t.Fatalf("round %d, %s: %v", r+1, p.name, err)
			}
			after := metrics.decisions(t)
			checkKcedarDecided(t, p, res, before, after)
			p.results = append(p.results, res)
			t.Logf("round %d: %-32s %s", r+1, p.name+":", res)
		}
	}

	// A process's idle rate is its median CPU rate over the phases that
	// did not load it. Net CPU per request subtracts it.
	idle := map[string]float64{} // CPU seconds per second
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		var rates []float64
		for _, p := range phases {
			if slices.Contains(slices.Collect(maps.Values(p.own)), name) {
				continue
			}
			for _, r := range p.results {
				rates = append(rates, r.raw[name].Seconds()/r.elapsed.Seconds())
			}
		}
		slices.Sort(rates)
		idle[name] = rates[len(rates)/2]
		t.Logf("idle CPU of %s: %.1f%% of a core", name, 100*idle[name])
	}
	for _, p := range phases {
		for i := range p.results {
			p.results[i].subtractIdle(p.own, idle)
		}
	}

	// Ratios are taken within each round (the phases of a round ran
	// seconds apart, under about the same machine load), then their median.
	base := phases[0].results
	ratio := func(rs []costResult, f func(costResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r) / f(base[i])
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	t.Logf("medians of %d rounds (%d client goroutines, %v per phase); ratios to RBAC alone are medians of the rounds' ratios:", cfg.rounds, cfg.conns, cfg.duration)
	t.Logf("| phase | req/s | p50 | p99 | server CPU/req | net of idle: apiserver + etcd + kcedar | vs RBAC alone: throughput, p50, p99, CPU/req, net CPU/req |")
	t.Logf("|---|---|---|---|---|---|---|")
	us := func(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }
	for _, p := range phases {
		m := costMedian(p.results)
		t.Logf("| %s | %.0f | %.1f ms | %.1f ms | %s | %s = %s + %s + %s | %.2fx, %.2fx, %.2fx, %.2fx, %.2fx |", p.name, m.rps,
			float64(m.p50)/1e6, float64(m.p99)/1e6, us(m.cpuTotal),
			us(m.netTotal), us(m.net["apiserver"]), us(m.net["etcd"]), us(m.net["kcedar"]),
			ratio(p.results, func(r costResult) float64 { return r.rps }),
			ratio(p.results, func(r costResult) float64 { return float64(r.p50) }),
			ratio(p.results, func(r costResult) float64 { return float64(r.p99) }),
			ratio(p.results, func(r costResult) float64 { return float64(r.cpuTotal) }),
			ratio(p.results, func(r costResult) float64 { return float64(r.netTotal) }))
	}
	logCostFloor(t, phases[3], phases[1:])
}

// setupCostCluster creates the benchmark's namespaces, pods and configmaps, a
// Role reading them, and RoleBindings: to the rbac-user-* users always, to
// the bench-user-* users only if grantBench (the RBAC-alone cluster).
func setupCostCluster(t *testing.T, c *framework.Cluster, grantBench bool) {
	t.Helper()
	ctx := t.Context()
	admin := c.Client(t)
	subjects := func(kind string) []rbacv1.Subject {
		var s []rbacv1.Subject
		for u := range costUsers {
			s = append(s, rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: costUser(kind, u)})
		}
		return s
	}
	for i := range costNamespaces {
		ns := costNamespace(i)
		c.EnsureNamespace(t, ns)
		for k := range costObjects {
			mustCreate(t, func() error {
				_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", k), Labels: map[string]string{"app": "bench"}},
					Data: map[string]string{"key": strings.Repeat("v", 200)}}, metav1.CreateOptions{})
				return err
			})
			mustCreate(t, func() error {
				_, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", k), Labels: map[string]string{"app": "bench"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}}}, metav1.CreateOptions{})
				return err
			})
		}
		mustCreate(t, func() error {
			_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bench-reader"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
			return err
		})
		kinds := []string{"rbac"}
		if grantBench {
			kinds = append(kinds, "bench")
		}
		for _, kind := range kinds {
			mustCreate(t, func() error {
				_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: kind + "-users"},
					RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "bench-reader"},
					Subjects: subjects(kind)}, metav1.CreateOptions{})
				return err
			})
		}
	}
}

// checkCostAuthorization checks that authorization is on and decides what
// the benchmark assumes: ungranted requests are refused in both clusters,
// and in the kcedar cluster kcedar's policies (not RBAC) are what grant the
// bench users.
func checkCostAuthorization(t *testing.T, rbacCluster, kcedarCluster *framework.Cluster) {
	t.Helper()
	ctx := t.Context()
	listPods := func(c *framework.Cluster, token, ns string) error {
		_, err := c.ClientFor(t, token).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	}
	for _, c := range []*framework.Cluster{rbacCluster, kcedarCluster} {
		if err := listPods(c, "nobody-token", costNamespace(0)); !apierrors.IsForbidden(err) {
			t.Fatalf("%s: nobody lists pods: want 403, got %v", c.Server, err)
		}
		if err := listPods(c, costToken("bench", 0), "default"); !apierrors.IsForbidden(err) {
			t.Fatalf("%s: bench-user-0 lists pods outside the benchmark namespaces: want 403, got %v", c.Server, err)
		}
		for _, kind := range []string{"bench", "rbac"} {
			if err := listPods(c, costToken(kind, 0), costNamespace(0)); err != nil {
				t.Fatalf("%s: %s lists pods in %s: %v", c.Server, costUser(kind, 0), costNamespace(0), err)
			}
		}
	}
	_, err := kcedarCluster.ClientFor(t, costToken("bench", 0)).CoreV1().Secrets(costNamespace(0)).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("kcedar cluster: bench-user-0 lists secrets: want 403, got %v", err)
	}
}

// costPhase is one side of the comparison: a cluster and the users sending
// the requests.
type costPhase struct {
	name           string
	cluster        *framework.Cluster
	kind           string // "bench" or "rbac" users
	kcedarDecision string // what kcedar must answer each request ("" = kcedar is not asked)
	emptySet       bool   // kcedar serves the empty policy set (the floor)
	clients        []kubernetes.Interface
	procs          map[string]int    // every server process: name -> pid
	own            map[string]string // the processes this phase loads: role (apiserver, etcd, kcedar) -> name
	results        []costResult
}

type costResult struct {
	total    int64 // requests sent, warm-up included
	measured int
	rps      float64
	p50, p99 time.Duration
	elapsed  time.Duration            // the measurement window
	raw      map[string]time.Duration // CPU time of every process over the window, by name
	cpu      map[string]time.Duration // CPU time per measured request, by role of the phase's own processes
	cpuTotal time.Duration            // sum of cpu
	net      map[string]time.Duration // cpu less the process's idle rate (subtractIdle)
	netTotal time.Duration            // sum of net
}

// subtractIdle sets net: each own process's CPU time over the window less its
// idle rate (CPU seconds per second) times the window, per measured request.
func (r *costResult) subtractIdle(own map[string]string, idle map[string]float64) {
	r.net, r.netTotal = map[string]time.Duration{}, 0
	for role, name := range own {
		d := (r.raw[name] - time.Duration(idle[name]*float64(r.elapsed))) / time.Duration(r.measured)
		r.net[role] = d
		r.netTotal += d
	}
}

func (r costResult) String() string {
	return fmt.Sprintf("%7.0f req/s  p50 %-9v p99 %-9v CPU/req apiserver %-8v etcd %-8v kcedar %-8v (%d requests)",
		r.rps, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond),
		r.cpu["apiserver"].Round(time.Microsecond), r.cpu["etcd"].Round(time.Microsecond), r.cpu["kcedar"].Round(time.Microsecond), r.total)
}

// costRequest sends request i of goroutine g: a get or list of pods or
// configmaps in one of the benchmark namespaces.
func costRequest(ctx context.Context, cs kubernetes.Interface, g, i int) error {
	ns := costNamespace((g + i) % costNamespaces)
	k := (i*7 + g) % costObjects
	var err error
	switch (g + i/costNamespaces) % 4 {
	case 0:
		_, err = cs.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("p-%d", k), metav1.GetOptions{})
	case 1:
		_, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	case 2:
		_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%d", k), metav1.GetOptions{})
	default:
		_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	}
	return err
}

// run drives cfg.conns goroutines, each sending requests back to back as one
// of the phase's users, for the warm-up and then the measured duration. The
// requests started after the warm-up are measured; in-flight requests finish
// normally when time is up. Any failed request fails the phase.
func (p *costPhase) run(ctx context.Context, cfg costSettings) (costResult, error) {
	var (
		stop     atomic.Bool
		measure  atomic.Bool
		total    atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
		cpu0     map[string]time.Duration
		t0       time.Time
	)
	for g := range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := p.clients[g%len(p.clients)]
			local := make([]time.Duration, 0, 1<<14)
			for i := 0; !stop.Load(); i++ {
				measured := measure.Load()
				start := time.Now()
				err := costRequest(ctx, cs, g, i)
				d := time.Since(start)
				total.Add(1)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s, request %d of goroutine %d: %w", costUser(p.kind, g%costUsers), i, g, err)
					}
					mu.Unlock()
					stop.Store(true)
					break
				}
				if measured {
					local = append(local, d)
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	sleep := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	sleep(cfg.warmup)
	cpu0, t0 = p.cpuTimes(), time.Now()
	measure.Store(true)
	sleep(cfg.duration)
	stop.Store(true)
	wg.Wait()
	elapsed, cpu1 := time.Since(t0), p.cpuTimes()
	if firstErr != nil {
		return costResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return costResult{}, err
	}
	if len(lat) == 0 {
		return costResult{}, fmt.Errorf("no request completed in %v", cfg.duration)
	}
	slices.Sort(lat)
	r := costResult{total: total.Load(), measured: len(lat), rps: float64(len(lat)) / elapsed.Seconds(),
		p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], elapsed: elapsed, raw: map[string]time.Duration{}, cpu: map[string]time.Duration{}}
	for name := range p.procs {
		r.raw[name] = cpu1[name] - cpu0[name]
	}
	for role, name := range p.own {
		r.cpu[role] = r.raw[name] / time.Duration(len(lat))
		r.cpuTotal += r.cpu[role]
	}
	return r, nil
}

func (p *costPhase) cpuTimes() map[string]time.Duration {
	m := map[string]time.Duration{}
	for name, pid := range p.procs {
		m[name] = processCPU(pid)
	}
	return m
}

// processCPU is the user + system CPU time of process pid so far (0 if it
// cannot be read).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// costMedian takes each figure's median over rounds.
func costMedian(rs []costResult) costResult {
	mid := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	col := func(f func(costResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return mid(xs)
	}
	m := costResult{cpu: map[string]time.Duration{}, net: map[string]time.Duration{}}
	m.rps = col(func(r costResult) float64 { return r.rps })
	m.p50 = time.Duration(col(func(r costResult) float64 { return float64(r.p50) }))
	m.p99 = time.Duration(col(func(r costResult) float64 { return float64(r.p99) }))
	m.cpuTotal = time.Duration(col(func(r costResult) float64 { return float64(r.cpuTotal) }))
	m.netTotal = time.Duration(col(func(r costResult) float64 { return float64(r.netTotal) }))
	for role := range rs[0].cpu {
		m.cpu[role] = time.Duration(col(func(r costResult) float64 { return float64(r.cpu[role]) }))
		m.net[role] = time.Duration(col(func(r costResult) float64 { return float64(r.net[role]) }))
	}
	return m
}

// checkKcedarDecided checks kcedar's decision counters over a phase: they
// grew by at least the phase's requests under the decision it must answer,
// or (RBAC alone) not at all.
func checkKcedarDecided(t *testing.T, p *costPhase, res costResult, before, after map[string]float64) {
	t.Helper()
	if p.kcedarDecision == "" {
		for d, n := range after {
			if n != before[d] {
				t.Fatalf("%s: kcedar answered %v %s reviews; it is not in this cluster's authorizer chain", p.name, n-before[d], d)
			}
		}
		return
	}
	if got := after[p.kcedarDecision] - before[p.kcedarDecision]; got < float64(res.total) {
		t.Fatalf("%s: kcedar answered %v reviews %s during the phase, fewer than the %d requests sent (is the webhook's decision cache off?)",
			p.name, got, p.kcedarDecision, res.total)
	}
}

// kcedarMetrics reads the kcedar webhook's /metrics.
type kcedarMetrics struct {
	url    string
	client *http.Client
}

// newKcedarMetrics finds the webhook's address and CA in the files
// startKcedarWebhook wrote for the apiserver.
func newKcedarMetrics(t *testing.T, opts framework.Options) *kcedarMetrics {
	t.Helper()
	_, rest, ok := strings.Cut(opts.Files["kcedar-webhook.kubeconfig"], "server: https://")
	addr, _, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		t.Fatalf("no webhook address in the kubeconfig startKcedarWebhook wrote:\n%s", opts.Files["kcedar-webhook.kubeconfig"])
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(opts.Files["kcedar-ca.crt"])) {
		t.Fatal("no kcedar CA certificate in the files startKcedarWebhook wrote")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	return &kcedarMetrics{url: "https://" + addr + "/metrics", client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// decisions returns kcedar_decisions_total{endpoint="authorize"} by decision.
func (m *kcedarMetrics) decisions(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := m.client.Get(m.url)
	if err != nil {
		t.Fatalf("kcedar metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("kcedar metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		labels, ok := strings.CutPrefix(line, "kcedar_decisions_total{")
		if !ok || !strings.Contains(labels, `endpoint="authorize"`) {
			continue
		}
		_, d, _ := strings.Cut(labels, `decision="`)
		d, _, _ = strings.Cut(d, `"`)
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil || d == "" {
			t.Fatalf("kcedar metrics: cannot read %q", line)
		}
		out[d] += v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("kcedar metrics: %v", err)
	}
	return out
}
