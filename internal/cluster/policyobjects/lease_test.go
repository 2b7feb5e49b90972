package policyobjects

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A status Lease that cannot be created (its namespace is missing) is a
// LeaseProblem and sets kcedar_policy_status_lease_failing; once it can be
// taken, the problem clears and the replica leads.
func TestStatusLeaseProblem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		missing := true
		client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if missing {
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "kcedar-system")
			}
			return false, nil, nil
		})
		w := &StatusWriter{Source: &Source{}, Leases: client.CoordinationV1(), Namespace: "kcedar-system", Name: "kcedar-policy-status", Identity: "a"}
		if p := w.LeaseProblem(); p != "" {
			t.Fatalf("a problem before the first try: %s", p)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		eventually(t, "the problem", func() bool { return w.LeaseProblem() != "" })
		if p := w.LeaseProblem(); !strings.Contains(p, "kcedar-system/kcedar-policy-status") || !strings.Contains(p, "not found") {
			t.Errorf("problem %q", p)
		}
		if got := gaugeValue(t, w.health.failing); got != 1 {
			t.Errorf("kcedar_policy_status_lease_failing %v", got)
		}
		client.Lock()
		missing = false
		client.Unlock()
		// The election retries every 2 seconds.
		eventually(t, "the lease", func() bool { return w.LeaseProblem() == "" && gaugeValue(t, w.health.leading) == 1 })
		if got := gaugeValue(t, w.health.failing); got != 0 {
			t.Errorf("kcedar_policy_status_lease_failing %v after the lease was taken", got)
		}
		cancel()
		<-done
	})
}

// gaugeValue reads g through a registry.
func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	return mfs[0].GetMetric()[0].GetGauge().GetValue()
}
