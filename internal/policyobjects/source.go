package policyobjects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kcedar/kcedar/cedar"
)

// Source watches CedarPolicy and NamespacedCedarPolicy objects with
// informers and feeds their policies to a cedar.Store as extra sources, so
// objects and policy files load as one set with the store's validation, last
// good semantics and atomic swap. Every replica runs its own Source: the API
// server (and etcd behind it) replicates the objects.
//
// Each object is checked on its own first. An object whose text is invalid
// (the admission webhook refuses such writes, but a schema change or a write
// while the webhook was down can produce one) keeps its last valid text
// serving in this process, or serves nothing if it never had one; its status
// says so. So one bad object never blocks the others' updates.
type Source struct {
	Store   *cedar.Store
	Checker *Checker
	Client  dynamic.Interface
	Logger  *slog.Logger
	// Resync is the informers' resync period (0: none).
	Resync time.Duration
	// OnSynced, if set, is called once, after the informers have synced
	// and the first set has been offered to the store.
	OnSynced func()
	// OnChange, if set, is called after every offer to the store.
	OnChange func()

	synced   atomic.Bool
	trigger  chan struct{}
	once     sync.Once
	informer map[schema.GroupVersionResource]cache.SharedIndexInformer

	mu       sync.Mutex
	verdicts map[string]objectState // by SourceName
	lastSync time.Time
	setHash  string
	metrics  *sourceMetrics
}

// objectState is what the source knows about one object.
type objectState struct {
	kind, namespace, name string
	generation            int64
	content               string
	verdict               Verdict
	// serving is the text that serves: content when valid, else the last
	// valid text seen in this process ("" if none).
	serving           string
	servingGeneration int64
}

func (s *Source) init() {
	s.once.Do(func() {
		if s.Logger == nil {
			s.Logger = slog.Default()
		}
		s.trigger = make(chan struct{}, 1)
		s.verdicts = map[string]objectState{}
		s.informer = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	})
}

// Ready is nil once the informers have synced and the store serves a set.
func (s *Source) Ready() error {
	if !s.synced.Load() {
		return errors.New("policy objects not synced from the API server yet")
	}
	if s.Store.Current() == nil {
		return errors.New("no valid policy set loaded")
	}
	return nil
}

// Synced reports whether the informers have synced.
func (s *Source) Synced() bool { return s.synced.Load() }

// Run starts the informers, waits for them to sync, and then offers the
// objects' policies to the store whenever they change, until ctx ends.
func (s *Source) Run(ctx context.Context) error {
	s.init()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(s.Client, s.Resync)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.kick() },
		UpdateFunc: func(any, any) { s.kick() },
		DeleteFunc: func(any) { s.kick() },
	}
	for _, gvr := range []schema.GroupVersionResource{ClusterResource, NamespacedResource} {
		inf := factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		s.informer[gvr] = inf
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	s.Logger.Info("waiting for policy objects to sync from the API server")
	for _, inf := range s.informer {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return ctx.Err()
		}
	}
	s.offer()
	s.synced.Store(true)
	s.Logger.Info("policy objects synced")
	if s.OnSynced != nil {
		s.OnSynced()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.trigger:
			// Let a burst of events (kubectl apply -f dir/) settle into one load.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
			s.offer()
		}
	}
}

func (s *Source) kick() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// offer checks every object, hands the serving texts to the store and loads.
func (s *Source) offer() {
	var objs []*unstructured.Unstructured
	for _, inf := range s.informer {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				objs = append(objs, u)
			}
		}
	}
	s.mu.Lock()
	next := make(map[string]objectState, len(objs))
	for _, u := range objs {
		kind := KindCluster
		ns := ""
		if u.GetNamespace() != "" {
			kind, ns = KindNamespaced, u.GetNamespace()
		}
		content, _, _ := unstructured.NestedString(u.Object, "spec", "content")
		key := SourceName(kind, ns, u.GetName())
		st := objectState{kind: kind, namespace: ns, name: u.GetName(), generation: u.GetGeneration(), content: content}
		prev, seen := s.verdicts[key]
		if seen && prev.content == content {
			st.verdict = prev.verdict
		} else {
			st.verdict = s.Checker.Check(kind, ns, u.GetName(), content)
		}
		switch {
		case st.verdict.Valid:
			st.serving, st.servingGeneration = content, st.generation
		case seen:
			st.serving, st.servingGeneration = prev.serving, prev.servingGeneration
		}
		if !st.verdict.Valid && (!seen || prev.content != content) {
			s.Logger.Error("invalid policy object; its last valid version (if any) keeps serving", "object", key, "errors", st.verdict.Message())
		}
		next[key] = st
	}
	s.verdicts = next
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	srcs := make([]cedar.Source, 0, len(keys))
	h := sha256.New()
	for _, k := range keys {
		st := next[k]
		if st.serving == "" {
			continue
		}
		srcs = append(srcs, cedar.Source{Name: k, Data: []byte(st.serving), Namespace: st.namespace})
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(st.serving), st.serving)
	}
	s.lastSync = time.Now()
	s.setHash = hex.EncodeToString(h.Sum(nil))[:16]
	s.mu.Unlock()
	s.Store.SetSources(srcs)
	_ = s.Store.Load() // the store logs and reports its errors
	s.observe()
	if s.OnChange != nil {
		s.OnChange()
	}
}

