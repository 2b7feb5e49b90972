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
)

func main() {
	var (
		bin      = flag.String("kcedar", "bin/kcedar", "kcedar binary")
		nPol     = flag.Int("policies", 1000, "RBAC-like policies to load")
		conns    = flag.Int("conns", 16, "concurrent keep-alive connections")
		duration = flag.Duration("duration", 10*time.Second, "measurement time per phase")
		warmup   = flag.Duration("warmup", 2*time.Second, "warm-up time per phase")
	)
	flag.Parse()
	if err := run(*bin, *nPol, *conns, *duration, *warmup); err != nil {
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

func run(bin string, nPol, conns int, duration, warmup time.Duration) error {
	dir, err := os.MkdirTemp("", "kcedar-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	polFile := filepath.Join(dir, "policies.cedar")
	if err := os.WriteFile(polFile, []byte(policies.RBACLike(nPol)), 0o644); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "ca.crt")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--policies", polFile, "--write-ca", caFile, "--reload-interval", "200ms", "--log-level", "warn")
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

	bodies := requestBodies()
	fmt.Printf("kcedar load test: %d connections, %s per phase, GOMAXPROCS of this client %d\n", conns, duration, 0)
	full, err := measure(pool, base, bodies, conns, duration, warmup, cmd.Process.Pid)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("%d policies", nPol), full)

	if err := os.WriteFile(polFile, []byte("// empty\n"), 0o644); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		body, _ := get(pool, base+"/readyz")
		if strings.Contains(body, "serving 0 policies") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the empty policy set was not loaded: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	empty, err := measure(pool, base, bodies, conns, duration, warmup, cmd.Process.Pid)
	if err != nil {
		return err
	}
	report("empty policy set (floor)", empty)
	fmt.Printf("floor/full throughput ratio: %.2f (bar: <= 1.30)\n", empty.rps/full.rps)
	fmt.Printf("full/floor p99 ratio:        %.2f (bar: <= 1.50)\n", float64(full.p99)/float64(empty.p99))
	return nil
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
