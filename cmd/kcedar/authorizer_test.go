package main

import (
	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/handle"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
)

// storeAuthorizer is serve's authorizer over st with a random key.
func storeAuthorizer(schema *schemagen.Schema, st *store.Store, opts engine.EngineOptions) *cedar.Authorizer {
	opts.CacheSize = engine.DefaultCacheSize
	a := cedar.Authorizer(handle.NewAuthorizer(st, schema, engine.NewCodec(engine.RandomKeyring()), opts))
	return &a
}
