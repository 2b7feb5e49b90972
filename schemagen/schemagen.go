package schemagen

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/internal/handle"
	gen "github.com/kcedar/kcedar/internal/schemagen"
)

// Schema is the typed Cedar schema of one cluster.
type Schema handle.Schema

func wrap(s *gen.Schema, err error) (*Schema, error) {
	if err != nil {
		return nil, err
	}
	h := Schema(handle.NewSchema(s))
	return &h, nil
}

// Default is the schema of stock Kubernetes v1.37, from the documents built
// into kcedar.
func Default() (*Schema, error) {
	return wrap(gen.Load(context.Background(), gen.Source{}))
}

// FromCluster reads the discovery and OpenAPI v3 documents of the cluster
// cfg points at, aggregated API servers and custom resources included.
func FromCluster(ctx context.Context, cfg *rest.Config) (*Schema, error) {
	return wrap(gen.Load(ctx, gen.Source{Config: cfg}))
}

// FromDir reads the documents `kcedar schema capture` saved in dir.
func FromDir(dir string) (*Schema, error) {
	return wrap(gen.Load(context.Background(), gen.Source{FromDir: dir}))
}

// Parse reads a schema `kcedar schema export` wrote, in Cedar's schema
// language or its JSON form.
func Parse(data []byte) (*Schema, error) {
	return wrap(gen.ParseSchema(data))
}

// MarshalCedar is the schema in Cedar's schema language, as `kcedar schema
// export` writes it.
func (s *Schema) MarshalCedar() ([]byte, error) {
	return handle.Schema(*s).Get().MarshalCedar()
}

// MarshalJSON is the schema in Cedar's JSON schema format.
func (s *Schema) MarshalJSON() ([]byte, error) {
	return handle.Schema(*s).Get().MarshalJSON()
}
