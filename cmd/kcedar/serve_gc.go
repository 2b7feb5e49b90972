package main

import (
	"net/http"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/server"
)

// serve's process policy: when the garbage of a policy load is collected,
// and the process-wide metrics.

// collector collects after policy loads.
type collector struct {
	// collecting: a collection ahead of the next change runs (collectAhead).
	collecting atomic.Bool
}

func newCollector() *collector { return &collector{} }

// reloaded runs after each load, once the authorizer has moved to the new
// set's engine (its subscription comes first), which drops the old engine
// and every cache it built.
func (c *collector) reloaded(ev cedar.ReloadEvent) {
	switch {
	case ev.Err == nil && ev.Changed && ev.Incremental:
		// Built by the change: it allocated little, and a full collection
		// would cost as much as a full load's did.
		c.collectAhead()
	case ev.Err == nil && ev.Changed:
		releaseReplacedSet()
	}
}

// releaseReplacedSet runs after a load swapped the policy set: it collects
// the old set and its engine at once, so the heap goal (and with it RSS)
// follows the serving set instead of the largest transient of a load
// (parsing and validating a large set allocates much more than the set
// keeps). The freed pages go back to the operating system by the runtime's
// background scavenger, not all at once: returning hundreds of MB in one
// call made the first decisions on the new set pay to fault fresh pages
// in. A reload is rare; one full collection is its cost.
func releaseReplacedSet() { runtime.GC() }

// collectAhead runs after a load by the change. Such a load allocates a few
// tens of MB, so after several the heap reaches its goal, and the
// collection (marking the whole serving set: hundreds of ms of CPU at
// 100,000 policies) would start inside whichever change comes next and slow
// it. When the heap is past most of its goal, it collects now, in the
// background, while nothing waits on it.
func (c *collector) collectAhead() {
	if !heapNearGoal(readHeap()) || !c.collecting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.collecting.Store(false)
		runtime.GC()
	}()
}

// heapNearGoal: the heap's objects take most of the goal at which the
// runtime starts the next collection (0: not known).
func heapNearGoal(objects, goal uint64) bool {
	return goal > 0 && objects*10 >= goal*7
}

// readHeap is the bytes of heap objects (live and not yet swept) and the
// heap goal, from runtime/metrics.
func readHeap() (objects, goal uint64) {
	samples := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	rtmetrics.Read(samples)
	if samples[0].Value.Kind() != rtmetrics.KindUint64 || samples[1].Value.Kind() != rtmetrics.KindUint64 {
		return 0, 0
	}
	return samples[0].Value.Uint64(), samples[1].Value.Uint64()
}

// newServeRegistry is the registry /metrics serves: the process's and the
// Go runtime's metrics and kcedar's build, beside what each part of serve
// registers.
func newServeRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg)
	return reg
}

// metricsHandler is serve's handler: the server, and GET /metrics serving
// the registry.
type metricsHandler struct {
	*server.Server
	metrics http.Handler
}

// withMetrics is srv with GET /metrics serving reg.
func withMetrics(srv *server.Server, reg *prometheus.Registry) metricsHandler {
	return metricsHandler{Server: srv, metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
}

func (h metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/metrics" {
		h.metrics.ServeHTTP(w, r)
		return
	}
	h.Server.ServeHTTP(w, r)
}
