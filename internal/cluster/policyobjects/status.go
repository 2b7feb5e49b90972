package policyobjects

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// StatusWriter writes the objects' status from one replica: the one holding
// the Lease (client-go leader election). Every replica serves; only the
// leader writes, so replicas never fight over status.
type StatusWriter struct {
	Source *Source
	Client dynamic.Interface
	Leases coordinationv1.LeasesGetter
	// Lease namespace and name; Identity names this replica in it.
	Namespace, Name, Identity string
	Logger                    *slog.Logger
	// Interval between status passes while leading (Notify also triggers one).
	Interval time.Duration

	once    sync.Once
	changed chan struct{}
	health  *leaseHealth
}

func (w *StatusWriter) init() {
	w.once.Do(func() {
		w.changed = make(chan struct{}, 1)
		w.health = newLeaseHealth()
	})
}

func (w *StatusWriter) changes() chan struct{} {
	w.init()
	return w.changed
}

// LeaseProblem describes why the status Lease cannot be read or taken, ""
// while its calls succeed (another replica holding it is no problem). Give
// it to /readyz as a degraded detail.
func (w *StatusWriter) LeaseProblem() string {
	w.init()
	return w.health.problem(w.Namespace + "/" + w.Name)
}

// RegisterMetrics adds the status writer's metrics to reg:
// kcedar_policy_status_lease_failing and kcedar_policy_status_leader.
func (w *StatusWriter) RegisterMetrics(reg prometheus.Registerer) error {
	w.init()
	for _, c := range []prometheus.Collector{w.health.failing, w.health.leading} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Notify asks for a status pass (wire it to Source.OnChange).
func (w *StatusWriter) Notify() {
	select {
	case w.changes() <- struct{}{}:
	default:
	}
}

// Run takes part in the election until ctx ends, writing status while leading.
func (w *StatusWriter) Run(ctx context.Context) {
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	if w.Interval == 0 {
		w.Interval = 10 * time.Second
	}
	changed := w.changes()
	lock := w.health
	lock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name},
		Client:     w.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: w.Identity},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   15 * time.Second,
			RenewDeadline:   10 * time.Second,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Name:            w.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					w.Logger.Info("writing policy object status (leader)", "lease", w.Namespace+"/"+w.Name, "identity", w.Identity)
					lock.leading.Set(1)
					defer lock.leading.Set(0)
					t := time.NewTicker(w.Interval)
					defer t.Stop()
					for {
						if w.Source.Synced() {
							w.WriteAll(ctx)
						}
						select {
						case <-ctx.Done():
							return
						case <-changed:
						case <-t.C:
						}
					}
				},
				OnStoppedLeading: func() { w.Logger.Info("stopped writing policy object status", "identity", w.Identity) },
			},
		})
	}
}

// WriteAll writes every object's status that differs from the desired one.
func (w *StatusWriter) WriteAll(ctx context.Context) {
	for _, st := range w.Source.Statuses() {
		if ctx.Err() != nil {
			return
		}
		if err := w.write(ctx, st); err != nil {
			w.Logger.Debug("status not written; will retry", "object", SourceName(st.Kind, st.Namespace, st.Name), "err", err)
		}
	}
}

func (w *StatusWriter) write(ctx context.Context, st ObjectStatus) error {
	gvr := ClusterResource
	var ri dynamic.ResourceInterface = w.Client.Resource(gvr)
	if st.Kind == KindNamespaced {
		ri = w.Client.Resource(NamespacedResource).Namespace(st.Namespace)
	}
	u, err := ri.Get(ctx, st.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if u.GetGeneration() != st.Status.ObservedGeneration {
		return nil // the source has not seen this generation yet; it will
	}
	var cur PolicyStatus
	if raw, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &cur)
	}
	want := st.Status
	// Keep the transition time while the condition's status holds.
	for i := range want.Conditions {
		want.Conditions[i].LastTransitionTime = metav1.Now()
		for _, c := range cur.Conditions {
			if c.Type == want.Conditions[i].Type && c.Status == want.Conditions[i].Status {
				want.Conditions[i].LastTransitionTime = c.LastTransitionTime
			}
		}
	}
	if equalStatus(cur, want) {
		return nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	if err != nil {
		return err
	}
	u.Object["status"] = m
	_, err = ri.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "kcedar"})
	return err
}

func equalStatus(a, b PolicyStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration || !x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	return a.ObservedGeneration == b.ObservedGeneration && a.PolicyCount == b.PolicyCount && reflect.DeepEqual(nilIfEmpty(a.Policies), nilIfEmpty(b.Policies))
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
