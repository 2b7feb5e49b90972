package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kcedar/kcedar/cedar"
)

// metrics are kcedar's Prometheus metrics, on a registry of their own.
type metrics struct {
	registry         *prometheus.Registry
	decisions        *prometheus.CounterVec
	decisionDuration *prometheus.HistogramVec
	requestDuration  *prometheus.HistogramVec
	badRequests      *prometheus.CounterVec
	reloads          *prometheus.CounterVec
	policies         prometheus.Gauge
	loadError        prometheus.Gauge
	generation       prometheus.Gauge
	webhookVerified  prometheus.Gauge
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
			Help: "Policy load attempts by result (success, unchanged, error).",
		}, []string{"result"}),
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
		webhookVerified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_admission_webhook_verified",
			Help: "With --admission-enforcement: 1 when the ValidatingWebhookConfiguration that enforces conditions is verified in place, else 0 (conditional allows are then folded).",
		}),
	}
	m.registry.MustRegister(m.decisions, m.decisionDuration, m.requestDuration, m.badRequests,
		m.reloads, m.policies, m.loadError, m.generation, m.webhookVerified,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeReload records a store reload.
func (m *metrics) observeReload(r cedar.ReloadResult, generation uint64) {
	switch {
	case r.Err != nil:
		m.reloads.WithLabelValues("error").Inc()
		m.loadError.Set(1)
	case r.Changed:
		m.reloads.WithLabelValues("success").Inc()
		m.loadError.Set(0)
	default:
		m.reloads.WithLabelValues("unchanged").Inc()
		m.loadError.Set(0)
	}
	m.policies.Set(float64(r.Policies))
	m.generation.Set(float64(generation))
}
