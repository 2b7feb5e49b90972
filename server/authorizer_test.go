package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kcedar/kcedar/cedar"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/schemagen"
)

// served is a Server built as kcedar serve builds one: kcedar's authorizer
// over the FileSource of some paths, on every endpoint, its metrics (the
// server's, the authorizer's and the source's) on a registry of its own,
// its readiness the source's.
type served struct {
	*Server
	source   *cedar.FileSource
	authz    *cedar.Authorizer
	registry *prometheus.Registry
}

// serveConfig is what a test server is made of; the zero value of each
// part is serve's default (a random key, no options).
type serveConfig struct {
	schema *gen.Schema
	paths  []string
	keys   *residual.Keyring
	authz  cedar.Options
	source cedar.FileSourceOptions
	server Options
}

// serve builds the server c describes. A source that does not load is no
// error: the server is then not ready.
func serve(t testing.TB, c serveConfig) *served {
	t.Helper()
	reg := prometheus.NewRegistry()
	schema := publicSchema(c.schema)
	c.source.Registerer, c.source.Logger = reg, quietLogger()
	source, err := cedar.NewFileSource(schema, c.paths, c.source)
	if err != nil {
		t.Fatal(err)
	}
	c.authz.Keys, c.authz.Registerer = c.keys, reg
	authz, err := cedar.New(source, schema, c.authz)
	if err != nil {
		t.Fatal(err)
	}
	o := c.server
	o.Registerer, o.Admitter, o.Reviewer = reg, authz, authz
	if o.AdmissionEnforcer != nil {
		o.AdmissionEnforcer = authz
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	o.Ready = source.Ready
	o.Status = func() string { return source.Status().String() }
	if o.Degraded == nil {
		o.Degraded = func() string { return source.Status().Degraded() }
	}
	s, err := New(authz, o)
	if err != nil {
		t.Fatal(err)
	}
	return &served{Server: s, source: source, authz: authz, registry: reg}
}

// enforced is Options.AdmissionEnforcer for serveConfig: serve replaces it
// with the server's own authorizer.
var enforced AdmissionEnforcer = (*cedar.Authorizer)(nil)

// publicSchema is s wrapped as package schemagen's Schema.
func publicSchema(s *gen.Schema) *schemagen.Schema {
	return gen.ToPublic(s).(*schemagen.Schema)
}

// ServeHTTP serves the server, and its registry at GET /metrics, as kcedar
// serve's listener does.
func (s *served) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/metrics" {
		promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	s.Server.ServeHTTP(w, r)
}

// serveText serves policies, written to a file of a directory of their
// own (returned), validated against the small test schema, with c's other
// parts.
func serveText(t testing.TB, policies string, c serveConfig) (*served, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(policies), 0o644); err != nil {
		t.Fatal(err)
	}
	if c.schema == nil {
		c.schema = schematest.Schema()
	}
	c.paths = []string{dir}
	return serve(t, c), dir
}
