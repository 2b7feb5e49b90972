// Package schemarefresh keeps the schema of `kcedar serve` in step with a
// live cluster. When the cluster's API changes (a CustomResourceDefinition or
// an APIService added, changed or removed, seen by informers, or found by a
// periodic re-check of discovery), it generates the schema again and hands it
// to a Target, which swaps it in only if every policy validates against it.
// When they do not, the last good set keeps serving with the schema it was
// checked against; the refresher remembers the refused schema, retries it
// when the policies change (Retry) and forgets it when the cluster's API
// comes back to the serving schema. Everything is reported in logs, metrics
// and Degraded (the readiness detail).
package schemarefresh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// Target is what a Refresher keeps in step with the cluster.
type Target interface {
	// Apply checks every policy against s and, if all validate, swaps s in
	// with the set checked against it. Otherwise nothing changes (the last
	// good set keeps serving with its schema) and the error says what does
	// not validate.
	Apply(s *schemagen.Schema) error
	// DropPending forgets a schema Apply refused: the cluster's API is back
	// to the schema that serves.
	DropPending()
}

// Results of a check, the label of kcedar_schema_refresh_total.
const (
	ResultUnchanged = "unchanged" // the cluster's schema is the serving one
	ResultApplied   = "applied"   // a new schema serves
	ResultInvalid   = "invalid"   // a new schema the policies do not validate against; the old one serves
	ResultError     = "error"     // discovery or generation failed; the old one serves
)

// Defaults of the Refresher's timing fields.
const (
	DefaultDebounce = time.Second
	DefaultMaxDelay = 10 * time.Second
)

// DefaultFollowUps: after a triggered check, discovery and the OpenAPI
// documents may still lag the object that changed (a CRD's OpenAPI is
// published by a controller after the CRD is established): check again.
var DefaultFollowUps = []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second}

// Reading is one read of the cluster: a fingerprint of what the schema is
// generated from, and the schema, generated only when asked (generating
// costs far more than reading and fingerprinting the documents).
type Reading struct {
	// Fingerprint identifies the documents: the same fingerprint, the
	// same schema. Different documents may still give the same schema.
	Fingerprint string
	Schema      func() (*schemagen.Schema, error)
}

// ReadDocuments is a Read for schemagen documents: their Fingerprint, and
// schemagen.Generate.
func ReadDocuments(fetch func(context.Context) (*schemagen.Documents, error)) func(context.Context) (Reading, error) {
	return func(ctx context.Context) (Reading, error) {
		docs, err := fetch(ctx)
		if err != nil {
			return Reading{}, err
		}
		fp, err := Fingerprint(docs)
		if err != nil {
			return Reading{}, err
		}
		return Reading{Fingerprint: fp, Schema: func() (*schemagen.Schema, error) { return schemagen.Generate(docs) }}, nil
	}
}

// Fingerprint identifies discovery and OpenAPI documents (SHA-256 over the
// discovery lists as JSON and the OpenAPI documents' bytes by path).
func Fingerprint(d *schemagen.Documents) (string, error) {
	h := sha256.New()
	for _, l := range []any{d.API, d.APIs} {
		b, err := json.Marshal(l)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	paths := make([]string, 0, len(d.OpenAPI))
	for p := range d.OpenAPI {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "%d:%s%d:", len(p), p, len(d.OpenAPI[p]))
		h.Write(d.OpenAPI[p])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Refresher checks the cluster's schema when told to (Trigger), every
// Interval, and retries a refused schema on Retry. Make it with New.
type Refresher struct {
	// Read reads the cluster now.
	Read   func(ctx context.Context) (Reading, error)
	Target Target
	Logger *slog.Logger
	// Interval between periodic checks; 0: none.
	Interval time.Duration
	// Debounce: a check runs this long after the last Trigger of a burst,
	// but no later than MaxDelay after its first.
	Debounce, MaxDelay time.Duration
	// FollowUps are the delays of the checks after a triggered one.
	FollowUps []time.Duration
	// OnResult, if set, is called with the result of every check and retry
	// (on Run's goroutine).
	OnResult func(result string)

	trigger, retry chan struct{}
	once           chan struct{} // one check now, without follow-ups

	mu           sync.Mutex
	activeSchema *schemagen.Schema // the serving schema
	active       string            // its hash; "" until computed (Run)
	activeFP     string            // fingerprint of the documents it was generated from
	pending      *schemagen.Schema // refused by the Target, nil if none
	pendingHash  string
	pendingFP    string
	pendingErr   error
	pendingSince time.Time
	lastErr      error // of the latest check, nil if it read the cluster
	lastErrAt    time.Time
	metrics      *metrics
}

// New returns a refresher for a Target serving schema initial, generated
// from documents with fingerprint fp ("" if unknown). The schema's hash is
// computed when Run starts, off the startup path.
func New(initial *schemagen.Schema, fp string, read func(context.Context) (Reading, error), target Target, logger *slog.Logger) *Refresher {
	if logger == nil {
		logger = slog.Default()
	}
	return &Refresher{Read: read, Target: target, Logger: logger, Debounce: DefaultDebounce, MaxDelay: DefaultMaxDelay, FollowUps: DefaultFollowUps,
		trigger: make(chan struct{}, 1), retry: make(chan struct{}, 1), once: make(chan struct{}, 1), activeSchema: initial, activeFP: fp}
}

// Hash identifies a schema: the first 16 hex digits of the SHA-256 of its
// Cedar text (deterministic, and complete: kcedar reads a schema back from it).
func Hash(s *schemagen.Schema) (string, error) {
	if s == nil {
		return "", errors.New("no schema")
	}
	text, err := s.MarshalCedar()
	if err != nil {
		return "", fmt.Errorf("printing the schema: %w", err)
	}
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])[:16], nil
}

