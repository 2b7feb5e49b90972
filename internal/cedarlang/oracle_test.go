package cedarlang

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/testing/oracle"
)

// evalResult is the one-phase oracle's answer with the policies themselves.
type evalResult struct {
	Decision string // Allow, Deny or NoOpinion
	Policies []*Policy
	Errors   []string
}

// evaluate decides a fully known request over policies with the test
// oracle (cedar-go over every policy; an erroring forbid denies).
func evaluate(policies []*Policy, entities types.EntityGetter, principal, action, resource types.EntityUID) evalResult {
	in := &oracle.Policies{}
	byID := map[string]*Policy{}
	for _, p := range policies {
		in.Add(p.ID, p.Compiled())
		byID[p.ID] = p
	}
	r := oracle.Evaluate(in, entities, principal, action, resource)
	out := evalResult{Decision: r.Decision, Errors: r.Errors}
	for _, id := range r.Policies {
		out.Policies = append(out.Policies, byID[id])
	}
	return out
}
