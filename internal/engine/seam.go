package engine

import (
	"context"

	"github.com/kcedar/kcedar/internal/entities"
)

// The engine's seams are these small interfaces, after k8s.io/apiserver's
// authorizer.Authorizer and RuleResolver: the offline tools, the access
// reviews and the CLI hold the one they need. The server and package cedar
// hold the engine of the set serving now with its conditions
// (internal/conditions), which encode, evaluate and report them. Every method takes
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

// RuleResolver answers the access-review questions: who may make a request
// (ResourceAccessReview, kcedar who-can) and what a subject may do
// (SubjectRulesReview, kcedar can-i --list). A cancelled context stops them
// with its error.
type RuleResolver interface {
	WhoCan(ctx context.Context, req *entities.Request) (AccessReview, error)
	WhatCan(ctx context.Context, user entities.UserInfo, namespace string) (RulesReview, error)
}

// Interface is what the CLI uses of the engine of one policy set: its
// decisions, its access reviews and the generation of the set it decides
// with. Package conditions adds the conditions' seams (conditions.Interface).
type Interface interface {
	Authorizer
	RuleResolver
	// Generation is the policy set's generation (for logs and metrics).
	Generation() uint64
}
