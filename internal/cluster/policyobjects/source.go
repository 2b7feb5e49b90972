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

	"github.com/kcedar/kcedar/internal/store"
)

// Source watches CedarPolicy and NamespacedCedarPolicy objects with
// informers and feeds their policies to a store.Store as extra sources, so
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
	Store *store.Store
	// Checker checks each object against the serving schema; Rebase
	// replaces it when the schema changes.
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
	// OnObjectsChanged, if set, is called after an offer in which an
	// object's text changed, appeared or went away (not for status-only
	// updates), before OnChange.
	OnObjectsChanged func()
	// ServeNamespaced, if set, is asked at every offer and rebase: while it
	// returns false, NamespacedCedarPolicy objects are checked and reported
	// but their policies do not join the set. Call Reoffer when its answer
	// changes.
	ServeNamespaced func() bool

	synced   atomic.Bool
	trigger  chan struct{}
	once     sync.Once
	informer map[schema.GroupVersionResource]cache.SharedIndexInformer

	// applyMu serializes offers and rebases: each computes the sources
	// from the objects and hands them to the store.
	applyMu sync.Mutex
	offered bool // an offer has run (under applyMu)

	mu       sync.Mutex
	verdicts map[string]objectState // by SourceName
	pending  *pendingSchema         // a schema Rebase refused, nil if none
	lastSync time.Time
	setHash  string
	metrics  *sourceMetrics
	texts    map[string]servedText // the serving texts as sources (sourcesOf)
}

// pendingSchema is what kept Rebase from moving to a new schema.
type pendingSchema struct {
	// casualties: objects whose serving text does not validate against the
	// new schema, with what it gives there (by SourceName).
	casualties map[string]Verdict
	// err: the set as a whole did not (files, or ids across objects).
	err error
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
		s.texts = map[string]servedText{}
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
			// At once: the change serves as soon as the store has loaded it.
			// Events of a burst (kubectl apply -f dir/) that arrive during
			// the offer leave one trigger (the channel holds one), so they
			// make one more offer, not one each.
			s.offer()
		}
	}
}

// Reoffer makes the running source offer its objects to the store again
// (after ServeNamespaced changed its answer).
func (s *Source) Reoffer() {
	s.init()
	s.kick()
}

func (s *Source) kick() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// objects lists what the informers hold.
func (s *Source) objects() []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, inf := range s.informer {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				objs = append(objs, u)
			}
		}
	}
	return objs
}

// stateOf is what an object is, before any check.
func stateOf(u *unstructured.Unstructured) (string, objectState) {
	kind := KindCluster
	ns := ""
	if u.GetNamespace() != "" {
		kind, ns = KindNamespaced, u.GetNamespace()
	}
	content, _, _ := unstructured.NestedString(u.Object, "spec", "content")
	return SourceName(kind, ns, u.GetName()), objectState{kind: kind, namespace: ns, name: u.GetName(), generation: u.GetGeneration(), content: content}
}

// judge checks object u as an offer does, given the states of the previous
// offer (before; nil for none): an unchanged text keeps its verdict, and an
// invalid text keeps the previous serving text, if any.
func judge(c *Checker, u *unstructured.Unstructured, before map[string]objectState) (string, objectState) {
	key, st := stateOf(u)
	prev, seen := before[key]
	if seen && prev.content == st.content {
		st.verdict = prev.verdict
	} else {
		st.verdict = c.Check(st.kind, st.namespace, st.name, st.content)
	}
	switch {
	case st.verdict.Valid:
		st.serving, st.servingGeneration = st.content, st.generation
	case seen:
		st.serving, st.servingGeneration = prev.serving, prev.servingGeneration
	}
	return key, st
}

