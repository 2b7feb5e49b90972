package kube138

import (
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// oracle decides requests as `kcedar authorize` does, offline, on the same
// policies and the same default schema as the `kcedar serve` under test,
// with no Namespace objects (kcedar serve has no cluster to read them from).
type oracle struct {
	decider *offline.Decider
	schema  *schemagen.Schema
}

// newOracle loads and checks the policies at paths (files or directories)
// as `kcedar authorize --policies` does.
func newOracle(t *testing.T, paths []string) *oracle {
	t.Helper()
	checker, err := lint.NewChecker(embeddedschema.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := checker.LoadPolicies(paths)
	if err != nil {
		t.Fatalf("loading %v: %v", paths, err)
	}
	return &oracle{decider: offline.NewDeciderWithNamespaces(checker.Schema, ps, nil), schema: checker.Schema}
}

// decide is the offline report of c: its decision for a caller that takes
// conditions, for one that does not, and its outcome with c's admission
// data.
func (o *oracle) decide(c *requestCase) (engine.Report, error) {
	req, adm, err := c.oracleInput()
	if err != nil {
		return engine.Report{}, err
	}
	return o.decider.Decide(req, adm), nil
}
