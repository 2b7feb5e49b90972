package cedar

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcedar/kcedar/internal/store"
)

// registerCacheMetrics exports the size of the serving engine's caches to
// reg (nil: none). The caches belong to the policy set's engine, so both
// series restart from zero when a reload replaces it.
func (a *Authorizer) registerCacheMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	serving := a.serving
	stats := func(evictions bool) float64 {
		n, ev := serving.CacheStats()
		if evictions {
			return float64(ev)
		}
		return float64(n)
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kcedar_decision_cache_entries",
			Help: "Entries in the serving policy set's caches (decisions, residuals, encoded conditions); each cache is bounded."},
			func() float64 { return stats(false) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kcedar_decision_cache_evictions",
			Help: "Entries evicted from the serving policy set's caches since that set was loaded."},
			func() float64 { return stats(true) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// sourceMetrics are a FileSource's loads: their outcomes and the set
// serving.
type sourceMetrics struct {
	reloads         *prometheus.CounterVec
	reloadTimestamp *prometheus.GaugeVec
	setInfo         *prometheus.GaugeVec
	policies        prometheus.Gauge
	loadError       prometheus.Gauge
	generation      prometheus.Gauge
	fileReads       prometheus.CounterFunc

	servingHash string // the label of setInfo's one series (observe runs under the store's lock)
}

func newSourceMetrics(fileReads func() uint64) *sourceMetrics {
	m := &sourceMetrics{
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
		fileReads: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "kcedar_policy_file_reads_total",
			Help: "Reads of the policy files. A poll that finds every file's status (size, times, inode) as the serving set's read left it reads nothing.",
		}, func() float64 { return float64(fileReads()) }),
	}
	// Both statuses exist from the start, so rate() and absent() work.
	for _, status := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(status)
	}
	return m
}

// register adds the metrics to reg.
func (m *sourceMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.reloads, m.reloadTimestamp, m.setInfo, m.policies, m.loadError, m.generation, m.fileReads} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observe records a load. Failures and successes count once per distinct
// content: a poll that reads the same bad files again (Repeat) or the
// serving files (not Changed) updates the gauges only.
func (m *sourceMetrics) observe(r store.ReloadResult, generation uint64) {
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
func (m *sourceMetrics) observeServing(hash string, policies int, generation uint64) {
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
