package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"sort"
	"sync"
	"time"
)

// reloadMarker is the policy a reload adds, so /readyz tells when the new
// set serves ("serving N+1 policies").
const reloadMarker = "\n@id(\"reload-marker\")\npermit (principal == k8s::User::\"reload-marker\", action == k8s::Action::\"get\", resource is core::pods);\n"

// reloadWindow is how long after the new set starts serving its first
// decisions are measured (the bar: p99 in the 5 s after a reload at most 3x
// the steady p99).
const reloadWindow = 5 * time.Second

// measureReload drives load through a reload of the same set plus
// reloadMarker: after warmup, duration of steady state, then the reload;
// it reports the p99 of the steady state, of the rebuild (the old set still
// serving while the new one is built) and of the reloadWindow after the new
// set starts serving.
func measureReload(pool *x509.CertPool, base string, bodies [][]byte, conns int, duration, warmup time.Duration, reload func() error, serving func() bool) (*reloadStats, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	steadyFrom, reloadAt := start.Add(warmup), start.Add(warmup+duration)
	var mu sync.Mutex
	var servingAt time.Time
	var reloadErr error
	go func() {
		defer cancel()
		time.Sleep(time.Until(reloadAt))
		if reloadErr = reload(); reloadErr != nil {
			return
		}
		for deadline := time.Now().Add(2 * time.Minute); !serving(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				reloadErr = fmt.Errorf("the reloaded set did not serve within 2 minutes")
				return
			}
		}
		mu.Lock()
		servingAt = time.Now()
		mu.Unlock()
		time.Sleep(reloadWindow)
	}()
	var steady, rebuild, after []time.Duration
	errs := drive(ctx, pool, base, bodies, conns, func(t0, t1 time.Time) {
		mu.Lock()
		at := servingAt
		mu.Unlock()
		switch {
		case !at.IsZero() && !t0.Before(at):
			after = append(after, t1.Sub(t0))
		case t0.After(steadyFrom) && t1.Before(reloadAt):
			steady = append(steady, t1.Sub(t0))
		case !t0.Before(reloadAt):
			rebuild = append(rebuild, t1.Sub(t0))
		}
	})
	if reloadErr != nil {
		return nil, reloadErr
	}
	if len(steady) == 0 || len(after) == 0 {
		return nil, fmt.Errorf("no requests measured (steady %d, after the reload %d)", len(steady), len(after))
	}
	ps, pa, pr := p99(steady), p99(after), p99(rebuild)
	fmt.Printf("reload: steady p99 %s (%d requests); while rebuilding p99 %s (%d); first %s after the new set serves p99 %s (%d); errors %d\n",
		ps.Round(time.Microsecond), len(steady), p99(rebuild).Round(time.Microsecond), len(rebuild), reloadWindow, pa.Round(time.Microsecond), len(after), errs)
	fmt.Printf("after-reload / steady p99: %.2f (bar: <= 3.00)\n", float64(pa)/float64(ps))
	return &reloadStats{SteadyP99Micros: micros(ps), RebuildP99Micros: micros(pr), AfterP99Micros: micros(pa), ServingAfterSeconds: servingAt.Sub(reloadAt).Seconds()}, nil
}

// p99 is the 99th percentile of ds (0 for none); it sorts ds.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)*99/100]
}
