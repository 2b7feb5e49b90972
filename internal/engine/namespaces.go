package engine

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// nsValue is what a request's namespaceObject is in one world.
//
// Soundness: a namespace the lookup does not know (the request's namespace
// is open, the lookup has not seen it yet, it is being created, or no lookup
// is configured) is unknown, never "a namespace without labels". A policy
// that reads it is then partially evaluated twice, with namespaceObject an
// unknown value and with it absent, and its residual is
// `if resource has namespaceObject then <present> else <absent>`: a permit
// that needs it cannot allow, a forbid that could need it denies (or, where
// admission will see the request, both become conditions, evaluated with
// the namespace as the callback's lookup knows it).
type nsValue struct {
	applies bool // the entity has the attribute in this world
	known   bool
	rec     types.Record
	maps    map[types.EntityUID]types.Entity
}

type nsConverted struct {
	rec  types.Record
	maps map[types.EntityUID]types.Entity
}

// namespaceValue finds namespaceObject for req in the world where the
// attributes in absent are absent.
func (e *Engine) namespaceValue(target entities.Target, req *entities.Request, absent map[string]bool) nsValue {
	if !target.HasNamespaceObject() || absent[schemagen.AttrNamespace] {
		return nsValue{}
	}
	if req.Namespace == "" || e.namespaces == nil {
		return nsValue{applies: true}
	}
	obj, ok := e.namespaces.Namespace(req.Namespace)
	if !ok || obj == nil {
		return nsValue{applies: true}
	}
	rv := entities.NamespaceVersion(obj)
	key := req.Namespace + "\x00" + rv
	if rv != "" {
		if c, ok := e.nsObjects.get(key); ok {
			return nsValue{applies: true, known: true, rec: c.rec, maps: c.maps}
		}
	}
	conv := entities.NewObjectConverter(e.schema)
	c := &nsConverted{rec: conv.NamespaceObject(obj), maps: conv.Maps}
	if rv != "" {
		e.nsObjects.put(key, c)
	}
	return nsValue{applies: true, known: true, rec: c.rec, maps: c.maps}
}

// namespaceKey is what the decision cache adds to a request's key: the
// version of its namespace's object, so a relabel changes the answer.
// cacheable is false when the object has no resourceVersion to tell
// versions apart.
func (e *Engine) namespaceKey(req *entities.Request) (key string, cacheable bool) {
	if e.namespaces == nil || !req.ResourceRequest || req.Namespace == "" {
		return "", true
	}
	obj, ok := e.namespaces.Namespace(req.Namespace)
	if !ok || obj == nil {
		return "\x03unknown", true
	}
	rv := entities.NamespaceVersion(obj)
	return "\x03rv:" + rv, rv != ""
}

// readsNamespace reports whether p's residual may depend on namespaceObject.
func readsNamespace(in *policyInputs) bool {
	return in.resourceWhole || slices.Contains(in.resourceAttrs, schemagen.AttrNamespaceObject)
}

// mayReadNamespace reports whether a candidate may read namespaceObject:
// only then is the namespace looked up (or left unknown). The set's readers
// are found once, at load (namespaceReaders), so a set where none reads it
// pays nothing per candidate. Permits read one at a time are not known in
// advance: any enforced permit of the set that reads it counts.
func (e *Engine) mayReadNamespace(cands candidates) bool {
	if len(e.nsReaders) == 0 {
		return false
	}
	if cands.enforced() && e.permitReadsNamespace {
		return true
	}
	for _, p := range cands.fixed {
		if e.nsReaders[p] {
			return true
		}
	}
	return false
}

// namespaceReadersAfter is the set of ps's policies that read
// namespaceObject (nil when none does), and the same by position, taking
// what prev (the engine of the set serving before; nil: none) found for the
// policies the two sets share: those ps kept from prev's set when derived
// from it (PolicySet.KeptFrom, by position, moved copies included), else
// the same *Policy under the same id. Only the others are analysed (in
// parallel), so a reload by a change analyses the policies new to the set.
func namespaceReadersAfter(prev *Engine, ps *cedarlang.PolicySet) (map[*cedarlang.Policy]bool, []bool) {
	reads := make([]bool, len(ps.Policies))
	var oldOf []int32
	if prev != nil {
		oldOf, _ = ps.KeptFrom(prev.policies)
	}
	var analyse []int32
	if oldOf != nil && len(prev.nsReadsAt) == len(prev.policies.Policies) {
		for i, o := range oldOf {
			if o >= 0 {
				reads[i] = prev.nsReadsAt[o] // kept: the same text
			} else {
				analyse = append(analyse, int32(i))
			}
		}
	} else {
		analyse = make([]int32, len(ps.Policies))
		for i := range analyse {
			analyse[i] = int32(i)
		}
	}
	parallel.For(len(analyse), func(k int) {
		i := analyse[k]
		p := ps.Policies[i]
		if prev != nil && oldOf == nil {
			if q, ok := prev.policies.Get(p.ID); ok && q == p {
				reads[i] = prev.nsReaders[p]
				return
			}
		}
		reads[i] = readsNamespace(readInputs(p))
	})
	var out map[*cedarlang.Policy]bool
	for i, r := range reads {
		if r {
			if out == nil {
				out = map[*cedarlang.Policy]bool{}
			}
			out[ps.Policies[i]] = true
		}
	}
	return out, reads
}
