package main

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/metadata"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cluster/schemarefresh"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	publicschema "github.com/kcedar/kcedar/schemagen"
)

// schemaTarget moves serve's policy source to a refreshed schema
// (schemarefresh.Target).
type schemaTarget struct{ source *cedar.FileSource }

// Apply implements schemarefresh.Target. Writes of policy objects are
// checked against the cluster's new schema at once (what the API serves
// now), whether or not the policies move to it.
func (t schemaTarget) Apply(s *gen.Schema) error {
	return t.source.SetSchema(gen.ToPublic(s).(*publicschema.Schema))
}

// DropPending implements schemarefresh.Target.
func (t schemaTarget) DropPending() { t.source.DropPendingSchema() }

// startSchemaRefresh keeps the schema of a live source in step with the
// cluster (schemarefresh): informers on CRDs and APIServices, a check every
// interval, and a retry of a refused schema whenever the policies change.
// It returns the refresher (for metrics and readiness); nothing runs until
// run is called.
func startSchemaRefresh(src schemaSource, schema *gen.Schema, fingerprint string, interval time.Duration, source *cedar.FileSource, po *policyObjects, logger *slog.Logger) (*schemarefresh.Refresher, func(context.Context) error) {
	r := schemarefresh.New(schema, fingerprint, schemarefresh.ReadDocuments(src.LoadDocuments), schemaTarget{source: source}, logger)
	r.Interval = interval
	// The policies changed: a refused schema may validate now.
	source.Subscribe(func(ev cedar.ReloadEvent) {
		if ev.Changed && !ev.Repeat {
			r.Retry()
		}
	})
	if po != nil {
		po.changed = r.Retry
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
func loadServeSchema(ctx context.Context, src schemaSource) (*gen.Schema, string, error) {
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
	s, err := gen.Generate(docs)
	return s, fp, err
}
