package server

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the handlers' Prometheus metrics.
type metrics struct {
	decisions        *prometheus.CounterVec
	auditDecisions   *prometheus.CounterVec
	decisionDuration *prometheus.HistogramVec
	requestDuration  *prometheus.HistogramVec
	badRequests      *prometheus.CounterVec

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

// newMetrics registers the handlers' metrics with reg (nil: a registry of
// their own, read by nobody). Handlers made one by one on the same
// registerer share the metrics the first registered.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{}
	var err error
	if m.decisions, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kcedar_decisions_total",
		Help: "Authorization decisions by endpoint and outcome (Allow, Deny, NoOpinion, Conditional).",
	}, []string{"endpoint", "decision"})); err != nil {
		return nil, err
	}
	if m.auditDecisions, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kcedar_audit_decisions_total",
		Help: "SubjectAccessReviews an audit policy would have decided otherwise, by the policy's effect (permit, forbid) and the would-be decision (deny, allow, conditional); one count per policy and review.",
	}, []string{"effect", "would"})); err != nil {
		return nil, err
	}
	if m.decisionDuration, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kcedar_decision_duration_seconds",
		Help:    "Time to decide, excluding HTTP, TLS and JSON.",
		Buckets: latencyBuckets,
	}, []string{"endpoint"})); err != nil {
		return nil, err
	}
	if m.requestDuration, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kcedar_http_request_duration_seconds",
		Help:    "Time to serve a request, from the first byte read to the response written.",
		Buckets: latencyBuckets,
	}, []string{"endpoint", "code"})); err != nil {
		return nil, err
	}
	if m.badRequests, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kcedar_bad_requests_total",
		Help: "Requests refused as malformed, too large or of the wrong kind.",
	}, []string{"endpoint"})); err != nil {
		return nil, err
	}
	if m.cacheLookups, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kcedar_decision_cache_lookups_total",
		Help: "SubjectAccessReviews looked up in the decision cache, by result: hit (answered from the cache) or miss (decided now; only decisions that needed partial evaluation are stored, so a fully known review always misses). Reviews that are never looked up (caching off, a namespace object not known) are not counted.",
	}, []string{"result"})); err != nil {
		return nil, err
	}
	m.cacheHit, m.cacheMiss = m.cacheLookups.WithLabelValues("hit"), m.cacheLookups.WithLabelValues("miss")
	m.authorizeDuration = sync.OnceValue(func() prometheus.Observer { return m.decisionDuration.WithLabelValues("authorize") })
	m.authorizeDecisions = newSeriesCache(func(decision string) prometheus.Counter {
		return m.decisions.WithLabelValues("authorize", decision)
	})
	return m, nil
}

// register registers c with reg, or returns the collector registered as it
// before (another handler's).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
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

// observeCache counts one SubjectAccessReview's decision cache lookup.
func (m *metrics) observeCache(result string) {
	switch result {
	case "hit":
		m.cacheHit.Inc()
	case "miss":
		m.cacheMiss.Inc()
	}
}
