package schemagen

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"

	gen "github.com/kcedar/kcedar/internal/schemagen"
)

// Schema is the typed Cedar schema of one cluster.
type Schema struct{ s *gen.Schema }

func init() {
	gen.ToPublic = func(s *gen.Schema) any { return &Schema{s: s} }
	gen.FromPublic = func(public any) *gen.Schema {
		if s, ok := public.(*Schema); ok && s != nil {
			return s.s
		}
		return nil
	}
}

// errNoSchema is the error of a method of a Schema no function made.
var errNoSchema = errors.New("schemagen: a Schema is made by Default, FromCluster, FromDir or Parse")

func wrap(s *gen.Schema, err error) (*Schema, error) {
	if err != nil {
		return nil, err
	}
	return &Schema{s: s}, nil
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
	if s == nil || s.s == nil {
		return nil, errNoSchema
	}
	return s.s.MarshalCedar()
}

// MarshalJSON is the schema in Cedar's JSON schema format.
func (s *Schema) MarshalJSON() ([]byte, error) {
	if s == nil || s.s == nil {
		return nil, errNoSchema
	}
	return s.s.MarshalJSON()
}
