package residual

import (
	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/oracle"
)

// oraclePolicies lists every policy of a set for the one-phase oracle.
func oraclePolicies(ps []*cedar.Policy) *oracle.Policies {
	out := &oracle.Policies{}
	for _, p := range ps {
		out.Add(p.ID, p.Compiled)
	}
	return out
}
