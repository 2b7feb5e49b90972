package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"
)

// CandidatesAnyPrincipal returns, in policy order, the policies that may
// match verb on resourceType for some principal: the candidates of a
// question that leaves the principal open ("who can ..."). It is every
// policy of the index's buckets for the verb (or any verb) and the type (or
// any type), whatever they are keyed on: a superset of the candidates of
// every request with that verb and type. The slice is freshly allocated.
func (ps *PolicySet) CandidatesAnyPrincipal(verb string, resourceType types.EntityType) []*Policy {
	if ps.index == nil {
		return slices.Clone(ps.Policies)
	}
	ix := ps.index
	var found []int32
	ix.eachBucket(verb, resourceType, allPartitions, func(b *bucket) {
		found = append(found, b.rest...)
		found = append(found, b.keyed...)
		for d := range b.absent {
			found = append(found, b.absent[d]...)
			found = append(found, b.openRest[d]...)
		}
	})
	if len(found) == 0 {
		return nil
	}
	slices.Sort(found)
	found = slices.Compact(found)
	out := make([]*Policy, len(found))
	for i, j := range found {
		out[i] = ps.Policies[j]
	}
	return out
}
