package offline

import (
	"context"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Decider answers one request offline the way `kcedar serve` does: through
// the same engine.Engine (authorization, encoding of conditions, and the
// callback's evaluation of them).
type Decider struct {
	engine   conditions.Interface
	schema   *schemagen.Schema
	policies *cedarlang.PolicySet
}

// NewDecider signs conditions with a random key (they never leave the process).
func NewDecider(s *schemagen.Schema, ps *cedarlang.PolicySet) *Decider {
	return NewDeciderWithNamespaces(s, ps, nil)
}

// Decide answers req through the engine, as the server would, and renders
// the offline report; adm may be nil.
func (d *Decider) Decide(req *entities.Request, adm *conditions.Admission) engine.Report {
	return d.engine.Report(context.Background(), req, adm)
}

// DefaultOperation is the admission operation a verb arrives as.
func DefaultOperation(verb, subresource string) string {
	return conditions.DefaultOperation(verb, subresource)
}