// sourcesOf is what serves of states, in a stable order, and its hash.
// texts (nil: none) keeps each serving text's bytes and SHA-256 from one
// offer to the next, so an offer converts and hashes only the texts that
// changed; it is updated to hold the texts of states alone.
func sourcesOf(states map[string]objectState, texts map[string]servedText) ([]store.Source, string) {
	keys := make([]string, 0, len(states))
	for k := range states {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	srcs := make([]store.Source, 0, len(keys))
	h := sha256.New()
	for _, k := range keys {
		st := states[k]
		if st.serving == "" {
			continue
		}
		t, ok := texts[k]
		if !ok || t.text != st.serving {
			data := []byte(st.serving)
			t = servedText{text: st.serving, data: data, hash: sha256.Sum256(data)}
		}
		srcs = append(srcs, store.Source{Name: k, Data: t.data, Namespace: st.namespace, Hash: t.hash})
		fmt.Fprintf(h, "%d:%s", len(k), k)
		h.Write(t.hash[:])
		if texts != nil {
			texts[k] = t
		}
	}
	for k := range texts {
		if st, ok := states[k]; !ok || st.serving == "" {
			delete(texts, k)
		}
	}
	return srcs, hex.EncodeToString(h.Sum(nil))[:16]
}

// servedText is one object's serving text as a source: its bytes and their
// SHA-256, computed when the text changes.
type servedText struct {
	text string
	data []byte
	hash [32]byte
}

// serving is sourcesOf the states that may serve now (ServeNamespaced).
func (s *Source) serving(states map[string]objectState) ([]store.Source, string) {
	if s.ServeNamespaced == nil || s.ServeNamespaced() {
		return sourcesOf(states, s.texts)
	}
	cluster := make(map[string]objectState, len(states))
	for k, st := range states {
		if st.kind != KindNamespaced {
			cluster[k] = st
		}
	}
	return sourcesOf(cluster, s.texts)
}

// offer checks every object, hands the serving texts to the store and loads.
func (s *Source) offer() {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.offered = true
	objs := s.objects()
	s.mu.Lock()
	next := make(map[string]objectState, len(objs))
	for _, u := range objs {
		key, st := judge(s.Checker, u, s.verdicts)
		prev, seen := s.verdicts[key]
		if !st.verdict.Valid && (!seen || prev.content != st.content) {
			s.Logger.Error("invalid policy object; its last valid version (if any) keeps serving", "object", key, "errors", st.verdict.Message())
		}
		next[key] = st
	}
	changed := len(next) != len(s.verdicts)
	for key, st := range next {
		if prev, ok := s.verdicts[key]; !ok || prev.content != st.content {
			changed = true
		}
	}
	s.verdicts = next
	srcs, hash := s.serving(next)
	s.lastSync = time.Now()
	s.setHash = hash
	s.mu.Unlock()
	s.Store.SetSources(srcs)
	_ = s.Store.Load() // the store logs and reports its errors
	s.observe()
	if changed && s.OnObjectsChanged != nil {
		s.OnObjectsChanged()
	}
	if s.OnChange != nil {
		s.OnChange()
	}
}

// Rebase moves the objects and the store to a new schema: checker and sc
// are built from it. Every object is checked against it; an object whose
// text is invalid there but whose last valid text is fine keeps serving that,
// as in an offer. If the text of some object that serves now does not
// validate against the new schema, or the set as a whole does not
// (store.Store.RebaseSources: the files too), nothing changes: the last good
// set keeps serving with the schema it was checked against, those objects
// report Accepted=False (reason SchemaChanged, with what `kcedar validate`
// prints against the new schema) until a Rebase succeeds or DropPending,
// and the error lists every problem. Offers go on meanwhile against the
// serving schema. Call Rebase again after the objects change to retry.
func (s *Source) Rebase(sc store.SchemaCheck, checker *Checker) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if !s.offered {
		// Nothing offered yet: the first offer checks against the new schema.
		s.Checker = checker
		return s.Store.Rebase(sc)
	}
	objs := s.objects()
	s.mu.Lock()
	next := make(map[string]objectState, len(objs))
	casualties := map[string]Verdict{}
	for _, u := range objs {
		key, st := stateOf(u)
		prev, seen := s.verdicts[key]
		st.verdict = checker.Check(st.kind, st.namespace, st.name, st.content)
		switch {
		case st.verdict.Valid:
			st.serving, st.servingGeneration = st.content, st.generation
		case seen && prev.serving != "":
			v := st.verdict
			if prev.serving != st.content {
				v = checker.Check(st.kind, st.namespace, st.name, prev.serving)
			}
			st.serving, st.servingGeneration = prev.serving, prev.servingGeneration
			if !v.Valid {
				casualties[key] = v
			}
		default:
			st.serving = ""
		}
		next[key] = st
	}
	if len(casualties) > 0 {
		s.pending = &pendingSchema{casualties: casualties}
		s.mu.Unlock()
		s.observe()
		keys := make([]string, 0, len(casualties))
		for k := range casualties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		msgs := make([]string, len(keys))
		for i, k := range keys {
			msgs[i] = casualties[k].Message()
		}
		return fmt.Errorf("%d policy objects that serve do not validate against the new schema (%s):\n%s", len(keys), strings.Join(keys, ", "), strings.Join(msgs, "\n"))
	}
	srcs, hash := s.serving(next)
	s.mu.Unlock()
	if err := s.Store.RebaseSources(sc, srcs); err != nil {
		s.mu.Lock()
		s.pending = &pendingSchema{err: err}
		s.mu.Unlock()
		s.observe()
		return err
	}
	s.mu.Lock()
	s.verdicts, s.pending, s.Checker = next, nil, checker
	s.lastSync, s.setHash = time.Now(), hash
	s.mu.Unlock()
	s.observe()
	return nil
}

