// Package oracle is an independent one-phase Cedar evaluator for tests: it
// evaluates every policy of a set with cedar-go, without kcedar's index,
// partial evaluation or caches, and applies kcedar's rule that a forbid that
// fails to evaluate denies. Differential tests compare kcedar's decisions
// with it. Test code only: no production package imports it.
package oracle

import (
	"iter"
	"sort"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
)

// Result is a one-phase decision: "Allow", "Deny" or "NoOpinion", with the
// ids of the policies that decided it and the errors met.
type Result struct {
	Decision string
	Policies []string
	Errors   []string
}

// Policies are compiled policies by id, in order.
type Policies struct {
	IDs      []string
	Compiled []*cedarlib.Policy
}

// Add appends a policy.
func (ps *Policies) Add(id string, p *cedarlib.Policy) {
	ps.IDs = append(ps.IDs, id)
	ps.Compiled = append(ps.Compiled, p)
}

// All implements cedar-go's PolicyIterator.
func (ps *Policies) All() iter.Seq2[types.PolicyID, *cedarlib.Policy] {
	return func(yield func(types.PolicyID, *cedarlib.Policy) bool) {
		for i, p := range ps.Compiled {
			if !yield(types.PolicyID(ps.IDs[i]), p) {
				return
			}
		}
	}
}

// Evaluate decides a fully known request over every policy with Cedar's
// rules, except that an erroring forbid denies. The context is
// {verb: <action id>}, as kcedar's.
func Evaluate(policies *Policies, entities types.EntityGetter, principal, action, resource types.EntityUID) Result {
	effect := map[types.PolicyID]types.Effect{}
	for i, p := range policies.Compiled {
		effect[types.PolicyID(policies.IDs[i])] = p.Effect()
	}
	dec, diag := cedarlib.Authorize(policies, entities, cedarlib.Request{
		Principal: principal, Action: action, Resource: resource,
		Context: types.NewRecord(types.RecordMap{"verb": types.String(action.ID)}),
	})
	var res Result
	var erroringForbids []string
	for _, e := range diag.Errors {
		res.Errors = append(res.Errors, "policy "+string(e.PolicyID)+": "+e.Message)
		if effect[e.PolicyID] == types.Forbid {
			erroringForbids = append(erroringForbids, string(e.PolicyID))
		}
	}
	sort.Strings(res.Errors)
	switch {
	case dec == types.Deny && len(diag.Reasons) > 0 || len(erroringForbids) > 0:
		res.Decision = "Deny"
		if dec == types.Deny {
			for _, r := range diag.Reasons {
				res.Policies = append(res.Policies, string(r.PolicyID))
			}
		}
		res.Policies = append(res.Policies, erroringForbids...)
	case dec == types.Allow:
		res.Decision = "Allow"
		for _, r := range diag.Reasons {
			res.Policies = append(res.Policies, string(r.PolicyID))
		}
	default:
		res.Decision = "NoOpinion"
	}
	sort.Strings(res.Policies)
	return res
}
