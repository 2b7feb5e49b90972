package engine

import (
	"context"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

// The engine's seams are these small interfaces, after k8s.io/apiserver's
// authorizer.Authorizer and RuleResolver: the offline tools, the access
// reviews and the CLI hold the one they need. The server and package cedar
// hold the concrete *Engine of the set serving now (Serving.Engine): they
// also encode its conditions and ask what admission sees. Every method takes
// a context, and the long ones (who-can, what-can) stop when it is
// cancelled.

// Authorizer decides requests. Open values (an empty name or namespace, a
// "*" group, resource or verb) stand for every value: the request is allowed
// only if it is allowed whatever they are, and denied if some value is
// denied. For a request admission will see, the objects are unknown too, so
// the decision may be Conditional.
type Authorizer interface {
	Authorize(ctx context.Context, req *entities.Request) Decision
}

// ConditionsEvaluator evaluates conditions an Authorizer returned against
// admission data, with KEP-5681's rules. It uses only the conditions and the
// data, never the current policies, except Admit (clusters without the
// feature), which recomputes the conditions. Results are never Conditional;
// malformed or foreign input is a Deny.
type ConditionsEvaluator interface {
	// EvaluateConditions evaluates an upstream ConditionsAwareDecision.
	EvaluateConditions(ctx context.Context, d *wire.ConditionsAwareDecision, data *AdmissionData) Decision
	// Admit decides an admission request on a cluster without conditional
	// authorization (kcedar's validating webhook).
	Admit(ctx context.Context, data *AdmissionData) Decision
}

// RuleResolver answers the access-review questions: who may make a request
// (ResourceAccessReview, kcedar who-can) and what a subject may do
// (SubjectRulesReview, kcedar can-i --list). A cancelled context stops them
// with its error.
type RuleResolver interface {
	WhoCan(ctx context.Context, req *entities.Request) (AccessReview, error)
	WhatCan(ctx context.Context, user entities.UserInfo, namespace string) (RulesReview, error)
}

// Reporter answers one request offline, as `kcedar authorize` and `kcedar
// test` show it: decided as the server decides, rendered as a Report.
type Reporter interface {
	Report(ctx context.Context, req *entities.Request, adm *Admission) Report
}

// Interface is what the server and the CLI use of the engine of one policy
// set: the four seams and the generation of the set it decides with.
type Interface interface {
	Authorizer
	ConditionsEvaluator
	RuleResolver
	Reporter
	// Generation is the policy set's generation (for logs and metrics).
	Generation() uint64
}
