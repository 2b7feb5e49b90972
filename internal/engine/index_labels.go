package engine

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// candidateLabels gives the index the labels of the request's namespace,
// when the set keys policies on them and the namespace lookup knows the
// namespace: the index then finds only the policies of its labels instead
// of every policy keyed on a label. It returns the namespace object it read
// (nil when it read none), which evaluation must read too, so that the
// candidates and the decision see the same version of the namespace.
func (e *Engine) candidateLabels(q *cedarlang.CandidateQuery, target entities.Target, req *entities.Request, absent map[string]bool) *nsValue {
	if q.NamespaceLabels.State != cedarlang.LabelsUnknown || !e.policies.KeysNamespaceLabels() || e.namespaces == nil {
		return nil
	}
	ns := e.namespaceValue(target, req, absent)
	if !ns.known {
		return &ns
	}
	labels, ok := namespaceLabels(ns)
	if !ok {
		// Evaluation knows the namespace but the index is told its labels
		// are unknown: a permit keyed on them could then be skipped as
		// residual-only although it may be satisfied outright.
		q.SkipResidualOnly = false
		return &ns
	}
	q.NamespaceLabels = cedarlang.QueryLabels{State: cedarlang.LabelsKnown, Labels: labels}
	return &ns
}

// namespaceLabels reads the labels of a known namespace object as
// evaluation sees them (resource.namespaceObject.metadata.labels, a tagged
// map entity): none when it has no labels; ok is false when the record is
// not shaped as expected, and the labels are then left unknown.
func namespaceLabels(ns nsValue) (labels map[string]string, ok bool) {
	md, found := ns.rec.Get(schemagen.AttrMetadata)
	mdRec, isRec := md.(types.Record)
	if !found || !isRec {
		return nil, false
	}
	ref, found := mdRec.Get("labels")
	if !found {
		return map[string]string{}, true
	}
	uid, isUID := ref.(types.EntityUID)
	ent, known := ns.maps[uid]
	if !isUID || !known {
		return nil, false
	}
	labels = map[string]string{}
	for k, v := range ent.Tags.All() {
		s, isStr := v.(types.String)
		if !isStr {
			return nil, false
		}
		labels[string(k)] = string(s)
	}
	return labels, true
}