// ObjectStatus is the status an object should have, computed from what this
// replica serves.
type ObjectStatus struct {
	Kind, Namespace, Name string
	Status                PolicyStatus
}

// Statuses returns the desired status of every object this source knows.
// The store's latest error, when it names an object, makes that object not
// accepted (for example a policy id another object also uses).
func (s *Source) Statuses() []ObjectStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	storeErr := s.Store.LastError()
	var out []ObjectStatus
	for key, st := range s.verdicts {
		os := ObjectStatus{Kind: st.kind, Namespace: st.namespace, Name: st.name}
		os.Status.ObservedGeneration = st.generation
		cond := acceptedCondition(st, key, storeErr)
		cond.ObservedGeneration = st.generation
		os.Status.Conditions = []metav1.Condition{cond}
		if st.verdict.Valid {
			os.Status.Policies = st.verdict.IDs
			os.Status.PolicyCount = len(st.verdict.IDs)
		}
		out = append(out, os)
	}
	sort.Slice(out, func(i, j int) bool {
		return SourceName(out[i].Kind, out[i].Namespace, out[i].Name) < SourceName(out[j].Kind, out[j].Namespace, out[j].Name)
	})
	return out
}

// maxMessage keeps a condition message under the CRD's limit.
const maxMessage = 32000

func acceptedCondition(st objectState, key string, storeErr error) metav1.Condition {
	c := metav1.Condition{Type: ConditionAccepted}
	switch {
	case !st.verdict.Valid:
		c.Status, c.Reason = "False", "Invalid"
		c.Message = st.verdict.Message()
		if st.serving != "" {
			c.Message += fmt.Sprintf("\n(the version of generation %d keeps serving)", st.servingGeneration)
		} else {
			c.Message += "\n(none of this object's policies serve)"
		}
	case storeErr != nil && mentions(storeErr.Error(), key):
		c.Status, c.Reason = "False", "SetRejected"
		c.Message = "the policy set with this object was not loaded (the last good set keeps serving): " + storeErr.Error()
	default:
		c.Status, c.Reason = "True", "Valid"
		c.Message = st.verdict.Message()
	}
	if len(c.Message) > maxMessage {
		c.Message = c.Message[:maxMessage] + "\n... (truncated; run kcedar validate on the text)"
	}
	return c
}

// mentions reports whether msg names source key at a position (key:line:col).
func mentions(msg, key string) bool { return strings.Contains(msg, key+":") }

// sourceMetrics: objects by state, time since the last sync, set hash.
type sourceMetrics struct {
	objects  *prometheus.GaugeVec
	lastSync prometheus.Gauge
	setHash  *prometheus.GaugeVec
}

// RegisterMetrics adds the source's metrics to reg.
func (s *Source) RegisterMetrics(reg prometheus.Registerer) error {
	s.init()
	m := &sourceMetrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kcedar_policy_objects",
			Help: "Policy objects by kind and state (valid, invalid_serving_last_good, invalid_not_serving).",
		}, []string{"kind", "state"}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policy_objects_last_sync_timestamp_seconds",
			Help: "When the policy objects were last offered to the store (sync age = time() - this).",
		}),
		setHash: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kcedar_policy_objects_set_hash",
			Help: "1 for the hash of the object texts serving now; replicas that agree show the same hash.",
		}, []string{"hash"}),
	}
	for _, c := range []prometheus.Collector{m.objects, m.lastSync, m.setHash} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.metrics = m
	s.mu.Unlock()
	return nil
}

func (s *Source) observe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.metrics
	if m == nil {
		return
	}
	m.objects.Reset()
	for _, k := range []string{KindCluster, KindNamespaced} {
		for _, st := range []string{"valid", "invalid_serving_last_good", "invalid_not_serving"} {
			m.objects.WithLabelValues(k, st).Set(0)
		}
	}
	for _, st := range s.verdicts {
		state := "valid"
		switch {
		case st.verdict.Valid:
		case st.serving != "":
			state = "invalid_serving_last_good"
		default:
			state = "invalid_not_serving"
		}
		m.objects.WithLabelValues(st.kind, state).Inc()
	}
	m.lastSync.Set(float64(s.lastSync.UnixNano()) / 1e9)
	m.setHash.Reset()
	m.setHash.WithLabelValues(s.setHash).Set(1)
}
