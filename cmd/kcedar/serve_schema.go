package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/metadata"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/cluster/schemarefresh"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
)

// schemaTarget moves serve to a refreshed schema (schemarefresh.Target): the
// policy store, with the policy objects when there are any, and the checker
// of the policy admission webhook.
type schemaTarget struct {
	store     *store.Store
	source    *policyobjects.Source // nil without --policy-objects
	admission *policyobjects.AdmissionHandler
	notify    func() // asks for a status pass; nil without a status writer

	mu      sync.Mutex
	serving *policyobjects.Checker // the serving schema's
}

// Apply implements schemarefresh.Target. Writes are checked against the
// cluster's new schema at once (what the API serves now), whether or not the
// policies move to it.
func (t *schemaTarget) Apply(s *schemagen.Schema) error {
	l, err := lint.NewChecker(s)
	if err != nil {
		return err
	}
	sc := store.SchemaCheck{Schema: s, Validator: l.Validator(), Checker: l}
	checker := policyobjects.NewCheckerFrom(l)
	t.admission.SetChecker(checker)
	if t.source != nil {
		err = t.source.Rebase(sc, checker)
		if t.notify != nil {
			t.notify()
		}
	} else {
		err = t.store.Rebase(sc)
	}
	if err == nil {
		t.mu.Lock()
		t.serving = checker
		t.mu.Unlock()
	}
	return err
}

// DropPending implements schemarefresh.Target.
func (t *schemaTarget) DropPending() {
	t.mu.Lock()
	t.admission.SetChecker(t.serving)
	t.mu.Unlock()
	if t.source != nil {
		t.source.DropPending()
		if t.notify != nil {
			t.notify()
		}
	}
}

// startSchemaRefresh keeps the schema of a live source in step with the
// cluster (schemarefresh): informers on CRDs and APIServices, a check every
// interval, and a retry of a refused schema whenever the policies change.
// It returns the refresher (for metrics and readiness); nothing runs until
// run is called.
func startSchemaRefresh(src schemaSource, schema *schemagen.Schema, fingerprint string, interval time.Duration, policies *store.Store, po *policyObjects, logger *slog.Logger) (*schemarefresh.Refresher, func(context.Context) error) {
	target := &schemaTarget{store: policies, source: po.source, admission: po.admission, serving: po.admission.Checker}
	if po.status != nil {
		target.notify = po.status.Notify
	}
	r := schemarefresh.New(schema, fingerprint, schemarefresh.ReadDocuments(src.LoadDocuments), target, logger)
	r.Interval = interval
	// The policies changed: a refused schema may validate now. Set before
	// server.New, which chains OnReload.
	prev := policies.OnReload
	policies.OnReload = func(res store.ReloadResult) {
		if res.Changed && !res.Repeat {
			r.Retry()
		}
		if prev != nil {
			prev(res)
		}
	}
	if po.source != nil {
		po.source.OnObjectsChanged = r.Retry
	}
	run := func(ctx context.Context) error {
		cfg, err := src.RESTConfig()
		if err != nil {
			return err
		}
		client, err := metadata.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if err := r.Watch(ctx, client); err != nil {
			return err
		}
		go r.Run(ctx)
		logger.Info("schema refresh on", "interval", interval.String(), "watching", "customresourcedefinitions, apiservices")
		return nil
	}
	return r, run
}

// loadServeSchema loads the schema of src; for a live cluster it also
// returns the fingerprint of the documents it was generated from, so schema
// refresh need not generate the schema again while they stay the same.
func loadServeSchema(ctx context.Context, src schemaSource) (*schemagen.Schema, string, error) {
	if !src.IsLive() {
		s, err := src.Load(ctx)
		return s, "", err
	}
	docs, err := src.LoadDocuments(ctx)
	if err != nil {
		return nil, "", err
	}
	fp, err := schemarefresh.Fingerprint(docs)
	if err != nil {
		return nil, "", err
	}
	s, err := schemagen.Generate(docs)
	return s, fp, err
}
