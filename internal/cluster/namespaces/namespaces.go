// Package namespaces keeps the cluster's Namespace objects in an informer
// and answers them as resource.namespaceObject (an entities.NamespaceLookup),
// treating every namespace as unknown while the informer's view is stale.
package namespaces

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kcedar/kcedar/internal/entities"
)

// DefaultMaxStaleness is how long an Informer keeps answering
// from its cache after its watch failed before it treats every namespace as
// unknown.
const DefaultMaxStaleness = 30 * time.Second

// Informer is the entities.NamespaceLookup kcedar serve uses against a
// cluster: a client-go shared informer on Namespaces.
//
// Staleness. The informer sees a change after the API server's watch
// delivers it (normally well under a second). Until then a decision uses the
// labels it had: a namespace labelled restricted a moment ago can still be
// allowed by a permit, exactly as a ValidatingAdmissionPolicy's
// namespaceObject (also from an informer) or RBAC's own cache would. What
// kcedar adds to that window is nothing from its caches (decisions are
// cached by the namespace's resourceVersion) and at most MaxStaleness when
// the watch breaks: the informer records watch errors, and once its last
// error is newer than its last event and older than MaxStaleness, every
// namespace is unknown, so a forbid that reads namespaceObject denies and a
// permit that needs it does not allow. Before the first list completes the
// same holds. The API server's own webhook cache
// (--authorization-webhook-cache-authorized-ttl) adds its TTL on top.
type Informer struct {
	informer     cache.SharedIndexInformer
	MaxStaleness time.Duration

	objects     sync.Map     // name -> map[string]any
	lastEvent   atomic.Int64 // unix nanoseconds of the last event from the API server
	lastError   atomic.Int64 // unix nanoseconds of the last watch error
	watchErrors atomic.Int64
	now         func() time.Time

	age, synced prometheus.GaugeFunc
	errors      prometheus.CounterFunc
}

var _ entities.NamespaceLookup = (*Informer)(nil)

// NewInformer returns an informer on client's Namespaces; Run it.
func NewInformer(client kubernetes.Interface) *Informer {
	n := &Informer{MaxStaleness: DefaultMaxStaleness, now: time.Now}
	factory := informers.NewSharedInformerFactory(client, 0)
	n.informer = factory.Core().V1().Namespaces().Informer()
	_ = n.informer.SetWatchErrorHandler(func(r *cache.Reflector, err error) {
		n.watchErrors.Add(1)
		n.lastError.Store(n.now().UnixNano())
		cache.DefaultWatchErrorHandler(context.Background(), r, err)
	})
	_, _ = n.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.store(obj) },
		UpdateFunc: func(_, obj any) { n.store(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ns, ok := obj.(*corev1.Namespace); ok {
				n.objects.Delete(ns.Name)
			}
			n.lastEvent.Store(n.now().UnixNano())
		},
	})
	n.age = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kcedar_namespace_informer_last_sync_seconds",
		Help: "Seconds since the Namespace informer last received an event (or list) from the API server. Grows on a quiet cluster; read it with kcedar_namespace_informer_watch_errors_total.",
	}, func() float64 {
		last := n.lastEvent.Load()
		if last == 0 {
			return -1
		}
		return n.now().Sub(time.Unix(0, last)).Seconds()
	})
	n.synced = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kcedar_namespace_informer_fresh",
		Help: "1 when namespaceObject is filled from the Namespace informer; 0 before its first list and while its watch has been failing for longer than the maximum staleness (every namespace is then unknown).",
	}, func() float64 {
		if n.fresh() {
			return 1
		}
		return 0
	})
	n.errors = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kcedar_namespace_informer_watch_errors_total",
		Help: "Watch errors of the Namespace informer.",
	}, func() float64 { return float64(n.watchErrors.Load()) })
	return n
}

// Run runs the informer until ctx is done.
func (n *Informer) Run(ctx context.Context) { n.informer.RunWithContext(ctx) }

// HasSynced reports whether the first list has completed.
func (n *Informer) HasSynced() bool { return n.informer.HasSynced() }

// Describe and Collect make the informer's metrics a prometheus.Collector.
func (n *Informer) Describe(ch chan<- *prometheus.Desc) {
	n.age.Describe(ch)
	n.synced.Describe(ch)
	n.errors.Describe(ch)
}

func (n *Informer) Collect(ch chan<- prometheus.Metric) {
	n.age.Collect(ch)
	n.synced.Collect(ch)
	n.errors.Collect(ch)
}

// fresh reports whether the cache may be answered from.
func (n *Informer) fresh() bool {
	if !n.informer.HasSynced() {
		return false
	}
	lastErr, lastEvent := n.lastError.Load(), n.lastEvent.Load()
	if lastErr == 0 || lastErr <= lastEvent {
		return true
	}
	return n.now().Sub(time.Unix(0, lastErr)) <= n.MaxStaleness
}

// Namespace implements entities.NamespaceLookup.
func (n *Informer) Namespace(name string) (map[string]any, bool) {
	if !n.fresh() {
		return nil, false
	}
	v, ok := n.objects.Load(name)
	if !ok {
		return nil, false
	}
	return v.(map[string]any), true
}

// Get is the Namespace name as the informer holds it, for a caller that
// wants the object rather than the JSON Namespace gives; an error for one
// it does not hold, and while its view is stale.
func (n *Informer) Get(name string) (*corev1.Namespace, error) {
	if !n.fresh() {
		return nil, fmt.Errorf("the Namespace informer's view is stale")
	}
	obj, ok, err := n.informer.GetStore().GetByKey(name)
	if err != nil {
		return nil, err
	}
	ns, isNS := obj.(*corev1.Namespace)
	if !ok || !isNS {
		return nil, fmt.Errorf("namespace %q not found", name)
	}
	return ns, nil
}

func (n *Informer) store(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	n.lastEvent.Store(n.now().UnixNano())
	if m, ok := Object(ns); ok {
		n.objects.Store(ns.Name, m)
	} else {
		n.objects.Delete(ns.Name) // unknown rather than wrong
	}
}

// Object is ns as an entities.NamespaceLookup returns it: JSON decoded
// with UseNumber, with its apiVersion and kind (informers drop them).
func Object(ns *corev1.Namespace) (map[string]any, bool) {
	c := ns.DeepCopy()
	c.APIVersion, c.Kind = "v1", "Namespace"
	c.ManagedFields = nil
	b, err := json.Marshal(c)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, false
	}
	return m, true
}
