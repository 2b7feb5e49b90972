package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/store"
)

// metrics are kcedar's Prometheus metrics, on a registry of their own.
type metrics struct {
	registry         *prometheus.Registry
	decisions        *prometheus.CounterVec
	auditDecisions   *prometheus.CounterVec
	decisionDuration *prometheus.HistogramVec
	requestDuration  *prometheus.HistogramVec
	badRequests      *prometheus.CounterVec
	reloads          *prometheus.CounterVec
	reloadTimestamp  *prometheus.GaugeVec
	setInfo          *prometheus.GaugeVec
	policies         prometheus.Gauge
	loadError        prometheus.Gauge
	generation       prometheus.Gauge

	servingHash string // the label of setInfo's one series (observeReload runs under the store's lock)

	// The series /v1/authorize updates on every request, created on first
	// use: decisionDuration{endpoint="authorize"} and
	// decisions{endpoint="authorize"} by decision.
	authorizeDuration  func() prometheus.Observer
	authorizeDecisions *seriesCache[string, prometheus.Counter]
	// cacheLookups: SubjectAccessReviews looked up in the decision cache,
	// by result (hit, miss); both series exist from the start.
	cacheLookups *prometheus.CounterVec
	cacheHit     prometheus.Counter
	cacheMiss    prometheus.Counter
}

// latencyBuckets reach down to a microsecond: a decision takes a few.
var latencyBuckets = []float64{
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1,
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kcedar_decisions_total",
			Help: "Authorization decisions by endpoint and outcome (Allow, Deny, NoOpinion, Conditional).",
		}, []string{"endpoint", "decision"}),
		auditDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kcedar_audit_decisions_total",
			Help: "SubjectAccessReviews an audit policy would have decided otherwise, by the policy's effect (permit, forbid) and the would-be decision (deny, allow, conditional); one count per policy and review.",
		}, []string{"effect", "would"}),
		decisionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kcedar_decision_duration_seconds",
			Help:    "Time to decide, excluding HTTP, TLS and JSON.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kcedar_http_request_duration_seconds",
			Help:    "Time to serve a request, from the first byte read to the response written.",
			Buckets: latencyBuckets,
		}, []string{"endpoint", "code"}),
		badRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kcedar_bad_requests_total",
			Help: "Requests refused as malformed, too large or of the wrong kind.",
		}, []string{"endpoint"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kcedar_policy_reloads_total",
			Help: "Policy loads of new content by status (success, failure); the same content read again does not count again.",
		}, []string{"status"}),
		reloadTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kcedar_policy_reload_last_timestamp_seconds",
			Help: "Unix time of the latest policy load of new content, by status (success, failure).",
		}, []string{"status"}),
		setInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kcedar_policy_set_info",
			Help: "1 for the policy set serving, labeled with its hash (hex SHA-256 over file names and contents); one series.",
		}, []string{"hash"}),
		policies: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policies",
			Help: "Policies in the set that is serving.",
		}),
		loadError: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policy_load_error",
			Help: "1 when the latest policy load failed (the last good set keeps serving), else 0.",
		}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policy_generation",
			Help: "Generation of the policy set that is serving; it grows with every successful change.",
		}),
	}
	m.registry.MustRegister(m.decisions, m.auditDecisions, m.decisionDuration, m.requestDuration, m.badRequests,
		m.reloads, m.reloadTimestamp, m.setInfo, m.policies, m.loadError, m.generation,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.authorizeDuration = sync.OnceValue(func() prometheus.Observer { return m.decisionDuration.WithLabelValues("authorize") })
	m.authorizeDecisions = newSeriesCache(func(decision string) prometheus.Counter {
		return m.decisions.WithLabelValues("authorize", decision)
	})
	m.cacheLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kcedar_decision_cache_lookups_total",
		Help: "SubjectAccessReviews looked up in the decision cache, by result: hit (answered from the cache) or miss (decided now; only decisions that needed partial evaluation are stored, so a fully known review always misses). Reviews that are never looked up (caching off, a namespace object not known) are not counted.",
	}, []string{"result"})
	m.registry.MustRegister(m.cacheLookups)
	m.cacheHit, m.cacheMiss = m.cacheLookups.WithLabelValues("hit"), m.cacheLookups.WithLabelValues("miss")
	// Both statuses exist from the start, so rate() and absent() work.
	for _, status := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(status)
	}
	return m
}

// countBadRequestsOf creates kcedar_bad_requests_total's series of each
// endpoint at 0, for the endpoints that count their malformed requests
// (those that decode a review through decodeWebhook). A series that first
// appears at 1 has no increase() and no rate() until its second count, so
// an alert on the first malformed request would not fire; from 0, the first
// one is an increase.
func (m *metrics) countBadRequestsOf(endpoints ...string) {
	for _, e := range endpoints {
		m.badRequests.WithLabelValues(e)
	}
}

// observeReload records a store reload. Failures and successes count once
// per distinct content: a poll that reads the same bad files again (Repeat)
// or the serving files (not Changed) updates the gauges only.
func (m *metrics) observeReload(r store.ReloadResult, generation uint64) {
	if r.Changed && !r.Repeat {
		status := "success"
		if r.Err != nil {
			status = "failure"
		}
		m.reloads.WithLabelValues(status).Inc()
		m.reloadTimestamp.WithLabelValues(status).Set(float64(r.Time.UnixNano()) / 1e9)
	}
	if r.Err != nil {
		m.loadError.Set(1)
	} else {
		m.loadError.Set(0)
	}
	m.observeServing(r.Hash, r.Policies, generation)
}

// observeServing records the set serving.
func (m *metrics) observeServing(hash string, policies int, generation uint64) {
	if hash != "" {
		if m.servingHash != hash {
			m.setInfo.Reset()
			m.servingHash = hash
		}
		m.setInfo.WithLabelValues(hash).Set(1)
	}
	m.policies.Set(float64(policies))
	m.generation.Set(float64(generation))
}

// observeCache counts one SubjectAccessReview's decision cache lookup.
func (m *metrics) observeCache(r engine.CacheResult) {
	switch r {
	case engine.CacheHit:
		m.cacheHit.Inc()
	case engine.CacheMiss:
		m.cacheMiss.Inc()
	}
}
