package engine

import (
	"errors"
	"iter"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
)

type candidateList []*cedarlang.Policy

func (l candidateList) All() iter.Seq2[types.PolicyID, *cedarlib.Policy] {
	return func(yield func(types.PolicyID, *cedarlib.Policy) bool) {
		for _, p := range l {
			if !yield(types.PolicyID(p.ID), p.Compiled()) {
				return
			}
		}
	}
}

// evaluatePolicy evaluates one policy on a fully known request: whether its
// scope and conditions hold, or the error that stopped it.
func evaluatePolicy(p *cedarlang.Policy, ents types.EntityGetter, principal, action, resource types.EntityUID) (bool, error) {
	_, diag := cedarlib.Authorize(candidateList{p}, ents, cedarlib.Request{
		Principal: principal, Action: action, Resource: resource, Context: entities.ContextFor(action),
	})
	if len(diag.Errors) > 0 {
		return false, errors.New(diag.Errors[0].Message)
	}
	return len(diag.Reasons) > 0, nil
}
