package server

import (
	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/handle"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
)

// storeAuthorizer is kcedar serve's authorizer: the engines of the sets st
// serves, schema unless a set carries its own. nil keys: a random key.
func storeAuthorizer(schema *schemagen.Schema, st *store.Store, keys *engine.Keyring, opts engine.EngineOptions) *cedar.Authorizer {
	if keys == nil {
		keys = engine.RandomKeyring()
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = engine.DefaultCacheSize
	}
	a := cedar.Authorizer(handle.NewAuthorizer(st, schema, engine.NewCodec(keys), opts))
	return &a
}
