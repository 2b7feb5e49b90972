package policyobjects

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseHealth wraps the status Lease's lock and records whether its calls
// succeed, so a Lease that cannot be read, created or renewed (a missing
// namespace, missing RBAC) shows in /readyz and a metric, not only in
// client-go's log. A Get that finds no Lease is no failure: the election
// creates it next.
type leaseHealth struct {
	resourcelock.Interface

	mu           sync.Mutex
	err          error
	failingSince time.Time

	failing, leading prometheus.Gauge
}

func newLeaseHealth() *leaseHealth {
	return &leaseHealth{
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policy_status_lease_failing",
			Help: "1 while the latest attempt to read, create or renew the status Lease failed (policy object status is then not written by this replica; see /readyz), else 0.",
		}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policy_status_leader",
			Help: "1 while this replica holds the status Lease and writes the policy objects' status, else 0.",
		}),
	}
}

// Get implements resourcelock.Interface.
func (l *leaseHealth) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil || !apierrors.IsNotFound(err) {
		l.record(err)
	}
	return rec, raw, err
}

// Create implements resourcelock.Interface.
func (l *leaseHealth) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.record(err)
	return err
}

// Update implements resourcelock.Interface.
func (l *leaseHealth) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.record(err)
	return err
}

func (l *leaseHealth) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.err = nil
		l.failing.Set(0)
		return
	}
	if l.err == nil {
		l.failingSince = time.Now()
	}
	l.err = err
	l.failing.Set(1)
}

// problem describes the current failure, "" when there is none.
func (l *leaseHealth) problem(lease string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		return ""
	}
	return fmt.Sprintf("the status Lease %s cannot be read or taken (failing for %s), so this replica writes no policy object status: %v",
		lease, time.Since(l.failingSince).Round(time.Second), l.err)
}
