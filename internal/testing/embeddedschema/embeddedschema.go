// Package embeddedschema gives tests the schema `kcedar serve` uses by
// default: generated from the embedded discovery and OpenAPI documents
// (Kubernetes v1.37), once per test binary.
package embeddedschema

import (
	"sync"
	"testing"

	"github.com/kcedar/kcedar/internal/schemagen"
)

var (
	once   sync.Once
	schema *schemagen.Schema
	err    error
)

// Schema is the embedded default schema, generated on first use. Every
// test of the binary gets the same one: it must not be changed.
func Schema(t testing.TB) *schemagen.Schema {
	t.Helper()
	once.Do(func() {
		docs, e := schemagen.Default()
		if e != nil {
			err = e
			return
		}
		schema, err = schemagen.Generate(docs)
	})
	if err != nil {
		t.Fatalf("the embedded schema: %v", err)
	}
	return schema
}
