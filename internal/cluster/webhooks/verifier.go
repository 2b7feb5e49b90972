// Package webhooks verifies that the ValidatingWebhookConfiguration which
// enforces kcedar's conditions in admission (kcedar serve
// --admission-enforcement) is in place, watching it with an informer, and
// exports the answer as the metric kcedar_admission_webhook_verified.
package webhooks

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DefaultConnectRetry is how often Run retries a connection that failed.
const DefaultConnectRetry = 2 * time.Second

// Verifier watches one ValidatingWebhookConfiguration, by name, and reports
// whether it enforces kcedar's conditions (Inspect), and for whom (Sees).
// Until its informer has listed the configuration, and whenever the
// configuration is missing or weakened, it is not verified.
type Verifier struct {
	// ConnectRetry is how often Run retries a connection that failed
	// (DefaultConnectRetry if 0).
	ConnectRetry time.Duration

	name   string
	logger *slog.Logger
	// verified is the Bypass of the verified webhook: the identities it
	// leaves out; nil while it is not verified.
	verified atomic.Pointer[Bypass]
	gauge    prometheus.Gauge

	mu      sync.Mutex
	lastErr string // the last problem logged, so a repeat is logged once
}

// NewVerifier returns a Verifier of the ValidatingWebhookConfiguration name;
// Run it.
func NewVerifier(name string, logger *slog.Logger) *Verifier {
	if logger == nil {
		logger = slog.Default()
	}
	return &Verifier{name: name, logger: logger, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kcedar_admission_webhook_verified",
		Help: "With --admission-enforcement: 1 when the ValidatingWebhookConfiguration that enforces conditions is verified in place, else 0 (conditional allows are then folded).",
	})}
}

// Verified reports whether the webhook is verified in place now.
func (v *Verifier) Verified() bool { return v.verified.Load() != nil }

// Sees reports whether the webhook is verified in place now and sends the
// writes of user in groups to kcedar: its matchConditions (those of kcedar
// manifests) do not leave that identity out. A conditional allow is only
// enforced for an identity the webhook sees; the identities it leaves out
// are those the AuthorizationConfiguration of the same kcedar manifests
// sends past kcedar, so kcedar never answers them, but a configuration
// installed from other flags could differ.
func (v *Verifier) Sees(user string, groups []string) bool {
	b := v.verified.Load()
	return b != nil && !b.Excludes(user, groups)
}

// Describe and Collect make the verifier's metric a prometheus.Collector.
func (v *Verifier) Describe(ch chan<- *prometheus.Desc) { v.gauge.Describe(ch) }

func (v *Verifier) Collect(ch chan<- prometheus.Metric) { v.gauge.Collect(ch) }

// Run watches the configuration until ctx ends. connect builds the client;
// Run retries it until it succeeds, so the kubeconfig may appear (or the API
// server come up) after kcedar starts.
func (v *Verifier) Run(ctx context.Context, connect func() (kubernetes.Interface, error)) {
	client, err := v.connect(ctx, connect)
	if err != nil {
		return // ctx ended
	}
	watchConfiguration(ctx, client, v.name, func(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) { v.set(Inspect(vwc)) },
		func(problem error) { v.set(Bypass{}, problem) })
}

// connect calls connect until it succeeds or ctx ends, logging each new
// error.
func (v *Verifier) connect(ctx context.Context, connect func() (kubernetes.Interface, error)) (kubernetes.Interface, error) {
	interval := v.ConnectRetry
	if interval <= 0 {
		interval = DefaultConnectRetry
	}
	var client kubernetes.Interface
	err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		c, err := connect()
		if err != nil {
			v.set(Bypass{}, fmt.Errorf("connecting to the cluster: %w", err))
			return false, nil
		}
		client = c
		return true, nil
	})
	return client, err
}

// set records the outcome of a check (problem nil: verified, leaving out
// bypass) and logs changes.
func (v *Verifier) set(bypass Bypass, problem error) {
	ok := problem == nil
	var state *Bypass
	if ok {
		state = &bypass
	}
	prev := v.verified.Swap(state) != nil
	if ok {
		v.gauge.Set(1)
	} else {
		v.gauge.Set(0)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case ok && !prev:
		v.lastErr = ""
		v.logger.Info("admission webhook verified: conditional allows are answered Allow and enforced in admission", "webhook", v.name)
	case !ok && (prev || problem.Error() != v.lastErr):
		v.lastErr = problem.Error()
		v.logger.Error("admission webhook not in place: conditional allows are folded (NoOpinion, or Deny with deny conditions) until it is", "webhook", v.name, "err", problem)
	}
}