// DropPending forgets a schema Rebase refused (the cluster's API is back to
// the schema that serves): the objects it made Accepted=False are judged
// against the serving schema again.
func (s *Source) DropPending() {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	s.pending = nil
	s.mu.Unlock()
	s.observe()
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
		cond := acceptedCondition(st, key, storeErr, s.pending)
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

// schemaChanged ends the message of an object the new schema refuses.
const schemaChanged = "\n(the cluster's API changed and these policies do not validate against its new schema; the last good policy set keeps serving with the previous schema until this object is fixed or the API is restored)"

func acceptedCondition(st objectState, key string, storeErr error, pending *pendingSchema) metav1.Condition {
	c := metav1.Condition{Type: ConditionAccepted}
	var casualty Verdict
	isCasualty := false
	if pending != nil {
		casualty, isCasualty = pending.casualties[key]
	}
	switch {
	case !st.verdict.Valid:
		c.Status, c.Reason = "False", "Invalid"
		c.Message = st.verdict.Message()
		if st.serving != "" {
			c.Message += fmt.Sprintf("\n(the version of generation %d keeps serving)", st.servingGeneration)
		} else {
			c.Message += "\n(none of this object's policies serve)"
		}
	case isCasualty:
		c.Status, c.Reason = "False", ReasonSchemaChanged
		c.Message = casualty.Message() + schemaChanged
	case storeErr != nil && mentions(storeErr.Error(), key):
		c.Status, c.Reason = "False", "SetRejected"
		c.Message = "the policy set with this object was not loaded (the last good set keeps serving): " + storeErr.Error()
	case pending != nil && pending.err != nil && mentions(pending.err.Error(), key):
		c.Status, c.Reason = "False", ReasonSchemaChanged
		c.Message = pending.err.Error() + schemaChanged
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
			Help: "Policy objects by kind and state (valid, schema_changed: valid but not against the cluster's new schema, invalid_serving_last_good, invalid_not_serving).",
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
		for _, st := range []string{"valid", "schema_changed", "invalid_serving_last_good", "invalid_not_serving"} {
			m.objects.WithLabelValues(k, st).Set(0)
		}
	}
	for key, st := range s.verdicts {
		state := "valid"
		_, casualty := s.pendingCasualty(key)
		switch {
		case st.verdict.Valid && casualty:
			state = "schema_changed"
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

// pendingCasualty: the new schema refused key's serving text (s.mu held).
func (s *Source) pendingCasualty(key string) (Verdict, bool) {
	if s.pending == nil {
		return Verdict{}, false
	}
	v, ok := s.pending.casualties[key]
	return v, ok
}
