package main

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/entities"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/residual"
	publicschema "github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

// servedPolicies is what kcedar serve serves for the policies of paths,
// validated against schema, namespaceObject filled from namespaces (nil:
// unknown), with a random key: the server over its authorizer, on every
// endpoint.
func servedPolicies(t testing.TB, schema *gen.Schema, paths []string, namespaces residual.Namespaces, opts server.Options) *server.Server {
	t.Helper()
	public := gen.ToPublic(schema).(*publicschema.Schema)
	source, err := cedar.NewFileSource(public, paths, cedar.FileSourceOptions{Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := source.Ready(); err != nil {
		t.Fatal(err)
	}
	authz, err := cedar.New(source, public, cedar.Options{Namespaces: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	opts.Admitter, opts.Reviewer, opts.Ready = authz, authz, source.Ready
	srv, err := server.New(authz, opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// namespaceObjects are a test's Namespace objects as serve's informer hands
// them to the authorizer: as JSON (Namespace), never as objects (Get).
type informerObjects struct{ entities.NamespaceLookup }

func (informerObjects) Get(name string) (*corev1.Namespace, error) {
	return nil, fmt.Errorf("namespace %q: only its JSON is at hand", name)
}
