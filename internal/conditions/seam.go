package conditions

import (
	"context"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

// ConditionsEvaluator evaluates conditions an Authorizer returned against
// admission data, with KEP-5681's rules. It uses only the conditions and the
// data, never the current policies, except Admit (clusters without the
// feature), which recomputes the conditions. Results are never Conditional;
// malformed or foreign input is a Deny.
type ConditionsEvaluator interface {
	// EvaluateConditions evaluates an upstream ConditionsAwareDecision.
	EvaluateConditions(ctx context.Context, d *wire.ConditionsAwareDecision, data *AdmissionData) engine.Decision
	// Admit decides an admission request on a cluster without conditional
	// authorization (kcedar's validating webhook).
	Admit(ctx context.Context, data *AdmissionData) engine.Decision
}

// Reporter answers one request offline, as `kcedar authorize` and `kcedar
// test` show it: decided as the server decides, rendered as a Report.
type Reporter interface {
	Report(ctx context.Context, req *entities.Request, adm *Admission) engine.Report
}

// Interface is what the server and the CLI use of the engine of one policy
// set with its conditions: the engine's seams (engine.Interface), the
// conditions' evaluation and the offline report.
type Interface interface {
	engine.Interface
	ConditionsEvaluator
	Reporter
}