// Active is the hash of the serving schema ("" until Run computed it).
func (r *Refresher) Active() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active
}

// Trigger asks for a check: the cluster's API may have changed. Bursts are
// debounced; it never blocks.
func (r *Refresher) Trigger() { kick(r.trigger) }

// Retry asks to apply a refused schema again, without reading the cluster:
// the policies changed and may validate against it now. It never blocks.
func (r *Refresher) Retry() { kick(r.retry) }

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run checks and retries until ctx ends.
func (r *Refresher) Run(ctx context.Context) {
	h, err := Hash(r.activeSchema)
	if err != nil {
		r.Logger.Error("schema refresh off: cannot hash the serving schema", "err", err)
		return
	}
	r.mu.Lock()
	r.active = h
	r.mu.Unlock()
	r.succeeded(h)
	var tick <-chan time.Time
	if r.Interval > 0 {
		t := time.NewTicker(r.Interval)
		defer t.Stop()
		tick = t.C
	}
	// One timer for the debounced check and its follow-ups (Go 1.23
	// timers: Reset never delivers a stale expiry).
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		armed      bool      // a triggered check is due
		burstStart time.Time // first Trigger of the burst waiting
		followUps  []time.Duration
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
			now := time.Now()
			if burstStart.IsZero() {
				burstStart = now
			}
			wait := r.Debounce
			if rest := burstStart.Add(r.MaxDelay).Sub(now); rest < wait {
				wait = max(rest, 0)
			}
			timer.Reset(wait)
			armed = true
		case <-timer.C:
			if armed {
				// The check a Trigger asked for: then the follow-ups.
				armed, burstStart = false, time.Time{}
				followUps = r.FollowUps
			}
			r.check(ctx)
			if len(followUps) > 0 {
				timer.Reset(followUps[0])
				followUps = followUps[1:]
			}
		case <-tick:
			r.check(ctx)
		case <-r.once:
			r.check(ctx)
		case <-r.retry:
			r.retryPending()
		}
	}
}

// check reads the cluster and moves the Target to its schema if it changed.
func (r *Refresher) check(ctx context.Context) {
	start := time.Now()
	rd, err := r.Read(ctx)
	if err != nil {
		r.failed(ctx, err)
		return
	}
	r.mu.Lock()
	activeFP, active := r.activeFP, r.active
	pending, pendingFP, pendingHash := r.pending, r.pendingFP, r.pendingHash
	r.mu.Unlock()
	if rd.Fingerprint != "" && rd.Fingerprint == activeFP {
		r.Logger.Debug("schema refresh: the cluster's documents are unchanged", "schema", active, "took", time.Since(start).Round(time.Millisecond).String())
		r.unchanged(active)
		return
	}
	var s *schemagen.Schema
	var h string
	if pending != nil && rd.Fingerprint != "" && rd.Fingerprint == pendingFP {
		s, h = pending, pendingHash // the refused schema again: no need to generate it
	} else {
		if s, err = rd.Schema(); err == nil {
			h, err = Hash(s)
		}
		if err != nil {
			r.failed(ctx, err)
			return
		}
	}
	r.mu.Lock()
	r.lastErr = nil
	r.mu.Unlock()
	if h == active {
		r.mu.Lock()
		r.activeFP = rd.Fingerprint
		r.mu.Unlock()
		r.Logger.Debug("schema refresh: new documents, the same schema", "schema", active, "took", time.Since(start).Round(time.Millisecond).String())
		r.unchanged(active)
		return
	}
	r.Logger.Info("schema refresh: the cluster's API changed; checking the policies against the new schema", "serving", active, "new", h, "resources", len(s.Resources), "took", time.Since(start).Round(time.Millisecond).String())
	r.apply(s, h, rd.Fingerprint)
}

// failed: the cluster could not be read.
func (r *Refresher) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	r.lastErr, r.lastErrAt = err, time.Now()
	r.mu.Unlock()
	r.Logger.Warn("schema refresh: reading the cluster's schema failed; the serving schema stays", "err", err)
	r.done(ResultError)
}

