package cedar

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"
)

// CandidatesAnyPrincipal returns, in policy order, the policies whose scope
// may match verb on resourceType for some principal: the candidates of a
// question that leaves the principal open ("who can ..."). The slice is
// freshly allocated.
func (ps *PolicySet) CandidatesAnyPrincipal(verb string, resourceType types.EntityType) []*Policy {
	var idx []int
	for _, a := range [2]string{verb, anyKey} {
		for _, rt := range [2]types.EntityType{resourceType, anyKey} {
			b := ps.index.buckets[bucketKey{a, rt}]
			if b == nil {
				continue
			}
			idx = append(idx, b.anyPrincipal...)
			for _, l := range b.byPrincipal {
				idx = append(idx, l...)
			}
		}
	}
	if len(idx) == 0 {
		return nil
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := make([]*Policy, len(idx))
	for i, j := range idx {
		out[i] = ps.Policies[j]
	}
	return out
}

// ResourceTypesFor returns the resource types (other than "every type") the
// scopes of the policies that may match verb name, sorted, and whether some
// policy's scope allows every resource type.
func (ps *PolicySet) ResourceTypesFor(verb string) (typesNamed []types.EntityType, anyType bool) {
	seen := map[types.EntityType]bool{}
	for k := range ps.index.buckets {
		if k.action != verb && k.action != anyKey {
			continue
		}
		if k.resourceType == anyKey {
			anyType = true
			continue
		}
		seen[k.resourceType] = true
	}
	for t := range seen {
		typesNamed = append(typesNamed, t)
	}
	slices.Sort(typesNamed)
	return typesNamed, anyType
}
