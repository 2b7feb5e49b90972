// Command load is kcedar's load test: it starts `kcedar serve` over TLS with a
// generated policy set, drives SubjectAccessReviews at it over keep-alive
// connections, and reports throughput, latency percentiles and the server's
// RSS; then it reloads the same server with an empty policy set and measures
// the HTTP/TLS/JSON floor the same way.
//
//	go run ./test/load -kcedar bin/kcedar -policies 1000 -conns 16 -duration 10s
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

	"github.com/kcedar/kcedar/policies"
	"github.com/kcedar/kcedar/policies/rbac"
	"github.com/kcedar/kcedar/schemagen"
)

func main() {
	var (
		bin      = flag.String("kcedar", "bin/kcedar", "kcedar binary")
		nPol     = flag.Int("policies", 1000, "RBAC-like policies to load")
		conns    = flag.Int("conns", 16, "concurrent keep-alive connections")
		duration = flag.Duration("duration", 10*time.Second, "measurement time per phase")
		warmup   = flag.Duration("warmup", 2*time.Second, "warm-up time per phase")
		rounds   = flag.Int("rounds", 3, "alternate the two phases this many times and report medians (evens out noise)")
		workload = flag.String("workload", "rbac-like", "rbac-like: policies.RBACLike(-policies) and synthetic requests; rbac: the converted bootstrap + generated RBAC configuration (policies/rbac) and its generated SubjectAccessReviews")
	)
	flag.Parse()
	var err error
	var policySet string
	var bodies [][]byte
	switch *workload {
	case "rbac-like":
		policySet, bodies = policies.RBACLike(*nPol), requestBodies()
	case "rbac":
		policySet, bodies, err = rbacWorkload()
	default:
		err = fmt.Errorf("unknown -workload %q", *workload)
	}
	if err == nil {
		err = run(*bin, policySet, bodies, *conns, *duration, *warmup, *rounds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type result struct {
	requests  int64
	errors    int64
	rps       float64
	p50, p99  time.Duration
	rssKB     int64
	peakRSSKB int64
}

// rbacWorkload is the realistic workload of issue 5: the bootstrap roles
// and bindings of Kubernetes v1.37.1 plus a generated configuration (50
// roles, 100 bindings), converted to Cedar, and generated SubjectAccessReviews
// (those a kube-apiserver sends: no "*" verb, group, resource or subresource).
func rbacWorkload() (string, [][]byte, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", nil, err
	}
	in := &rbac.Input{}
	if err := in.ReadPaths([]string{filepath.Join(root, "policies", "rbac", "testdata", "bootstrap")}); err != nil {
		return "", nil, err
	}
	gen := rbac.GenerateConfig(20261121, 50, 100)
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
	res, err := rbac.Convert(s, in)
	if err != nil {
		return "", nil, err
	}
	var bodies [][]byte
	for _, spec := range rbac.GenerateRequests(20261121, 4096) {
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

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

func run(bin, full string, bodies [][]byte, conns int, duration, warmup time.Duration, rounds int) error {
	nPol := strings.Count(full, "@id(")
	dir, err := os.MkdirTemp("", "kcedar-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	polFile := filepath.Join(dir, "policies.cedar")
	if err := os.WriteFile(polFile, []byte(full), 0o644); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "ca.crt")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--policies", polFile, "--write-ca", caFile, "--reload-interval", "200ms", "--log-level", "warn", "--allow-empty-policy-set")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	var pool *x509.CertPool
	base := "https://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pem, err := os.ReadFile(caFile); err == nil && len(pem) > 0 {
			pool = x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			if body, err := get(pool, base+"/readyz"); err == nil && strings.HasPrefix(body, "ok") {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kcedar did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}

	load := func(content string, want string) error {
		if err := os.WriteFile(polFile, []byte(content), 0o644); err != nil {
			return err
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			body, _ := get(pool, base+"/readyz")
			if strings.Contains(body, want) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("policy set not loaded (want %q): %s", want, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	fmt.Printf("kcedar load test: %d connections, %d rounds of %s per phase (after %s warm-up), %d policies vs none\n", conns, rounds, duration, warmup, nPol)
	var fulls, empties []result
	for r := 0; r < rounds; r++ {
		if err := load(full, fmt.Sprintf("serving %d policies", nPol)); err != nil {
			return err
		}
		f, err := measure(pool, base, bodies, conns, duration, warmup, cmd.Process.Pid)
		if err != nil {
			return err
		}
		report(fmt.Sprintf("round %d: %d policies", r+1, nPol), f)
		if err := load("// empty\n", "serving 0 policies"); err != nil {
			return err
		}
		e, err := measure(pool, base, bodies, conns, duration, warmup, cmd.Process.Pid)
		if err != nil {
			return err
		}
		report(fmt.Sprintf("round %d: empty (floor)", r+1), e)
		fulls, empties = append(fulls, f), append(empties, e)
	}
	mf, me := median(fulls), median(empties)
	fmt.Println("medians:")
	report(fmt.Sprintf("%d policies", nPol), mf)
	report("empty policy set (floor)", me)
	fmt.Printf("floor/full throughput ratio: %.2f (bar: <= 1.30)\n", me.rps/mf.rps)
	fmt.Printf("floor/full p99 ratio:        %.2f (bar: the floor's p99 at most 1.5x lower)\n", float64(mf.p99)/float64(me.p99))
	return nil
}

// median takes the median throughput and p99 (and the last RSS) of rounds.
func median(rs []result) result {
	rps := make([]float64, len(rs))
	p50 := make([]time.Duration, len(rs))
	p99 := make([]time.Duration, len(rs))
	for i, r := range rs {
		rps[i], p50[i], p99[i] = r.rps, r.p50, r.p99
	}
	sort.Float64s(rps)
	sort.Slice(p50, func(i, j int) bool { return p50[i] < p50[j] })
	sort.Slice(p99, func(i, j int) bool { return p99[i] < p99[j] })
	last := rs[len(rs)-1]
	return result{rps: rps[len(rs)/2], p50: p50[len(rs)/2], p99: p99[len(rs)/2], rssKB: last.rssKB, peakRSSKB: last.peakRSSKB}
}

func report(name string, r result) {
	fmt.Printf("%-26s %8.0f SAR/s  p50 %-9s p99 %-9s errors %d  server RSS %d MiB (peak %d MiB)\n",
		name+":", r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.errors, r.rssKB/1024, r.peakRSSKB/1024)
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
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, ForceAttemptHTTP2: false}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			defer tr.CloseIdleConnections()
			local := make([]time.Duration, 0, 1<<16)
			for i := c; ctx.Err() == nil; i++ {
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
				}
				if t0.After(measureFrom) {
					local = append(local, time.Since(t0))
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(measureFrom)
	if len(lat) == 0 {
		return result{}, fmt.Errorf("no requests completed")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{requests: int64(len(lat)), errors: errs.Load(), rps: float64(len(lat)) / elapsed.Seconds(),
		p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}
	r.rssKB, r.peakRSSKB = rss(pid)
	return r, nil
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
