package server

import "github.com/prometheus/client_golang/prometheus"

// registerCacheMetrics exports the size of the serving engine's caches. The
// caches belong to the policy set's engine, so both series restart from zero
// when a reload replaces it.
func (s *Server) registerCacheMetrics(r *prometheus.Registry) {
	stats := func(evictions bool) float64 {
		n, ev := s.serving.CacheStats()
		if evictions {
			return float64(ev)
		}
		return float64(n)
	}
	r.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kcedar_decision_cache_entries",
			Help: "Entries in the serving policy set's caches (decisions, residuals, encoded conditions); each cache is bounded."},
			func() float64 { return stats(false) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kcedar_decision_cache_evictions",
			Help: "Entries evicted from the serving policy set's caches since that set was loaded."},
			func() float64 { return stats(true) }),
	)
}