// unchanged: the cluster's schema is the serving one.
func (r *Refresher) unchanged(active string) {
	r.mu.Lock()
	r.lastErr = nil
	pending := r.pending != nil
	r.mu.Unlock()
	if pending {
		r.Target.DropPending()
		r.mu.Lock()
		r.pending, r.pendingHash, r.pendingFP, r.pendingErr = nil, "", "", nil
		r.mu.Unlock()
		r.Logger.Info("schema refresh: the cluster's API is back to the serving schema; the refused schema is dropped", "serving", active)
	}
	r.succeeded(active)
	r.done(ResultUnchanged)
}

// retryPending applies the refused schema again.
func (r *Refresher) retryPending() {
	r.mu.Lock()
	s, h, fp := r.pending, r.pendingHash, r.pendingFP
	r.mu.Unlock()
	if s == nil {
		return
	}
	r.apply(s, h, fp)
}

func (r *Refresher) apply(s *schemagen.Schema, h, fp string) {
	err := r.Target.Apply(s)
	r.mu.Lock()
	if err != nil {
		if r.pendingHash != h || r.pending == nil {
			r.pendingSince = time.Now()
		}
		repeat := r.pendingErr != nil && r.pendingHash == h && r.pendingErr.Error() == err.Error()
		r.pending, r.pendingHash, r.pendingFP, r.pendingErr = s, h, fp, err
		serving := r.active
		r.mu.Unlock()
		if !repeat {
			r.Logger.Error("schema refresh: the policies do not validate against the cluster's new schema; the last good set keeps serving with the previous schema until they are fixed or the API is restored",
				"serving", serving, "refused", h, "err", err.Error())
		}
		r.observePending(true)
		r.done(ResultInvalid)
		return
	}
	r.activeSchema, r.active, r.activeFP = s, h, fp
	r.pending, r.pendingHash, r.pendingFP, r.pendingErr = nil, "", "", nil
	r.mu.Unlock()
	r.Logger.Info("schema refresh: the new schema serves", "schema", h, "resources", len(s.Resources))
	r.succeeded(h)
	r.done(ResultApplied)
}

// succeeded: the serving schema is the cluster's.
func (r *Refresher) succeeded(h string) {
	r.observePending(false)
	if m := r.metrics; m != nil {
		m.lastSuccess.SetToCurrentTime()
		m.info.Reset()
		m.info.WithLabelValues(h).Set(1)
	}
}

func (r *Refresher) observePending(p bool) {
	if m := r.metrics; m != nil {
		v := 0.0
		if p {
			v = 1
		}
		m.pending.Set(v)
	}
}

func (r *Refresher) done(result string) {
	if m := r.metrics; m != nil {
		m.refreshes.WithLabelValues(result).Inc()
	}
	if r.OnResult != nil {
		r.OnResult(result)
	}
}

// maxDetail bounds the readiness detail.
const maxDetail = 4000

// Degraded describes what keeps the serving schema from being the cluster's,
// for /readyz; "" when nothing does.
func (r *Refresher) Degraded() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d string
	switch {
	case r.pending != nil:
		d = fmt.Sprintf("the cluster's API changed %s ago and the policies do not validate against its schema (%s); serving with the previous schema (%s): %v",
			time.Since(r.pendingSince).Round(time.Second), r.pendingHash, r.active, r.pendingErr)
	case r.lastErr != nil:
		d = fmt.Sprintf("schema refresh failed %s ago, the serving schema (%s) may be stale: %v", time.Since(r.lastErrAt).Round(time.Second), r.active, r.lastErr)
	}
	if len(d) > maxDetail {
		d = d[:maxDetail] + "... (truncated; see the log)"
	}
	return d
}

type metrics struct {
	refreshes   *prometheus.CounterVec
	info        *prometheus.GaugeVec
	lastSuccess prometheus.Gauge
	pending     prometheus.Gauge
}

// RegisterMetrics adds the refresher's metrics to reg. Call it before Run.
func (r *Refresher) RegisterMetrics(reg prometheus.Registerer) error {
	m := &metrics{
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kcedar_schema_refresh_total",
			Help: "Checks of the cluster's schema by result: unchanged, applied (a new schema serves), invalid (the policies do not validate against the new schema; the previous one serves), error (discovery failed).",
		}, []string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kcedar_schema_info",
			Help: "1 for the hash of the schema serving now.",
		}, []string{"hash"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_schema_refresh_last_success_timestamp_seconds",
			Help: "When the serving schema was last found to be the cluster's (unchanged or applied).",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_schema_refresh_pending",
			Help: "1 while the cluster's schema differs from the serving one because the policies do not validate against it.",
		}),
	}
	for _, c := range []prometheus.Collector{m.refreshes, m.info, m.lastSuccess, m.pending} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, res := range []string{ResultUnchanged, ResultApplied, ResultInvalid, ResultError} {
		m.refreshes.WithLabelValues(res)
	}
	m.lastSuccess.SetToCurrentTime() // the schema was read at startup
	r.metrics = m                    // kcedar_schema_info is set once Run has the hash
	return nil
}
