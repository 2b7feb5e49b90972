package main

import (
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
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

// collector collects after policy loads and keeps the heap's headroom.
type collector struct {
	// collecting: a collection ahead of the next change runs (collectAhead).
	collecting atomic.Bool
	// minHeadroom is --gc-min-headroom (0: the runtime's default).
	minHeadroom uint64
}

// newCollector is the collector of serve with --gc-min-headroom minHeadroom:
// GOGC in the environment leaves the runtime's pacing to it.
func newCollector(minHeadroom uint64) *collector {
	if os.Getenv("GOGC") != "" {
		minHeadroom = 0
	}
	return &collector{minHeadroom: minHeadroom}
}

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
		c.keepHeadroom()
	}
}

// keepHeadroom sets the runtime's GC percent so that the heap may grow by
// at least minHeadroom between collections, and never by less than the
// default (the live heap again). A collection marks the live heap, and a
// small set's live heap is mostly the schema (about 16 MB): with the
// default, a server answering thousands of reviews a second spends about
// as much CPU marking it as deciding. A large set's live heap already
// leaves more room than minHeadroom, so its pacing is the default's. Run
// after a full collection, when the live heap is what the set keeps.
func (c *collector) keepHeadroom() {
	if c.minHeadroom == 0 {
		return
	}
	if live := readLiveHeap(); live > 0 {
		debug.SetGCPercent(headroomPercent(live, c.minHeadroom))
	}
}

// headroomPercent is the GC percent that lets a heap of live bytes grow by
// at least minHeadroom, at least 100 (the default) and at most 10,000.
func headroomPercent(live, minHeadroom uint64) int {
	percent := uint64(100)
	if live*percent/100 < minHeadroom {
		percent = (minHeadroom*100 + live - 1) / live
	}
	return int(min(percent, 10000))
}

// readLiveHeap is the heap the last collection marked live (0: not known).
func readLiveHeap() uint64 {
	samples := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(samples)
	if samples[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return samples[0].Value.Uint64()
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
// registers. Of the runtime's metrics it adds go_gc_heap_live_bytes, the
// heap the last collection found live: unlike RSS, which settles up to
// --gc-min-headroom above it, it grows only with what kcedar keeps, so it
// is what a leak shows in.
func newServeRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	goMetrics := collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}))
	reg.MustRegister(goMetrics, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
