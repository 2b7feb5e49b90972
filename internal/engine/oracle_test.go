package engine

import (
	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/oracle"
)

// oraclePolicies lists every policy of a set for the one-phase oracle.
func oraclePolicies(ps []*cedarlang.Policy) *oracle.Policies {
	out := &oracle.Policies{}
	for _, p := range ps {
		out.Add(p.ID, p.Compiled())
	}
	return out
}
